#include "client/weftctl_read.h"

#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/format.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {

int RunRead(const CommandContext& context) {
  const CliArgs& args = context.args;
  absl::StatusOr<std::optional<int>> chunk = args.Int("chunk_bytes");
  if (!chunk.ok()) return ReportUsage(std::string(chunk.status().message()));
  if (chunk->value_or(0) < 0) {
    return ReportUsage("--chunk_bytes must not be negative");
  }
  absl::StatusOr<BufferData> buffer = context.client->ReadBuffer(
      context.Arg(0), context.Arg(1), chunk->value_or(0));
  if (!buffer.ok()) return ReportError(buffer.status());

  std::string out;
  if (args.Bool("raw")) {
    out = std::move(buffer->data);
  } else {
    const size_t size = ElementSize(buffer->dtype);
    const size_t whole = buffer->data.size() - buffer->data.size() % size;
    if (whole != buffer->data.size()) {
      std::cerr << "weftctl: warning: " << buffer->data.size() - whole
                << " trailing bytes do not form a whole "
                << weft::v1::DType_Name(buffer->dtype)
                << " element; use --raw to see them" << std::endl;
    }
    absl::string_view data(buffer->data.data(), whole);
    if (context.json) {
      absl::StatusOr<std::string> text =
          ElementsJson(context.Arg(0), context.Arg(1), data, buffer->dtype);
      if (!text.ok()) return ReportError(text.status());
      out = *text + "\n";
    } else {
      absl::StatusOr<std::vector<std::string>> lines =
          FormatElements(data, buffer->dtype);
      if (!lines.ok()) return ReportError(lines.status());
      for (const std::string& line : *lines) absl::StrAppend(&out, line, "\n");
    }
  }
  return WriteOutput(args, out);
}

int RunTrace(const CommandContext& context) {
  absl::StatusOr<std::string> trace = context.client->Trace(context.Arg(0));
  if (!trace.ok()) return ReportError(trace.status());
  return WriteOutput(context.args, *trace);
}

}  // namespace weft::client
