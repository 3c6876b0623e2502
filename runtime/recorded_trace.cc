#include "runtime/recorded_trace.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace weft::runtime {
namespace {

std::string TrackName(const RecordedTrack& track) {
  if (track.device < 0) return "host";
  switch (track.kind) {
    case TraceTrackKind::kHostToDevice:
      return "H2D";
    case TraceTrackKind::kDeviceToHost:
      return "D2H";
    case TraceTrackKind::kPeer:
      return "D2D";
    case TraceTrackKind::kStream:
      break;
  }
  return absl::StrCat("stream ", track.stream);
}

}  // namespace

std::optional<double> TracePoint::TimeUs() const {
  if (stamp != nullptr) return stamp->TimeUs();
  if (std::isnan(us)) return std::nullopt;
  return us;
}

absl::string_view RecordedTrace::String(int32_t index) const {
  if (index < 0 || index >= static_cast<int32_t>(strings.size())) return "";
  return strings[index];
}

int64_t RecordedTrace::ApproxBytes() const {
  // A device stamp is shared by the spans it ends and starts: counted once
  // per span, at about its allocation.
  constexpr int64_t kStampBytes = 64;
  int64_t bytes = sizeof(RecordedTrace) + name.capacity() +
                  tracks.capacity() * sizeof(RecordedTrack) +
                  spans.capacity() * sizeof(RecordedSpan) +
                  flows.capacity() * sizeof(flows[0]) +
                  strings.capacity() * sizeof(std::string);
  for (const std::string& s : strings) {
    // Heap bytes of strings past the small-string buffer.
    if (s.capacity() > 15) bytes += s.capacity() + 1;
  }
  for (const RecordedSpan& span : spans) {
    if (span.end.stamp != nullptr) bytes += kStampBytes;
  }
  return bytes;
}

JobTrace RecordedTrace::Build() const {
  JobTrace trace;
  trace.name = name;
  trace.device_clock = device_clock;
  trace.spans_dropped = spans_dropped;
  trace.tracks.reserve(tracks.size());
  for (const RecordedTrack& track : tracks) {
    trace.tracks.push_back(TraceTrack{track.device, TrackName(track)});
  }
  struct Times {
    double start = 0;
    double end = 0;
  };
  std::vector<std::optional<Times>> times(spans.size());
  double origin = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < spans.size(); ++i) {
    const std::optional<double> start = spans[i].start.TimeUs();
    const std::optional<double> end = spans[i].end.TimeUs();
    if (!start.has_value() || !end.has_value()) continue;
    times[i] = Times{*start, std::max(*start, *end)};
    origin = std::min(origin, *start);
  }
  std::vector<int> span_of(spans.size(), -1);
  trace.spans.reserve(spans.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    if (!times[i].has_value()) continue;
    const RecordedSpan& recorded = spans[i];
    TraceSpan span;
    span.track = recorded.track;
    span.kind = recorded.kind;
    span.name = std::string(String(recorded.name));
    span.op = std::string(String(recorded.op));
    span.node = recorded.node;
    span.bytes = recorded.bytes;
    span.start_us = times[i]->start - origin;
    span.end_us = times[i]->end - origin;
    span_of[i] = static_cast<int>(trace.spans.size());
    trace.spans.push_back(std::move(span));
  }
  for (const auto& [from, to] : flows) {
    if (span_of[from] >= 0 && span_of[to] >= 0) {
      trace.flows.push_back(TraceFlow{span_of[from], span_of[to]});
    }
  }
  return trace;
}

}  // namespace weft::runtime
