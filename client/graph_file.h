// Reading graph files: a weft.v1.Graph as proto3 JSON or protobuf text
// format, chosen by the file name's extension. Modules of user kernels may
// name their code by file (Module.source_file / ptx_file, relative to the
// graph file); loading inlines it, since the daemon takes only inline code.
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

// Reads and parses the file at `path`, then inlines the module files it
// names (InlineModuleFiles, relative to the file's directory). NOT_FOUND
// when it or a module file cannot be read.
absl::StatusOr<weft::v1::Graph> LoadGraphFile(const std::string& path);

// Replaces every module's `source_file` / `ptx_file` with the file's
// contents as `cuda_source` / `ptx`. Relative paths are taken from
// `base_dir`. Errors start with `name` and the module's field
// ("g.json: modules[0].source_file: cannot read ..."): NOT_FOUND for files
// that cannot be read, INVALID_ARGUMENT for empty paths.
absl::Status InlineModuleFiles(weft::v1::Graph& graph,
                               absl::string_view base_dir,
                               absl::string_view name);

}  // namespace weft::client

#endif  // WEFT_CLIENT_GRAPH_FILE_H_
