#include "runtime/job_tracer.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/time/clock.h"

namespace weft::runtime {

RecordingJobTracer::RecordingJobTracer(Options options)
    : options_(std::move(options)),
      stamps_(options_.device_clock && options_.backend->supports_stamps()),
      host_origin_(absl::Now()),
      node_op_(options_.num_nodes, -1),
      event_signaller_(options_.num_events, -1) {
  StartTrace();
}

void RecordingJobTracer::StartTrace() {
  trace_ = RecordedTrace{};
  trace_.name = options_.name;
  trace_.device_clock = options_.device_clock;
  // A span per node, and a few for the job's uploads and downloads.
  trace_.spans.reserve(std::min(options_.num_nodes, 4096) + 4);
}

double RecordingJobTracer::HostNowUs() const {
  return absl::ToDoubleMicroseconds(absl::Now() - host_origin_);
}

int RecordingJobTracer::TrackFor(TraceTrackKind kind, int device,
                                 StreamHandle stream) {
  const int k = static_cast<int>(kind);
  // Copy engines are per device; stream tracks per pooled stream.
  const uint64_t which = kind == TraceTrackKind::kStream ? stream.value : 0;
  const std::pair<int, uint64_t> key((device + 1) * 4 + k, which);
  auto [it, added] =
      track_index_.emplace(key, static_cast<int>(trace_.tracks.size()));
  if (added) trace_.tracks.push_back(RecordedTrack{kind, device, which});
  return it->second;
}

bool RecordingJobTracer::AtCapacity() const {
  return static_cast<int64_t>(trace_.spans.size()) >=
         std::max<int64_t>(options_.max_spans, 1);
}

bool RecordingJobTracer::Full() {
  if (!AtCapacity()) return false;
  ++trace_.spans_dropped;
  return true;
}

int RecordingJobTracer::AddRecordedSpan(const TracedWork& work, int track) {
  RecordedSpan& span = trace_.spans.emplace_back();
  span.kind = work.kind;
  span.track = track;
  NodeStrings* known = nullptr;
  if (work.node >= 0) {
    if (static_cast<size_t>(work.node) >= node_strings_.size()) {
      node_strings_.resize(static_cast<size_t>(work.node) + 1);
    }
    known = &node_strings_[work.node];
  }
  span.name = Intern(work.name, known != nullptr ? &known->name : nullptr);
  span.op = Intern(work.op, known != nullptr ? &known->op : nullptr);
  span.node = work.node;
  span.bytes = work.bytes;
  // Now and then the recent spans' stamps that know their times give them
  // up, so a long trace does not hold a stamp per point until Take: each
  // span is looked at twice, in two sweeps.
  const size_t size = trace_.spans.size();
  if (stamps_ && size % kSweepSpans == 0) {
    ReadKnownStamps(size - std::min(size, 2 * kSweepSpans), size);
  }
  return static_cast<int>(size) - 1;
}

void RecordingJobTracer::ReadKnownStamps(size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    RecordedSpan& span = trace_.spans[i];
    for (TracePoint* point : {&span.start, &span.end}) {
      if (point->stamp == nullptr) continue;
      if (const std::optional<double> us = point->stamp->TimeUs()) {
        point->us = *us;
        point->stamp = nullptr;
      }
    }
  }
}

int32_t RecordingJobTracer::Intern(absl::string_view s, int32_t* hint) {
  if (s.empty()) return -1;
  // A node's spans nearly always repeat its last name: no hashing then.
  if (hint != nullptr && *hint >= 0 && trace_.strings[*hint] == s) {
    return *hint;
  }
  auto [it, added] =
      string_index_.try_emplace(s, static_cast<int32_t>(trace_.strings.size()));
  if (added) trace_.strings.emplace_back(s);
  if (hint != nullptr) *hint = it->second;
  return it->second;
}

bool RecordingJobTracer::Mark(StreamHandle stream, int device, Marked& marked) {
  if (stamps_) {
    absl::StatusOr<std::shared_ptr<const DeviceStamp>> stamp =
        options_.backend->Stamp(stream);
    if (!stamp.ok()) return false;
    marked = Marked{*std::move(stamp), EventHandle{}};
    return true;
  }
  absl::StatusOr<EventHandle> event = options_.events->Acquire(device);
  if (!event.ok() || !options_.backend->RecordEvent(*event, stream).ok()) {
    return false;
  }
  marked = Marked{nullptr, *event};
  return true;
}

void RecordingJobTracer::SetPoint(int span, bool end, const Marked& marked) {
  if (marked.stamp != nullptr) {
    TracePoint& point = end ? trace_.spans[span].end : trace_.spans[span].start;
    point.stamp = marked.stamp;
  } else {
    event_points_.push_back(EventPoint{span, end, marked.event});
  }
}

int RecordingJobTracer::Begin(const TracedWork& work, StreamHandle stream,
                              int device) {
  if (Full()) {
    // The stream's last end no longer starts the next span.
    clean_end_.erase(stream.value);
    return -1;
  }
  // The host track is one, whatever stream orders the work.
  const int track = work.track_device < 0
                        ? TrackFor(TraceTrackKind::kStream, -1, {})
                        : TrackFor(work.track, work.track_device, stream);
  if (!options_.device_clock) {
    const int span = AddRecordedSpan(work, track);
    trace_.spans[span].start.us = HostNowUs();
    return span;
  }
  Marked start;
  auto clean = clean_end_.find(stream.value);
  if (clean != clean_end_.end()) {
    start = clean->second;
  } else if (!Mark(stream, device, start)) {
    return -1;  // traces are best effort
  }
  const int span = AddRecordedSpan(work, track);
  SetPoint(span, /*end=*/false, start);
  return span;
}

void RecordingJobTracer::End(int span, StreamHandle stream, int device) {
  if (span < 0) return;
  if (!options_.device_clock) return;  // the host clock ends at completion
  Marked end;
  if (!Mark(stream, device, end)) {
    clean_end_.erase(stream.value);
    return;
  }
  SetPoint(span, /*end=*/true, end);
  clean_end_[stream.value] = std::move(end);
}

absl::StatusOr<EventHandle> RecordingJobTracer::NewMarker(int device) {
  if (!options_.device_clock) {
    return absl::FailedPreconditionError("the host clock times this trace");
  }
  if (AtCapacity()) return absl::FailedPreconditionError("the trace is full");
  return options_.events->Acquire(device);
}

void RecordingJobTracer::AddSpan(const TracedWork& work, StreamHandle stream,
                                 EventHandle start, EventHandle end) {
  if (!options_.device_clock || Full()) return;
  const int span =
      AddRecordedSpan(work, TrackFor(work.track, work.track_device, stream));
  event_points_.push_back(EventPoint{span, /*end=*/false, start});
  event_points_.push_back(EventPoint{span, /*end=*/true, end});
}

void RecordingJobTracer::Dirty(StreamHandle stream) {
  clean_end_.erase(stream.value);
}

void RecordingJobTracer::NodeIssued(int index, int span,
                                    absl::Span<const int32_t> waits,
                                    int signal_event) {
  if (span < 0) return;
  node_op_[index] = span;
  for (int e : waits) {
    const int from = event_signaller_[e];
    if (from >= 0) trace_.flows.emplace_back(from, span);
  }
  if (signal_event >= 0) event_signaller_[signal_event] = span;
}

void RecordingJobTracer::NodeStarted(int index) {
  if (!options_.device_clock && node_op_[index] >= 0) {
    trace_.spans[node_op_[index]].start.us = HostNowUs();
  }
}

void RecordingJobTracer::NodeCompleted(int index) {
  if (!options_.device_clock && node_op_[index] >= 0) {
    trace_.spans[node_op_[index]].end.us = HostNowUs();
  }
}

void RecordingJobTracer::SpanCompleted(int span) {
  if (!options_.device_clock && span >= 0) {
    trace_.spans[span].end.us = HostNowUs();
  }
}

void RecordingJobTracer::NodeEndsAfter(int index, StreamHandle stream,
                                       int device) {
  if (!options_.device_clock || node_op_[index] < 0) return;
  // Re-marked ends hold marker events until Take: as many as spans at most.
  if (!stamps_ && static_cast<int64_t>(event_points_.size()) >=
                      2 * std::max<int64_t>(options_.max_spans, 1)) {
    return;  // the span keeps its last end
  }
  Marked end;
  if (!Mark(stream, device, end)) return;  // the span keeps its first end
  SetPoint(node_op_[index], /*end=*/true, end);
  clean_end_[stream.value] = std::move(end);
}

std::shared_ptr<const RecordedTrace> RecordingJobTracer::Take() {
  // Marker events are read now, while the job holds them; later points of
  // a span replace earlier ones.
  for (const EventPoint& p : event_points_) {
    RecordedSpan& span = trace_.spans[p.span];
    TracePoint& point = p.end ? span.end : span.start;
    absl::StatusOr<double> time = options_.backend->EventTimeUs(p.event);
    point.stamp = nullptr;
    point.us = time.ok() ? *time : std::numeric_limits<double>::quiet_NaN();
  }
  event_points_.clear();
  // A kept trace holds times, not the backend's stamps, wherever those
  // are known.
  ReadKnownStamps(0, trace_.spans.size());
  auto taken = std::make_shared<const RecordedTrace>(std::move(trace_));
  StartTrace();
  track_index_.clear();
  string_index_.clear();
  node_strings_.clear();
  clean_end_.clear();
  std::fill(node_op_.begin(), node_op_.end(), -1);
  std::fill(event_signaller_.begin(), event_signaller_.end(), -1);
  return taken;
}

}  // namespace weft::runtime
