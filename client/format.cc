#include "client/format.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/json_string.h"
#include "google/protobuf/util/json_util.h"

namespace weft::client {
namespace {

absl::Time ToTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

bool IsSet(const google::protobuf::Timestamp& t) {
  return t.seconds() != 0 || t.nanos() != 0;
}

std::string Progress(const weft::v1::Job& job) {
  return absl::StrCat(job.nodes_done(), "/", job.nodes_total());
}

}  // namespace

int ElementSize(weft::v1::DType dtype) {
  switch (dtype) {
    case weft::v1::FLOAT32:
    case weft::v1::INT32:
      return 4;
    case weft::v1::FLOAT64:
    case weft::v1::INT64:
      return 8;
    default:
      return 1;
  }
}

namespace {

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string JsonNumber(double v, const std::string& text) {
  if (std::isnan(v)) return "\"NaN\"";
  if (std::isinf(v)) return v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  return text;
}

}  // namespace

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.add_whitespace = false;
  std::string out;
  const auto s =
      google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!s.ok()) {
    return absl::StrCat("{\"error\":", JsonString(std::string(s.message())),
                        "}");
  }
  return out;
}

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) {
        line.append(widths[i] - row[i].size() + 2, ' ');
      }
    }
    absl::StripTrailingAsciiWhitespace(&line);
    out += line;
    out += "\n";
  }
  return out;
}

std::string CodeName(int code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

std::string FormatTimestamp(const google::protobuf::Timestamp& t) {
  if (!IsSet(t)) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", ToTime(t),
                          absl::UTCTimeZone());
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f %s", v, units[u]);
}

std::string JobLine(const weft::v1::Job& job) {
  return absl::StrCat("job ", job.id(), " ",
                      weft::v1::JobState_Name(job.state()));
}

std::string JobErrorText(const weft::v1::Job& job) {
  std::string text =
      absl::StrCat(CodeName(job.error().code()), ": ", job.error().message());
  if (!job.error().node().empty()) {
    absl::StrAppend(&text, " (node ", job.error().node(), ")");
  }
  return text;
}

std::string JobDetails(const weft::v1::Job& job) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"  graph:", job.graph_name().empty() ? "-" : job.graph_name()});
  rows.push_back({"  progress:", absl::StrCat(Progress(job), " nodes")});
  rows.push_back({"  priority:", absl::StrCat(job.priority())});
  if (!job.request_id().empty()) {
    rows.push_back({"  request_id:", job.request_id()});
  }
  if (!job.tenant().empty()) rows.push_back({"  tenant:", job.tenant()});
  rows.push_back({"  created:", FormatTimestamp(job.create_time())});
  rows.push_back({"  started:", FormatTimestamp(job.start_time())});
  rows.push_back({"  ended:", FormatTimestamp(job.end_time())});
  if (IsSet(job.start_time()) && IsSet(job.end_time())) {
    rows.push_back(
        {"  duration:", absl::FormatDuration(ToTime(job.end_time()) -
                                             ToTime(job.start_time()))});
  }
  rows.push_back(
      {"  outputs:", job.output_buffers().empty()
                         ? "-"
                         : absl::StrJoin(job.output_buffers(), ", ")});
  // What the job holds on each device it uses while it runs.
  std::vector<std::string> memory;
  for (int d = 0; d < job.device_memory_bytes_size(); ++d) {
    if (job.device_memory_bytes(d) <= 0) continue;
    memory.push_back(
        absl::StrCat("GPU ", d, " ", FormatBytes(job.device_memory_bytes(d))));
  }
  if (!memory.empty()) {
    rows.push_back({"  memory:", absl::StrJoin(memory, ", ")});
  }
  if (!job.queue_reason().empty()) {
    rows.push_back({"  waiting:", job.queue_reason()});
  }
  if (job.has_error() && job.error().code() != 0) {
    rows.push_back({"  error:", JobErrorText(job)});
  }
  return absl::StrCat(JobLine(job), "\n", Table(rows));
}

std::string JobsTable(const std::vector<weft::v1::Job>& jobs) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"JOB", "STATE", "PRIORITY", "TENANT", "PROGRESS", "GRAPH", "CREATED"});
  for (const weft::v1::Job& job : jobs) {
    rows.push_back({job.id(), weft::v1::JobState_Name(job.state()),
                    absl::StrCat(job.priority()),
                    job.tenant().empty() ? "-" : job.tenant(), Progress(job),
                    job.graph_name().empty() ? "-" : job.graph_name(),
                    FormatTimestamp(job.create_time())});
  }
  return Table(rows);
}

std::string FormatElapsed(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  const int64_t tenths = absl::ToInt64Milliseconds(d) / 100;
  if (tenths < 600) return absl::StrFormat("%d.%ds", tenths / 10, tenths % 10);
  const int64_t seconds = tenths / 10;
  if (seconds < 3600) {
    return absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
  }
  return absl::StrFormat("%dh%02dm", seconds / 3600, seconds / 60 % 60);
}

absl::Duration JobElapsed(const weft::v1::Job& job, absl::Time now) {
  const google::protobuf::Timestamp& from =
      IsSet(job.start_time()) ? job.start_time() : job.create_time();
  if (!IsSet(from)) return absl::ZeroDuration();
  const absl::Time to = IsSet(job.end_time()) ? ToTime(job.end_time()) : now;
  return std::max(absl::ZeroDuration(), to - ToTime(from));
}

std::string ProgressLine(const weft::v1::Job& job, absl::Duration elapsed,
                         int width) {
  const int64_t total = job.nodes_total();
  const int64_t done = std::min(job.nodes_done(), total);
  const double fraction =
      total > 0 ? static_cast<double>(done) / static_cast<double>(total)
                : (job.state() == weft::v1::SUCCEEDED ? 1.0 : 0.0);
  const std::string state(
      absl::StripPrefix(weft::v1::JobState_Name(job.state()), "JOB_STATE_"));
  const std::string tail = absl::StrFormat(
      " %d/%d nodes %3d%% %s %s", done, total, static_cast<int>(fraction * 100),
      FormatElapsed(elapsed), state);
  // The bar takes what is left of the line, within reason.
  const int bar = std::clamp(width - static_cast<int>(tail.size()) - 2, 10, 40);
  const int filled = static_cast<int>(fraction * bar);
  std::string line = "[";
  line.append(filled, '#');
  line.append(bar - filled, '.');
  line += "]";
  line += tail;
  if (width > 0 && static_cast<int>(line.size()) > width) line.resize(width);
  return line;
}

std::string StatusText(const absl::Status& status,
                       std::optional<absl::Duration> retry_after) {
  std::string text = absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                                  status.message());
  if (retry_after) {
    absl::StrAppend(
        &text, " (retry after ",
        absl::FormatDuration(absl::Trunc(*retry_after, absl::Milliseconds(1))),
        ")");
  }
  return text;
}

std::string NodeEventLine(const weft::v1::NodeEvent& event) {
  if (event.kind() == weft::v1::NODE_ITERATION) {
    return absl::StrCat(event.node(), ": iteration ", event.iteration());
  }
  if (event.kind() == weft::v1::NODE_BRANCH) {
    return event.branch() >= 0
               ? absl::StrCat(event.node(), ": branch ", event.branch())
               : absl::StrCat(event.node(), ": no branch (", event.message(),
                              ")");
  }
  const std::string& name = weft::v1::NodeEventKind_Name(event.kind());
  absl::string_view kind = absl::StripPrefix(name, "NODE_");
  std::string line = absl::StrCat("node ", event.node(), " ", kind, " device ",
                                  event.device(), " stream ", event.stream());
  if (!event.message().empty()) absl::StrAppend(&line, ": ", event.message());
  return line;
}

std::string DevicesTable(const std::vector<weft::v1::Device>& devices) {
  std::vector<std::vector<std::string>> rows;
  // ARENA_PLANNED: what running jobs' memory plans hold of MEMORY_USED.
  // RESERVED: what running jobs were started against; a queued job starts
  // once its own need fits beside it within MEMORY_TOTAL.
  rows.push_back({"INDEX", "NAME", "UUID", "KIND", "MEMORY_USED",
                  "ARENA_PLANNED", "RESERVED", "MEMORY_CACHED", "MEMORY_TOTAL",
                  "STREAMS_BUSY", "STREAMS_TOTAL"});
  for (const weft::v1::Device& d : devices) {
    rows.push_back({absl::StrCat(d.index()), d.name(), d.uuid(),
                    d.simulated() ? "simulated" : "gpu",
                    FormatBytes(d.memory_used_bytes()),
                    FormatBytes(d.memory_arena_bytes()),
                    FormatBytes(d.memory_reserved_bytes()),
                    FormatBytes(d.memory_cached_bytes()),
                    FormatBytes(d.memory_total_bytes()),
                    absl::StrCat(d.streams_busy()),
                    absl::StrCat(d.streams_total())});
  }
  return Table(rows);
}

absl::StatusOr<std::vector<std::string>> FormatElements(absl::string_view data,
                                                        weft::v1::DType dtype) {
  const int size = ElementSize(dtype);
  if (data.size() % size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        data.size(), " bytes are not a whole number of ",
        weft::v1::DType_Name(dtype), " elements (", size, " bytes each)"));
  }
  std::vector<std::string> out;
  out.reserve(data.size() / size);
  for (size_t i = 0; i < data.size(); i += size) {
    const char* p = data.data() + i;
    switch (dtype) {
      case weft::v1::FLOAT32:
        out.push_back(absl::StrFormat("%.9g", Load<float>(p)));
        break;
      case weft::v1::FLOAT64:
        out.push_back(absl::StrFormat("%.9g", Load<double>(p)));
        break;
      case weft::v1::INT32:
        out.push_back(absl::StrCat(Load<int32_t>(p)));
        break;
      case weft::v1::INT64:
        out.push_back(absl::StrCat(Load<int64_t>(p)));
        break;
      default:
        out.push_back(absl::StrFormat("%02x", static_cast<unsigned char>(*p)));
    }
  }
  return out;
}

absl::StatusOr<std::string> ElementsJson(absl::string_view job_id,
                                         absl::string_view buffer,
                                         absl::string_view data,
                                         weft::v1::DType dtype) {
  absl::StatusOr<std::vector<std::string>> text = FormatElements(data, dtype);
  if (!text.ok()) return text.status();
  const int size = ElementSize(dtype);
  std::vector<std::string> values;
  values.reserve(text->size());
  for (size_t i = 0; i < text->size(); ++i) {
    const char* p = data.data() + i * size;
    switch (dtype) {
      case weft::v1::FLOAT32:
        values.push_back(JsonNumber(Load<float>(p), (*text)[i]));
        break;
      case weft::v1::FLOAT64:
        values.push_back(JsonNumber(Load<double>(p), (*text)[i]));
        break;
      case weft::v1::INT32:
      case weft::v1::INT64:
        values.push_back((*text)[i]);
        break;
      default:
        values.push_back(JsonString((*text)[i]));
    }
  }
  return absl::StrCat("{\"jobId\":", JsonString(job_id),
                      ",\"buffer\":", JsonString(buffer), ",\"dtype\":\"",
                      weft::v1::DType_Name(dtype),
                      "\",\"totalBytes\":", data.size(), ",\"values\":[",
                      absl::StrJoin(values, ","), "]}");
}

}  // namespace weft::client
