// Output formatting for weftctl: aligned tables, one-line job summaries,
// proto3 JSON, and the elements of output buffers as text.
//
// Pure functions of their inputs (no I/O, no clock unless passed), so that
// they are testable and the CLI stays thin.
#ifndef WEFT_CLIENT_FORMAT_H_
#define WEFT_CLIENT_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {

// Proto3 JSON on one line, every field present (defaults included), enums
// by name, field names in lowerCamelCase.
std::string ToJson(const google::protobuf::Message& message);

// Rows of cells as a table: columns padded to their widest cell, two spaces
// apart, the first row being the header. Trailing spaces are trimmed.
std::string Table(const std::vector<std::vector<std::string>>& rows);

// "job <id> <STATE>".
std::string JobLine(const weft::v1::Job& job);
// JobLine, then indented "key: value" lines (graph, priority, times, error).
std::string JobDetails(const weft::v1::Job& job);
// JOB STATE PRIORITY TENANT PROGRESS GRAPH CREATED ("-" for empty cells).
std::string JobsTable(const std::vector<weft::v1::Job>& jobs);

// "3.2s" below a minute, "4m05s" below an hour, else "2h07m"; negative
// durations count as zero.
std::string FormatElapsed(absl::Duration d);
// How long the job has run: from its start (or, while queued, its creation)
// to its end, or to `now` while it has not ended.
absl::Duration JobElapsed(const weft::v1::Job& job, absl::Time now);
// One terminal line of progress, at most `width` characters:
// "[#####.....] 5/10 nodes  50% 3.2s RUNNING". The bar takes the room the
// rest leaves, between 10 and 40 cells.
std::string ProgressLine(const weft::v1::Job& job, absl::Duration elapsed,
                         int width);
// "<CODE_NAME>: <message>", plus " (retry after 250ms)" with a retry hint.
std::string StatusText(const absl::Status& status,
                       std::optional<absl::Duration> retry_after);
// "node <name> <STARTED|FINISHED|FAILED> device <d> stream <s>[: message]".
std::string NodeEventLine(const weft::v1::NodeEvent& event);
// The error of a failed or cancelled job as "<CODE>: <message> (node n)".
std::string JobErrorText(const weft::v1::Job& job);
std::string DevicesTable(const std::vector<weft::v1::Device>& devices);

// "RESOURCE_EXHAUSTED" for google.rpc.Code 8, etc.
std::string CodeName(int code);
// RFC 3339 in UTC with millisecond precision, or "-" when unset.
std::string FormatTimestamp(const google::protobuf::Timestamp& t);
// "512 B", "4.0 KiB", "16.0 GiB".
std::string FormatBytes(uint64_t bytes);

// Bytes per element: 4 for FLOAT32 and INT32, 8 for FLOAT64 and INT64, 1
// for BYTES.
int ElementSize(weft::v1::DType dtype);

// The elements of `data` as `dtype`, one string each: float32 and float64
// with %.9g, integers in decimal, bytes as two hex digits. INVALID_ARGUMENT
// when the size is not a multiple of the element size.
absl::StatusOr<std::vector<std::string>> FormatElements(absl::string_view data,
                                                        weft::v1::DType dtype);
// {"jobId":..,"buffer":..,"dtype":..,"totalBytes":..,"values":[..]} with
// numbers as JSON numbers ("NaN"/"Infinity" as strings, as proto3 JSON
// does) and bytes as hex strings.
absl::StatusOr<std::string> ElementsJson(absl::string_view job_id,
                                         absl::string_view buffer,
                                         absl::string_view data,
                                         weft::v1::DType dtype);

}  // namespace weft::client

#endif  // WEFT_CLIENT_FORMAT_H_
