#include "runtime/job_tracer.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

const char* TrackName(TraceTrackKind kind) {
  switch (kind) {
    case TraceTrackKind::kHostToDevice:
      return "H2D";
    case TraceTrackKind::kDeviceToHost:
      return "D2H";
    case TraceTrackKind::kPeer:
      return "D2D";
    case TraceTrackKind::kStream:
      break;
  }
  return "stream";
}

}  // namespace

RecordingJobTracer::RecordingJobTracer(Options options)
    : options_(std::move(options)),
      node_op_(options_.num_nodes, -1),
      event_signaller_(options_.num_events, -1) {}

int RecordingJobTracer::TrackFor(TraceTrackKind kind, int device,
                                 StreamHandle stream) {
  const int k = static_cast<int>(kind);
  // Copy engines are per device; stream tracks per pooled stream.
  const uint64_t which = kind == TraceTrackKind::kStream ? stream.value : 0;
  const std::pair<int, uint64_t> key((device + 1) * 4 + k, which);
  auto it = track_index_.find(key);
  if (it != track_index_.end()) return it->second;
  const int track = static_cast<int>(tracks_.size());
  std::string name;
  if (device < 0) {
    name = "host";
  } else if (kind == TraceTrackKind::kStream) {
    name = absl::StrCat("stream ", stream.value);
  } else {
    name = TrackName(kind);
  }
  tracks_.push_back(TraceTrack{device, std::move(name)});
  track_index_.emplace(key, track);
  return track;
}

absl::StatusOr<EventHandle> RecordingJobTracer::Marker(StreamHandle stream,
                                                       int device) {
  WEFT_ASSIGN_OR_RETURN(EventHandle event, options_.events->Acquire(device));
  WEFT_RETURN_IF_ERROR(options_.backend->RecordEvent(event, stream));
  return event;
}

int RecordingJobTracer::Begin(const TracedWork& work, StreamHandle stream,
                              int device) {
  TracedOp traced;
  traced.kind = work.kind;
  // The host track is one, whatever stream orders the work.
  traced.track = work.track_device < 0
                     ? TrackFor(TraceTrackKind::kStream, -1, {})
                     : TrackFor(work.track, work.track_device, stream);
  traced.name = std::string(work.name);
  traced.op = std::string(work.op);
  traced.node = work.node;
  traced.bytes = work.bytes;
  if (options_.device_clock) {
    auto clean = clean_end_.find(stream.value);
    if (clean != clean_end_.end()) {
      traced.start = clean->second;
    } else {
      absl::StatusOr<EventHandle> marker = Marker(stream, device);
      if (!marker.ok()) return -1;  // traces are best effort
      traced.start = *marker;
    }
  } else {
    traced.host_start = absl::Now();
  }
  ops_.push_back(std::move(traced));
  return static_cast<int>(ops_.size()) - 1;
}

void RecordingJobTracer::End(int span, StreamHandle stream, int device) {
  if (span < 0) return;
  if (!options_.device_clock) return;  // the host clock ends at completion
  absl::StatusOr<EventHandle> marker = Marker(stream, device);
  if (!marker.ok()) {
    clean_end_.erase(stream.value);
    return;
  }
  ops_[span].end = *marker;
  clean_end_[stream.value] = *marker;
}

absl::StatusOr<EventHandle> RecordingJobTracer::NewMarker(int device) {
  if (!options_.device_clock) {
    return absl::FailedPreconditionError("the host clock times this trace");
  }
  return options_.events->Acquire(device);
}

void RecordingJobTracer::AddSpan(const TracedWork& work, StreamHandle stream,
                                 EventHandle start, EventHandle end) {
  if (!options_.device_clock) return;
  TracedOp traced;
  traced.kind = work.kind;
  traced.track = TrackFor(work.track, work.track_device, stream);
  traced.name = std::string(work.name);
  traced.op = std::string(work.op);
  traced.node = work.node;
  traced.bytes = work.bytes;
  traced.start = start;
  traced.end = end;
  ops_.push_back(std::move(traced));
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
    if (from >= 0) flows_.emplace_back(from, span);
  }
  if (signal_event >= 0) event_signaller_[signal_event] = span;
}

void RecordingJobTracer::NodeStarted(int index) {
  if (!options_.device_clock && node_op_[index] >= 0) {
    ops_[node_op_[index]].host_start = absl::Now();
  }
}

void RecordingJobTracer::NodeCompleted(int index) {
  if (!options_.device_clock && node_op_[index] >= 0) {
    ops_[node_op_[index]].host_end = absl::Now();
  }
}

void RecordingJobTracer::SpanCompleted(int span) {
  if (!options_.device_clock && span >= 0) ops_[span].host_end = absl::Now();
}

void RecordingJobTracer::NodeEndsAfter(int index, StreamHandle stream,
                                       int device) {
  if (!options_.device_clock || node_op_[index] < 0) return;
  absl::StatusOr<EventHandle> marker = Marker(stream, device);
  if (!marker.ok()) return;  // the span keeps its first end
  ops_[node_op_[index]].end = *marker;
  clean_end_[stream.value] = *marker;
}

std::optional<JobTrace> RecordingJobTracer::Build() {
  const bool device_clock = options_.device_clock;
  JobTrace trace;
  trace.name = options_.name;
  trace.device_clock = device_clock;
  trace.tracks = tracks_;
  struct Times {
    bool ok = false;
    double start = 0;
    double end = 0;
  };
  std::vector<Times> times(ops_.size());
  double origin = std::numeric_limits<double>::infinity();
  absl::Time host_origin = absl::InfiniteFuture();
  for (size_t i = 0; i < ops_.size(); ++i) {
    const TracedOp& op = ops_[i];
    Times& t = times[i];
    if (device_clock) {
      if (op.start.value == 0 || op.end.value == 0) continue;
      absl::StatusOr<double> start = options_.backend->EventTimeUs(op.start);
      absl::StatusOr<double> end = options_.backend->EventTimeUs(op.end);
      if (!start.ok() || !end.ok()) continue;
      t = Times{true, *start, std::max(*start, *end)};
      origin = std::min(origin, t.start);
    } else {
      if (op.host_end == absl::Time()) continue;
      host_origin = std::min(host_origin, op.host_start);
      t.ok = true;
    }
  }
  std::vector<int> span_of(ops_.size(), -1);
  trace.spans.reserve(ops_.size());
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (!times[i].ok) continue;
    const TracedOp& op = ops_[i];
    TraceSpan span;
    span.track = op.track;
    span.kind = op.kind;
    span.name = op.name;
    span.op = op.op;
    span.node = op.node;
    span.bytes = op.bytes;
    if (device_clock) {
      span.start_us = times[i].start - origin;
      span.end_us = times[i].end - origin;
    } else {
      span.start_us = absl::ToDoubleMicroseconds(op.host_start - host_origin);
      span.end_us = std::max(
          span.start_us, absl::ToDoubleMicroseconds(op.host_end - host_origin));
    }
    span_of[i] = static_cast<int>(trace.spans.size());
    trace.spans.push_back(std::move(span));
  }
  for (const auto& [from, to] : flows_) {
    if (span_of[from] >= 0 && span_of[to] >= 0) {
      trace.flows.push_back(TraceFlow{span_of[from], span_of[to]});
    }
  }
  return trace;
}

}  // namespace weft::runtime
