// What a job records of its own execution for its trace (trace.h).
//
// The issue loop tells a JobTracer about every piece of work it enqueues
// (Begin before, End after), about work it enqueues outside a span that
// still takes time on a stream (Dirty: a wait, another job's work), about
// each node it issued (for the flows of its plan events) and, on the host
// clock, when a node started and completed. It never asks whether a trace
// is wanted: a job without one has a NullJobTracer, which records nothing
// and hands over no trace.
//
// RecordingJobTracer keeps spans on tracks: one track per pooled stream,
// one per copy engine of a device and one for the host. With a device clock
// (Backend::has_device_clock) a span runs between two points marked on its
// stream, before and after its work: device stamps where the backend has
// them (Backend::Stamp), else marker events held in the job's JobEvents,
// whose times Take reads (so it must run before they are released). The
// end of a span serves as the start of the next one on the same stream
// while nothing that takes time went between them. Without a device clock
// a span runs from issue to completion as the host saw them, so only nodes
// have spans then. Tracing is best effort: a point that cannot be marked
// drops its span. What it hands over (Take) is a RecordedTrace, built into
// a JobTrace only when someone asks for it; stamps whose times are known by
// then are read into it, so a kept trace does not hold them.
//
// Not thread-safe: used by one job in the executor's turn (executor.cc).
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
#include "runtime/recorded_trace.h"
#include "runtime/trace.h"
#include "scheduler/graph.h"

namespace weft::runtime {

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
  // Hands over what was recorded (null when nothing is) and starts afresh.
  // REQUIRES: the job's events are still held.
  virtual std::shared_ptr<const RecordedTrace> Take() = 0;
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
  std::shared_ptr<const RecordedTrace> Take() override { return nullptr; }
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
    // Spans recorded at most (at least 1); later ones are counted in
    // RecordedTrace::spans_dropped, and hold no marker events.
    int64_t max_spans = int64_t{1} << 19;
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
  std::shared_ptr<const RecordedTrace> Take() override;

 private:
  // A point marked on a stream: a stamp, or a marker event.
  struct Marked {
    std::shared_ptr<const DeviceStamp> stamp;
    EventHandle event;
  };
  // A span's start or end timed by a marker event, read at Take.
  struct EventPoint {
    int span = 0;
    bool end = false;
    EventHandle event;
  };

  int TrackFor(TraceTrackKind kind, int device, StreamHandle stream);
  // Whether the trace holds options_.max_spans spans; Full also counts
  // the span that does not fit.
  bool AtCapacity() const;
  bool Full();
  int AddRecordedSpan(const TracedWork& work, int track);
  // The index of `s` in trace_.strings, added if new (-1 for ""). `hint`,
  // where given, is the index last returned for the same node's name (or
  // op), tried first and updated.
  int32_t Intern(absl::string_view s, int32_t* hint);
  // Replaces the stamps of trace_.spans[begin, end) that know their times
  // by those times.
  void ReadKnownStamps(size_t begin, size_t end);
  static constexpr size_t kSweepSpans = 4096;
  // Marks the work enqueued on `stream` so far, or returns false.
  bool Mark(StreamHandle stream, int device, Marked& marked);
  // Times the start (or end) of span `span` by `marked`.
  void SetPoint(int span, bool end, const Marked& marked);
  double HostNowUs() const;
  // An empty trace_, named, with room for a span per node.
  void StartTrace();

  // Constant after construction.
  const Options options_;
  const bool stamps_;  // device clock with Backend::Stamp
  const absl::Time host_origin_;

  RecordedTrace trace_;
  std::vector<EventPoint> event_points_;
  // (device * 4 + kind of track, pooled stream) -> track index.
  absl::flat_hash_map<std::pair<int, uint64_t>, int> track_index_;
  // trace_.strings' indices.
  absl::flat_hash_map<std::string, int32_t> string_index_;
  struct NodeStrings {
    int32_t name = -1;
    int32_t op = -1;
  };
  std::vector<NodeStrings> node_strings_;  // by graph node: the last ones
  std::vector<int> node_op_;               // by plan index, -1 if none
  std::vector<int> event_signaller_;       // by plan event: span index, -1
  // Pooled stream -> the point that ended its last span, while nothing
  // that takes time was enqueued after it (so it can start the next one).
  absl::flat_hash_map<uint64_t, Marked> clean_end_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_JOB_TRACER_H_
