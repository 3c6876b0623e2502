// Per-job execution traces and their Chrome/Perfetto rendering.
//
// A JobTrace is what one job did, on one clock: spans on tracks (one track
// per device stream the job used, one per copy engine it used, one for the
// host), and flows for the event waits that ordered work across streams
// (from the signalling node's span to the waiting node's). Times are
// microseconds from the job's first recorded moment. The executor records
// traces on request (JobCallbacks::on_trace); with a backend that has a
// device clock (Backend::has_device_clock) the times are device times:
// a span runs from when its stream reached it to when it completed, so
// waiting for a kernel slot or a copy engine counts inside the span.
// Otherwise they are host observations of issue and completion.
//
// ToTraceEventJson renders the Trace Event Format that chrome://tracing and
// ui.perfetto.dev read: one process per device (and one for the host), one
// thread per track, complete events ("X") for spans, flow events ("s"/"f")
// for waits.
#ifndef WEFT_RUNTIME_TRACE_H_
#define WEFT_RUNTIME_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/graph.h"

namespace weft::runtime {

struct TraceTrack {
  int device = -1;   // -1: the host
  std::string name;  // e.g. "stream 7", "H2D", "host"
};

// kIteration: one iteration of a loop, or the branch of a case..of, run
// as a device graph the host launched.
enum class SpanKind { kKernel, kCopy, kHost, kIteration };

struct TraceSpan {
  int track = 0;
  SpanKind kind = SpanKind::kKernel;
  std::string name;
  std::string op;               // kernels and host ops
  scheduler::NodeId node = -1;  // -1 for work the executor added
  uint64_t bytes = 0;           // copies
  double start_us = 0;
  double end_us = 0;
};

struct TraceFlow {
  int from_span = 0;  // the signalling node's span
  int to_span = 0;    // the waiting node's span
};

struct JobTrace {
  std::string name;
  bool device_clock = false;
  std::vector<TraceTrack> tracks;
  std::vector<TraceSpan> spans;
  std::vector<TraceFlow> flows;
  // Spans the job ran beyond what its tracer keeps (not in `spans`).
  int64_t spans_dropped = 0;

  // From the earliest start to the latest end of the spans of graph nodes;
  // 0 without any.
  double NodeMakespanUs() const;
};

std::string ToTraceEventJson(const JobTrace& trace);

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_TRACE_H_
