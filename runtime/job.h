// One run of a Plan on a Backend: the per-job state machine of the executor.
//
// A Job coordinates the classes that own a job's state: JobStreams (its
// pooled streams, error scope and fences), BufferCoherence (where each
// buffer's current bytes are), JobEvents (the pooled events it holds) and a
// JobTracer (its trace, or nothing). It owns the issue loop and the
// lifecycle.
//
// Lifecycle: kIssuing -> kDraining -> kDone.
//   kIssuing: nodes are issued in plan order, at most a window of them in
//     flight (issued, completion not yet reported), so a cancelled or failed
//     job stops promptly. A node that depends on a control node still
//     running waits; nodes after it that no waiting node orders (by a
//     dependency, their stream or an event) are issued meanwhile
//     (IssueAhead). Before the first node that reads initial data (or the
//     kNodesBeforeUploads-th node, whichever comes first), buffers with
//     initial data are uploaded to the device of their first use (on one
//     stream per device): nodes that need none start without waiting for
//     the host to issue those copies. Issuing a device node means, on its
//     pooled stream: wait for the plan's events, make its buffers current
//     on its device, launch, add a host callback that reports it finished,
//     and record its signal event (after the callback, so progress reports
//     follow dependencies).
//     A node with a peer stream (a copy between devices) first makes its
//     stream wait for an event recorded on the peer stream, and after it
//     the peer stream waits for one recorded on its stream: both streams
//     reach it before it starts and continue after.
//   kDraining: entered when every node is issued (outputs are then copied
//     back, each on the stream that last wrote it), or at the first error or
//     a cancel. A fence goes onto every stream the job used; when all fences
//     have fired, all of the job's work has completed and every node
//     callback has been handled.
//   kDone: memory, events and streams back in their pools, the trace
//     (if asked for) and on_done delivered, exactly once. Memory goes back
//     for reuse only because nothing of the job is queued any more; if a
//     stream could not take its fence, it goes back uncached.
//
// Cancelling aborts the job's error scope on every stream it used
// (Backend::AbortErrorScope), which skips its queued work. Where the
// backend also stops running work (Backend::interrupts_aborted_work, the
// simulator), the fences fire within milliseconds and the job drains as
// above. Where it cannot (CUDA), the job is abandoned: it is reported
// CANCELLED (trace, then on_done) as soon as its fences are enqueued,
// without waiting for them; its streams are fenced off in their pools
// (StreamPool::Fence: never shared with another job), and its memory,
// events and streams stay held until the fences have fired, that is until
// the device has finished what was running. Then it gives them back
// (kDone) without reporting again, and no callback of the job runs after
// on_done.
//
// Host-engine nodes run on the host worker pool, not on a device. Their
// stream still orders them: on it go the plan's waits, downloads of their
// inputs into host memory, a host callback and a host gate
// (Backend::EnqueueHostGate). The callback hands the op to the scheduling
// thread, which runs it on the pool; when it finishes, the gate opens, and
// the node's signal event, recorded after the gate, releases the streams
// that depend on it. No thread blocks: the device stream waits on the gate,
// not a host thread on the device. A backend without gates runs host nodes
// on their stream like device nodes.
//
// Device graphs (set_device_graphs): a job that fits (job_graph.h) is
// issued at its first turn as device graphs instead of node by node: per
// graph, on one pooled stream of its device, the uploads of initial data
// it needs, Backend::LaunchDeviceGraph and a host callback that reports
// the graph's nodes finished. Cross-device order goes through pooled
// events inside the graphs. Outputs are downloaded and the job drains and
// finishes as on the stream path. A job that does not fit, or whose graphs
// the backend cannot build (Backend::PrepareDeviceGraph, asked for all of
// them before the first launch), is issued node by node.
//
// Control nodes (scheduler::ControlSpec; control_run.h): a loop that the
// device can run by itself (JobOptions::control_mode, body planned on one
// device with device ops only) is enqueued like a device node, as one
// Backend::LaunchDeviceLoop on a stream of the body's device. Otherwise the
// node's stream waits for its predecessors and copies the condition to host
// memory, and a host callback hands the node to a ControlRun, which runs
// the chosen body as a nested job (NestedJob) over this job's buffers, once
// per iteration; a loop's nested job parks between iterations and joins its
// streams into one fence. Nodes that depend on such a node, and the
// output downloads, are issued once it has finished.
//
// Not thread-safe: every method runs in the executor's turn (on its
// scheduling thread, on Start's caller while the executor was idle, or on
// the backend or pool thread reporting a completion while no turn ran;
// never two threads at once). Work completes on backend and pool threads,
// which hand continuations back through JobEnv::post_completion and
// node_done.
#ifndef WEFT_RUNTIME_JOB_H_
#define WEFT_RUNTIME_JOB_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/backend.h"
#include "runtime/buffer_coherence.h"
#include "runtime/control_run.h"
#include "runtime/device_graph.h"
#include "runtime/event_pool.h"
#include "runtime/executor.h"
#include "runtime/host_pool.h"
#include "runtime/job_events.h"
#include "runtime/job_graph.h"
#include "runtime/job_streams.h"
#include "runtime/job_tracer.h"
#include "runtime/loop_relay.h"
#include "runtime/memory_pool.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/stream_pool.h"
#include "runtime/trace.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::runtime {

class Job;

// What jobs share: the backend, the per-device pools, the host pool and a
// way back into the executor's turn. Not owned by jobs; outlives them.
struct JobEnv {
  Backend* backend = nullptr;
  std::vector<StreamPool*> stream_pools;  // by device
  std::vector<EventPool*> event_pools;    // by device
  std::vector<MemoryPool*> memory_pools;  // by device
  // Runs host-engine nodes.
  HostPool* host_pool = nullptr;
  const CpuKernelTable* host_kernels = nullptr;
  // Place each job's planned buffers in one arena per device
  // (BufferCoherence::Place); false allocates every buffer by itself.
  bool place_buffers = true;
  // Spans a traced job records at most (Executor::Options).
  int64_t trace_max_spans = int64_t{1} << 19;
  // Backend capabilities, read once.
  bool host_gates = false;
  bool device_clock = false;
  bool interrupts_work = false;  // Backend::interrupts_aborted_work
  // Runs `fn` in a later turn with the job `id`, if that job still exists.
  // Callable from any thread.
  std::function<void(uint64_t id, std::function<void(Job&)> fn)> post;
  // The same for the most frequent continuation, Job::NodeDone, without
  // allocating.
  std::function<void(uint64_t id, int index, absl::Status status)> node_done;
  // Like post, for backend host callbacks reporting completed work: where
  // no turn runs, the calling thread runs the turn at once (node_done does
  // the same).
  std::function<void(uint64_t id, std::function<void(Job&)> fn)>
      post_completion;
  // Pooled stream -> the error scope (job id) last set on it. Touched only
  // in the turn.
  absl::flat_hash_map<uint64_t, uint64_t>* stream_scopes = nullptr;
  // How many times a job switched a pooled stream's error scope so far.
  // While it does not move, a stream a job entered is still in its scope,
  // so the job need not look it up again. Touched only in the turn.
  uint64_t* scope_switches = nullptr;
  // Nested jobs (control nodes' bodies): an id for a job about to be
  // made, and a way to start it on the scheduling thread's next turn.
  std::function<uint64_t()> reserve_id;
  std::function<void(uint64_t id, std::unique_ptr<Job> job)> start;
  // Most nodes a job keeps in flight, and most it issues per turn before
  // letting other jobs run.
  int window = 4096;
  int issue_batch = 256;
};

// A nested job runs a control node's body (control_run.h) over the buffers
// of the job that holds the node: it allocates what its plan needs there,
// uploads and downloads nothing of its own, and before it ends brings
// `fetch` (a loop's condition) into host memory when the body left a newer
// version on a device.
struct NestedJob {
  BufferCoherence* buffers = nullptr;  // the enclosing job's; not owned
  scheduler::BufferId fetch = -1;
};

class Job {
 public:
  // REQUIRES: ValidatePlan(*graph, *plan, ...) is OK (plan_check.h).
  Job(uint64_t id, const JobEnv* env,
      std::shared_ptr<const scheduler::Graph> graph,
      std::shared_ptr<const scheduler::Plan> plan, JobCallbacks callbacks,
      NestedJob nested = {});
  ~Job();

  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  uint64_t id() const { return id_; }
  bool done() const { return phase_ == Phase::kDone; }

  // Issue the job as device graphs where it fits. Call before Begin.
  void set_device_graphs(bool on) { device_graphs_ = on; }
  // Where loops evaluate their conditions. Call before Begin.
  void set_control_mode(ControlMode mode) { control_mode_ = mode; }

  // Allocates memory and starts issuing.
  void Begin();
  // Stops issuing and abandons the work issued (see Cancelling above); the
  // job ends with `reason` (CANCELLED, or DEADLINE_EXCEEDED for a
  // deadline) unless it already failed or is finishing.
  void Cancel(absl::Status reason = absl::CancelledError("job cancelled"));
  // on_done was delivered (the job may still hold resources until done()).
  bool reported() const { return reported_; }
  // Nested jobs of a loop run once per iteration: after a successful run
  // a nested job parks (on_done delivered, its streams, events and error
  // scope kept) instead of finishing, and Rerun runs it again as it was
  // planned; Dispose gives everything back. Cancelling a parked job
  // disposes of it and delivers CANCELLED.
  void Rerun();
  void Dispose();
  // The device work of node `index` (plan index) completed with `status`.
  void NodeDone(int index, absl::Status status) {
    OnNodeDone(index, std::move(status));
  }

 private:
  enum class Phase { kIssuing, kDraining, kParked, kDone };

  // A host-engine node between issue and completion.
  struct HostOp {
    GateHandle gate;           // 0 when the gate could not be enqueued
    absl::Status issue_error;  // why, then
    const CpuKernel* kernel = nullptr;
    std::vector<HostArg> args;
  };

  // Continuations.
  void Pump();
  void OnNodeDone(int index, absl::Status status);
  void OnFence(StreamHandle stream, absl::Status status);
  void OnHostInputsReady(int index, absl::Status status);
  void FinishHostOp(int index, absl::Status status);
  // Control nodes (control_run.h).
  absl::Status EnqueueControl(int index, int device, StreamHandle stream);
  // A control node's bodies as device graphs (job_device_control.cc):
  // all on `device`, whose `stream` is ordered after the node's own
  // stream and holds the node's buffers current there; `body_stream` is
  // leased for the node alone (loop_streams_) and runs the bodies.
  // A control node nested in the bodies, run by the device too.
  struct NestedDeviceControl {
    std::string name;
    bool loop = true;
    std::shared_ptr<std::atomic<int64_t>> result;
  };
  struct DeviceBodies {
    int device = -1;
    StreamHandle stream;
    StreamHandle body_stream;
    std::vector<DeviceGraph> graphs;
    std::vector<NestedDeviceControl> nested;  // to any depth
  };
  // Checks that body plan `plan` of `body` can run as a device graph:
  // device ops, all on device `device` (set by the first node when -1),
  // and control nodes only where `nested` allows them (whose bodies are
  // checked likewise). FAILED_PRECONDITION from `cannot` otherwise
  // (`spread`: why, for nodes on two devices).
  absl::Status CheckDeviceBody(
      const scheduler::Graph& body, const scheduler::Plan& plan, bool nested,
      absl::string_view spread, int& device,
      const std::function<absl::Status(absl::string_view)>& cannot) const;
  // Body plan `plan` of `body` as a device graph on `device`, its control
  // nodes as DeviceGraphControl nodes (recorded in `nested`).
  DeviceGraph BuildDeviceBody(const scheduler::Graph& body,
                              const scheduler::Plan& plan, int device,
                              std::vector<NestedDeviceControl>& nested);
  // Builds them for plan index `index` (issued on `stream` of `device`),
  // for a node the device decides (`device_decides`) or the host drives.
  // FAILED_PRECONDITION saying why when the bodies cannot run that way:
  // nothing enqueued then.
  absl::StatusOr<DeviceBodies> PrepareDeviceBodies(int index, int device,
                                                   StreamHandle stream,
                                                   bool device_decides);
  // A loop or case..of the device decides (ControlMode); FAILED_PRECONDITION
  // saying why when its bodies cannot run that way (nothing enqueued then).
  absl::Status EnqueueDeviceControl(int index, int device, StreamHandle stream);
  // A control node the host drives whose bodies run as device graphs: the
  // condition comes back to host memory of its own after every iteration;
  // no nested jobs. FAILED_PRECONDITION (nothing enqueued) when the bodies
  // cannot run as graphs.
  absl::Status EnqueueGraphControl(int index, int device, StreamHandle stream);
  // A control node the host drives with bodies as device graphs: the
  // bodies, and host memory the condition comes back to.
  struct GraphControl {
    DeviceBodies bodies;
    DevicePtr condition;
    uint64_t condition_bytes = 0;
    std::unique_ptr<char[]> condition_value;
    int64_t launches = 0;  // bodies launched
    int open_span = -1;    // the trace span of the body running
    // A loop's iterations, continued in the completion callbacks once
    // they are no longer traced one by one.
    std::shared_ptr<LoopRelay> relay;
  };
  // Bodies of one control node traced as spans of their own: beyond, the
  // node's span still covers them (a trace holds two markers per span).
  static constexpr int64_t kMaxTracedBodies = 1024;
  // Traced iterations a LoopRelay may begin before it hands back for more
  // markers.
  static constexpr int64_t kRelayTraceBatch = 64;
  // After PrepareDeviceBodies: the condition's first value on its way to
  // the host, and the run behind it.
  absl::Status StartGraphControl(int index, GraphControl& control);
  // After PrepareDeviceBodies: the DeviceLoop or DeviceCase launched.
  absl::Status LaunchDeviceControl(int index, int device, StreamHandle stream,
                                   DeviceBodies& bodies);
  // The leased stream of control node `index`, if any, back to its pool
  // (`reusable`: its work succeeded).
  void ReleaseLeasedStream(int index, bool reusable);
  // Launches body `body` of graph-driven control node `index` (0: no job
  // to cancel; the leased stream's error scope stops it).
  absl::StatusOr<uint64_t> StartGraphBody(int index, int body);
  // Ends graph-driven control node `index`: its writes become the job's
  // on the node's stream and its leased stream goes back.
  absl::Status EndGraphControl(int index, absl::Status status);
  // `result`: the iterations run, or the branch taken (-1: none).
  void OnDeviceControlDone(int index, absl::Status status, int64_t result,
                           const std::vector<NestedDeviceControl>& nested);
  void OnControlReady(int index, absl::Status status);
  void OnBodyDone(int index, absl::Status status, int64_t relayed = 0);
  // A LoopRelay of control node `index` began iteration `iteration`.
  void OnLoopProgress(int index, int64_t iteration);
  void ControlFinished(int index, absl::Status status);
  absl::StatusOr<uint64_t> StartBody(int index, int body);
  // Whether node `index` (plan index) depends directly on a control node
  // that has not finished: it is issued only after (what the body writes
  // becomes current only as the body runs).
  bool WaitsForControl(int index) const;
  // While node next_ waits for a control node: issues the nodes after it,
  // up to kIssueAhead positions on, that nothing unissued before them
  // orders (a dependency, their streams, an event they wait on), so the
  // independent parts of the job keep running. False when issuing failed
  // (the job has failed).
  bool IssueAhead(int& issued);
  static constexpr int kIssueAhead = 256;
  // At most this many nodes are issued before the uploads.
  static constexpr int kNodesBeforeUploads = 16;
  // A nested job: brings NestedJob::fetch into host memory.
  absl::Status FetchForEnclosing();
  // A stream of this job on `device` for work that must follow what
  // `writer` (a stream of `device`) holds so far, its error scope entered:
  // `writer` itself where this job holds it, else one this job acquires
  // and orders after it (a job nested in this one wrote there), so that
  // the job drains it before it ends.
  absl::StatusOr<StreamHandle> OwnStreamAfter(StreamHandle writer, int device);

  void IssueSome();
  // Issues the whole job as device graphs, or nothing when it does not fit.
  absl::Status IssueDeviceGraphs();
  // Its steps: the uploads of graphs_ (their events already in the graphs'
  // wait nodes, in plan order of first use) on one upload stream per
  // device; each graph on a pooled stream of its own; and the streams the
  // outputs are downloaded from (`events`: graphs_->event_devices' events).
  struct GraphUpload {
    scheduler::BufferId buffer = -1;
    int device = 0;
    EventHandle event;  // the one its graph's wait node waits on
  };
  absl::Status IssueGraphUploads(absl::Span<const GraphUpload> uploads);
  absl::Status LaunchJobGraphs(std::vector<StreamHandle>& last_stream);
  absl::Status PlaceGraphOutputs(absl::Span<const EventHandle> events,
                                 absl::Span<const StreamHandle> last_stream);
  // Device graph `g` (of graphs_), launched on pooled `stream`, completed.
  void OnGraphDone(int g, StreamHandle stream, absl::Status status);
  absl::Status IssueNode(int index);
  // Issues the plan's eager copies for the node at issue position `index`
  // (Plan::copies): each on its COPY stream, after its writer's event,
  // made current on its device by the buffer coherence.
  absl::Status IssueEagerCopies(int index);
  // Reports the node at issue position `index` done once `stream` passes
  // this point (nothing for a nested job's nodes).
  absl::Status ReportWhenDone(int index, StreamHandle stream);
  // Makes `to` wait for the work enqueued so far on `from`, a stream of
  // `from_device`, by one event per `from` stream, kept for the job's life
  // and recorded again for every join (a loop joins its streams every
  // iteration).
  absl::Status OrderAfter(StreamHandle from, int from_device, StreamHandle to);
  // The host part of IssueNode, after the waits and transfers
  // (job_host_ops.cc).
  absl::Status EnqueueHostOp(int index, StreamHandle stream,
                             absl::Span<const scheduler::BufferUse> uses);
  // Uploads every buffer with initial data whose first use in plan order is
  // on a device, to that device, on one stream per device, in that order.
  // Its users wait for the copy's ready event, so uploads run from the
  // job's start and never hold a node's stream.
  absl::Status PrefetchUploads();
  // Whether the node at issue position `index` uses a buffer whose
  // initial data has not been brought anywhere yet.
  bool ReadsDataToUpload(int index) const;
  absl::Status DownloadOutputs();
  void StartDraining();
  // Reports an abandoned job while its work drains, its streams fenced
  // off until Finish.
  void Abandon();
  void Finish();
  // The output buffers, when the job succeeded.
  HostBuffers TakeOutputs();
  // Delivers the trace (if any) and on_done; once.
  void Deliver(std::shared_ptr<const RecordedTrace> trace, HostBuffers outputs);
  // True when `status` is this job's own cancellation coming back from
  // work that was skipped because of it.
  bool IsOwnCancellation(const absl::Status& status) const;
  void Fail(absl::Status status, scheduler::NodeId node);

  // Constant after construction.
  const uint64_t id_;
  const JobEnv* const env_;
  const std::shared_ptr<const scheduler::Graph> graph_;
  const std::shared_ptr<const scheduler::Plan> plan_;
  const JobCallbacks callbacks_;
  const int num_devices_;

  // The job's state, by owner. Declared in dependency order: the tracer
  // holds its markers in events_, the others trace.
  JobEvents events_;
  const std::unique_ptr<JobTracer> tracer_;
  JobStreams streams_;
  // The job's own buffers, or (nested jobs) none.
  const std::unique_ptr<BufferCoherence> own_buffers_;
  BufferCoherence* const buffers_;
  const NestedJob nested_;

  Phase phase_ = Phase::kIssuing;
  absl::Status status_;
  scheduler::NodeId failed_node_ = -1;
  bool cancelled_ = false;
  // Cancelled on a backend that cannot stop running work: report before
  // the work has drained.
  bool abandon_ = false;
  bool reported_ = false;
  // What Cancel ended the job with, when that was the job's first error.
  absl::Status cancel_reason_;

  size_t next_ = 0;  // next plan index to issue
  int in_flight_ = 0;
  bool pump_posted_ = false;
  bool prefetched_ = false;  // PrefetchUploads has run
  // Device graphs: whether to try them, and the graphs once issued.
  bool device_graphs_ = false;
  ControlMode control_mode_ = ControlMode::kAuto;
  std::unique_ptr<JobGraphs> graphs_;

  // Loops' nested jobs parked between iterations, by plan index.
  absl::flat_hash_map<int, uint64_t> parked_;
  // Control nodes the host drives with bodies as device graphs, by plan
  // index.
  absl::flat_hash_map<int, GraphControl> graph_controls_;
  // Control nodes run on the device, by plan index: the stream their
  // bodies run on, and its device, until they end.
  absl::flat_hash_map<int, std::pair<StreamHandle, int>> loop_streams_;
  // The event each stream records to join the others (OrderAfter).
  absl::flat_hash_map<uint64_t, EventHandle> join_events_;
  // Control nodes running, by plan index, and their NodeIds.
  absl::flat_hash_map<int, std::unique_ptr<ControlRun>> controls_;
  absl::flat_hash_set<scheduler::NodeId> running_controls_;
  // Issuing stopped at a node waiting for a control node.
  bool blocked_on_control_ = false;
  // Plan indices at or after next_ issued ahead of it (IssueAhead).
  absl::flat_hash_set<int> issued_ahead_;
  // By NodeId: its plan index (filled on first use).
  std::vector<int> plan_index_;
  // Host-engine nodes in flight, by plan index.
  absl::flat_hash_map<int, HostOp> host_ops_;
  // Output buffers being downloaded: name and destination.
  std::vector<std::pair<std::string, std::unique_ptr<HostBuffer>>> outputs_;
  // Output buffers whose latest version is the host copy.
  std::vector<std::pair<std::string, scheduler::BufferId>> host_outputs_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_JOB_H_
