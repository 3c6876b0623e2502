// What a job records of its own execution for its trace (trace.h).
//
// The issue loop tells a JobTracer about every piece of work it enqueues
// (Begin before, End after), about work it enqueues outside a span that
// still takes time on a stream (Dirty: a wait, another job's work), about
// each node it issued (for the flows of its plan events) and, on the host
// clock, when a node started and completed. It never asks whether a trace
// is wanted: a job without one has a NullJobTracer, which records nothing
// and returns no trace.
//
// RecordingJobTracer keeps spans on tracks: one track per pooled stream,
// one per copy engine of a device and one for the host. With a device clock
// (Backend::has_device_clock) a span runs between two marker events
// recorded on its stream, before and after its work; the end marker of a
// span serves as the start marker of the next one on the same stream while
// nothing that takes time went between them. Markers are held in the job's
// JobEvents and must outlive Build. Without a device clock a span runs from
// issue to completion as the host saw them, so only nodes have spans then.
// Tracing is best effort: a marker that cannot be recorded drops its span.
//
// Not thread-safe: used by one job on the executor's scheduling thread.
#ifndef WEFT_RUNTIME_JOB_TRACER_H_
#define WEFT_RUNTIME_JOB_TRACER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/backend.h"
#include "runtime/job_events.h"
#include "runtime/trace.h"
#include "scheduler/graph.h"

namespace weft::runtime {

// Where a span goes: a pooled stream's track, or a copy engine's of its
// device.
enum class TraceTrackKind { kStream, kHostToDevice, kDeviceToHost, kPeer };

// One piece of work about to be enqueued. The strings are copied by a
// tracer that records.
struct TracedWork {
  SpanKind kind = SpanKind::kKernel;
  TraceTrackKind track = TraceTrackKind::kStream;
  int track_device = -1;  // the track's device; -1: the host track
  absl::string_view name;
  absl::string_view op;
  scheduler::NodeId node = -1;  // -1 for work the job added
  uint64_t bytes = 0;
};

class JobTracer {
 public:
  virtual ~JobTracer() = default;

  // `work` is about to be enqueued on `stream`, a stream of `device`. The
  // span's index for End and NodeIssued, or -1 when nothing is recorded.
  virtual int Begin(const TracedWork& work, StreamHandle stream,
                    int device) = 0;
  // Span `span` (from Begin; -1 is ignored) was enqueued on `stream`.
  virtual void End(int span, StreamHandle stream, int device) = 0;
  // Something that takes time went onto `stream` outside a span.
  virtual void Dirty(StreamHandle stream) = 0;
  // The node at plan index `index` was issued as span `span`, after
  // waiting on plan events `waits`, and signals `signal_event` (-1: none).
  virtual void NodeIssued(int index, int span, absl::Span<const int32_t> waits,
                          int signal_event) = 0;
  // Host clock: the node at plan index `index` started running on the
  // host, or completed.
  virtual void NodeStarted(int index) = 0;
  virtual void NodeCompleted(int index) = 0;
  // Span `span` (from Begin; -1 is ignored) completed now on the host
  // clock: for work that is not a node of the plan.
  virtual void SpanCompleted(int span) = 0;
  // The node at plan index `index` ends after the work enqueued on
  // `stream` (of `device`) so far, not where its span was first ended:
  // for a control node whose bodies run after it was issued.
  virtual void NodeEndsAfter(int index, StreamHandle stream, int device) = 0;
  // Device clock: a marker event of `device`, held with the job's events,
  // that another thread may record on a stream (Backend::RecordEvent) for
  // AddSpan. FAILED_PRECONDITION where spans are not marked so (nothing
  // is recorded, or the host clock times them).
  virtual absl::StatusOr<EventHandle> NewMarker(int device) = 0;
  // A span of `work` on `stream` from marker `start` to marker `end`
  // (from NewMarker), both recorded on `stream` around the work.
  virtual void AddSpan(const TracedWork& work, StreamHandle stream,
                       EventHandle start, EventHandle end) = 0;
  // The trace so far, or nullopt when nothing is recorded. REQUIRES: the
  // job's events are still held.
  virtual std::optional<JobTrace> Build() = 0;
};

// Records nothing.
class NullJobTracer final : public JobTracer {
 public:
  int Begin(const TracedWork&, StreamHandle, int) override { return -1; }
  void End(int, StreamHandle, int) override {}
  void Dirty(StreamHandle) override {}
  void NodeIssued(int, int, absl::Span<const int32_t>, int) override {}
  void NodeStarted(int) override {}
  void NodeCompleted(int) override {}
  void SpanCompleted(int) override {}
  void NodeEndsAfter(int, StreamHandle, int) override {}
  absl::StatusOr<EventHandle> NewMarker(int) override {
    return absl::FailedPreconditionError("nothing is traced");
  }
  void AddSpan(const TracedWork&, StreamHandle, EventHandle,
               EventHandle) override {}
  std::optional<JobTrace> Build() override { return std::nullopt; }
};

class RecordingJobTracer final : public JobTracer {
 public:
  struct Options {
    Backend* backend = nullptr;   // not owned
    JobEvents* events = nullptr;  // not owned; holds the markers
    bool device_clock = false;    // Backend::has_device_clock
    std::string name;             // the trace's name (the graph's)
    int num_nodes = 0;            // plan size
    int num_events = 0;           // plan events
  };
  explicit RecordingJobTracer(Options options);

  int Begin(const TracedWork& work, StreamHandle stream, int device) override;
  void End(int span, StreamHandle stream, int device) override;
  absl::StatusOr<EventHandle> NewMarker(int device) override;
  void AddSpan(const TracedWork& work, StreamHandle stream, EventHandle start,
               EventHandle end) override;
  void Dirty(StreamHandle stream) override;
  void NodeIssued(int index, int span, absl::Span<const int32_t> waits,
                  int signal_event) override;
  void NodeStarted(int index) override;
  void NodeCompleted(int index) override;
  void SpanCompleted(int span) override;
  void NodeEndsAfter(int index, StreamHandle stream, int device) override;
  std::optional<JobTrace> Build() override;

 private:
  struct TracedOp {
    SpanKind kind = SpanKind::kKernel;
    int track = 0;
    std::string name;
    std::string op;
    scheduler::NodeId node = -1;
    uint64_t bytes = 0;
    // Device clock: markers recorded before and after the work.
    EventHandle start;
    EventHandle end;
    // Host clock: issue and completion as the host saw them.
    absl::Time host_start;
    absl::Time host_end;
  };

  int TrackFor(TraceTrackKind kind, int device, StreamHandle stream);
  absl::StatusOr<EventHandle> Marker(StreamHandle stream, int device);

  // Constant after construction.
  const Options options_;

  std::vector<TracedOp> ops_;
  std::vector<std::pair<int, int>> flows_;  // op indices
  std::vector<TraceTrack> tracks_;
  // (device * 4 + kind of track, pooled stream) -> track index.
  absl::flat_hash_map<std::pair<int, uint64_t>, int> track_index_;
  std::vector<int> node_op_;          // by plan index, -1 if none
  std::vector<int> event_signaller_;  // by plan event: op index, -1
  // Pooled stream -> its last end marker, while nothing that takes time
  // was enqueued after it (so it can serve as the next start marker).
  absl::flat_hash_map<uint64_t, EventHandle> clean_end_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_JOB_TRACER_H_
