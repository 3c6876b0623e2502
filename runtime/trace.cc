#include "runtime/trace.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_string.h"

namespace weft::runtime {
namespace {

std::string Num(double v) { return absl::StrFormat("%.3f", v); }

const char* Category(SpanKind kind) {
  switch (kind) {
    case SpanKind::kKernel:
      return "kernel";
    case SpanKind::kCopy:
      return "copy";
    case SpanKind::kHost:
      return "host";
    case SpanKind::kIteration:
      return "iteration";
  }
  return "other";
}

// Process ids: the host is 0, device d is d + 1.
int Pid(const TraceTrack& track) { return track.device + 1; }

}  // namespace

double JobTrace::NodeMakespanUs() const {
  double first = std::numeric_limits<double>::infinity();
  double last = -std::numeric_limits<double>::infinity();
  for (const TraceSpan& span : spans) {
    if (span.node < 0) continue;
    first = std::min(first, span.start_us);
    last = std::max(last, span.end_us);
  }
  return last >= first ? last - first : 0;
}

std::string ToTraceEventJson(const JobTrace& trace) {
  std::vector<std::string> events;
  std::vector<bool> named_process;
  for (size_t t = 0; t < trace.tracks.size(); ++t) {
    const TraceTrack& track = trace.tracks[t];
    const int pid = Pid(track);
    if (pid >= static_cast<int>(named_process.size())) {
      named_process.resize(pid + 1, false);
    }
    if (!named_process[pid]) {
      named_process[pid] = true;
      const std::string process =
          track.device < 0 ? "host" : absl::StrCat("device ", track.device);
      events.push_back(absl::StrCat(R"({"ph":"M","name":"process_name","pid":)",
                                    pid, R"(,"args":{"name":")", process,
                                    R"("}})"));
      events.push_back(
          absl::StrCat(R"({"ph":"M","name":"process_sort_index","pid":)", pid,
                       R"(,"args":{"sort_index":)", pid, "}}"));
    }
    events.push_back(absl::StrCat(R"({"ph":"M","name":"thread_name","pid":)",
                                  pid, R"(,"tid":)", t, R"(,"args":{"name":")",
                                  JsonEscape(track.name), R"("}})"));
  }
  for (const TraceSpan& span : trace.spans) {
    const TraceTrack& track = trace.tracks[span.track];
    std::string args = absl::StrCat(R"("node":)", span.node);
    if (!span.op.empty()) {
      absl::StrAppend(&args, R"(,"op":")", JsonEscape(span.op), R"(")");
    }
    if (span.kind == SpanKind::kCopy) {
      absl::StrAppend(&args, R"(,"bytes":)", span.bytes);
    }
    events.push_back(absl::StrCat(
        R"({"ph":"X","name":")", JsonEscape(span.name), R"(","cat":")",
        Category(span.kind), R"(","pid":)", Pid(track), R"(,"tid":)",
        span.track, R"(,"ts":)", Num(span.start_us), R"(,"dur":)",
        Num(std::max(0.0, span.end_us - span.start_us)), R"(,"args":{)", args,
        "}}"));
  }
  for (size_t i = 0; i < trace.flows.size(); ++i) {
    const TraceFlow& flow = trace.flows[i];
    const TraceSpan& from = trace.spans[flow.from_span];
    const TraceSpan& to = trace.spans[flow.to_span];
    // The start binds to the slice enclosing its timestamp: put it inside
    // the signalling span, at its end.
    const double out =
        from.end_us - std::min(0.001, (from.end_us - from.start_us) / 2);
    events.push_back(
        absl::StrCat(R"({"ph":"s","name":"event wait","cat":"event","id":)", i,
                     R"(,"pid":)", Pid(trace.tracks[from.track]), R"(,"tid":)",
                     from.track, R"(,"ts":)", Num(out), "}"));
    events.push_back(absl::StrCat(
        R"({"ph":"f","bp":"e","name":"event wait","cat":"event","id":)", i,
        R"(,"pid":)", Pid(trace.tracks[to.track]), R"(,"tid":)", to.track,
        R"(,"ts":)", Num(to.start_us), "}"));
  }
  std::string json = absl::StrCat(
      R"({"displayTimeUnit":"ns","otherData":{)", R"("job":")",
      JsonEscape(trace.name), R"(","clock":")",
      trace.device_clock ? "device" : "host", R"(")",
      trace.spans_dropped > 0
          ? absl::StrCat(R"(,"spansDropped":)", trace.spans_dropped)
          : "",
      R"(},"traceEvents":[)");
  for (size_t i = 0; i < events.size(); ++i) {
    if (i > 0) json += ",\n";
    json += events[i];
  }
  json += "]}\n";
  return json;
}

}  // namespace weft::runtime
