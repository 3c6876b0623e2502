// A job's trace as its tracer recorded it (job_tracer.h), before anyone
// asks for it.
//
// Recording costs the issue loop as little as it can: a span keeps the
// points that time it (device stamps, or times already read), the ids of
// its track and of its name and op (each distinct string held once, so a
// loop's thousands of spans of one node share theirs), and nothing is
// rendered. Build makes the JobTrace
// (trace.h) from it when someone asks: any thread may call it, any number
// of times, once the job has ended. Most traces are never asked for.
//
// Immutable once the tracer hands it over; thread-safe from then on.
#ifndef WEFT_RUNTIME_RECORDED_TRACE_H_
#define WEFT_RUNTIME_RECORDED_TRACE_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/backend.h"
#include "runtime/trace.h"
#include "scheduler/graph.h"

namespace weft::runtime {

// Where a span goes: a pooled stream's track, or a copy engine's of its
// device.
enum class TraceTrackKind { kStream, kHostToDevice, kDeviceToHost, kPeer };

// A moment of a span: a device stamp read when the trace is built, or a
// time already known (microseconds on the trace's clock; NaN: unknown).
struct TracePoint {
  std::shared_ptr<const DeviceStamp> stamp;
  double us = std::numeric_limits<double>::quiet_NaN();

  std::optional<double> TimeUs() const;
};

struct RecordedTrack {
  TraceTrackKind kind = TraceTrackKind::kStream;
  int device = -1;      // -1: the host track
  uint64_t stream = 0;  // the pooled stream of a stream track
};

struct RecordedSpan {
  SpanKind kind = SpanKind::kKernel;
  int track = 0;
  // Indices into RecordedTrace::strings; -1: empty.
  int32_t name = -1;
  int32_t op = -1;
  scheduler::NodeId node = -1;
  uint64_t bytes = 0;
  TracePoint start;
  TracePoint end;
};

struct RecordedTrace {
  std::string name;
  bool device_clock = false;
  std::vector<RecordedTrack> tracks;
  std::vector<RecordedSpan> spans;
  // The spans' names and ops, each distinct one once.
  std::vector<std::string> strings;
  std::vector<std::pair<int, int>> flows;  // span indices
  // Spans not recorded: the job ran more work than the tracer keeps
  // (RecordingJobTracer::Options::max_spans).
  int64_t spans_dropped = 0;

  // strings[index], or "" for -1.
  absl::string_view String(int32_t index) const;

  // About how many bytes of memory it holds (for retention bounds).
  int64_t ApproxBytes() const;

  // The trace: spans whose start and end are both known, times from the
  // earliest start, tracks named ("stream 7", "H2D", "host").
  JobTrace Build() const;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_RECORDED_TRACE_H_
