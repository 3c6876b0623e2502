// Reading graph files: a weft.v1.Graph as proto3 JSON or protobuf text
// format, chosen by the file name's extension.
//
//   .json                      proto3 JSON (camelCase or proto field names)
//   .textproto .txtpb .pbtxt   text format
//
// Errors are INVALID_ARGUMENT and start with the file name; syntax errors
// carry "file:line:column", and JSON errors about field values name the
// field path (e.g. "nodes[1].args[0].buffer.access").
#ifndef WEFT_CLIENT_GRAPH_FILE_H_
#define WEFT_CLIENT_GRAPH_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {

enum class GraphFormat { kJson, kText };

// INVALID_ARGUMENT for other extensions.
absl::StatusOr<GraphFormat> GraphFormatForPath(absl::string_view path);

// Parses `contents`; `name` (usually the path) prefixes error messages.
absl::StatusOr<weft::v1::Graph> ParseGraph(absl::string_view contents,
                                           GraphFormat format,
                                           absl::string_view name);

// Reads and parses the file at `path`. NOT_FOUND when it cannot be read.
absl::StatusOr<weft::v1::Graph> LoadGraphFile(const std::string& path);

}  // namespace weft::client

#endif  // WEFT_CLIENT_GRAPH_FILE_H_
