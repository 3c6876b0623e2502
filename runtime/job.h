// One run of a Plan on a Backend: the per-job state machine of the executor.
//
// Lifecycle: kIssuing -> kDraining -> kDone.
//   kIssuing: nodes are issued in plan order, at most a window of them in
//     flight (issued, completion not yet reported), so a cancelled or failed
//     job stops promptly. Issuing a device node means, on its pooled stream:
//     wait for the plan's events, make its buffers current on its device,
//     launch, add a host callback that reports it finished, and record its
//     signal event (after the callback, so progress reports follow
//     dependencies). A node with a peer stream (a copy between devices)
//     first makes its stream wait for an event recorded on the peer
//     stream, and after it the peer stream waits for one recorded on its
//     stream: both streams reach it before it starts and continue after.
//   kDraining: entered when every node is issued (outputs are then copied
//     back, each on the stream that last wrote it), or at the first error or
//     a cancel. A fence (host callback) goes onto every stream the job used;
//     since streams are FIFO, when all fences have fired, all of the job's
//     work has completed and every node callback has been handled.
//   kDone: memory, events and streams back in their pools, the trace
//     (if asked for) and on_done delivered, exactly once.
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
// Buffers live on every device whose nodes use them (and in host memory for
// host nodes), each device copy allocated at the start from the device's
// MemoryPool and given back in kDone. Giving a block back makes it
// reusable by the next job at once, which is safe only because kDone comes
// after every fence has fired (nothing of the job is queued any more); if
// a stream could not take its fence, the job's blocks go back to the
// backend uncached instead (MemoryPool::FreeUncached). Coherence follows
// plan order: the job tracks which location holds the latest version of
// each buffer and which copies are current. Before a node runs, a stale or
// missing copy where it runs is refreshed (initial contents uploaded, or a
// copy from the latest version) on the node's stream after its waits. Such
// a transfer is not part of the plan, so it records an event that any other
// stream using that copy waits for before touching it. Plan dependencies
// order everything else: a node that writes a buffer depends on every
// earlier reader and writer.
//
// Streams: a job keeps its logical streams to itself where it can. It takes
// pooled streams of its own while the pool has free ones (or room to create
// one); beyond that it folds further logical streams onto the streams it
// already holds on that device, and only a job holding none there shares
// one with other jobs. Every stream it enqueues on is switched to the job's
// error scope first (Backend::SetErrorScope), so a failure of this job
// never fails another job's work on a shared stream.
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
// Not thread-safe: every method runs on the executor's scheduling thread.
// Work completes on backend and pool threads, which hand continuations back
// through JobEnv::post.
#ifndef WEFT_RUNTIME_JOB_H_
#define WEFT_RUNTIME_JOB_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/backend.h"
#include "runtime/event_pool.h"
#include "runtime/executor.h"
#include "runtime/host_pool.h"
#include "runtime/job_graph.h"
#include "runtime/memory_pool.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/stream_pool.h"
#include "runtime/trace.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::runtime {

class Job;

// What jobs share: the backend, the per-device pools, the host pool and a
// way back onto the scheduling thread. Not owned by jobs; outlives them.
struct JobEnv {
  Backend* backend = nullptr;
  std::vector<StreamPool*> stream_pools;  // by device
  std::vector<EventPool*> event_pools;    // by device
  std::vector<MemoryPool*> memory_pools;  // by device
  // Runs host-engine nodes.
  HostPool* host_pool = nullptr;
  const CpuKernelTable* host_kernels = nullptr;
  // Backend capabilities, read once.
  bool host_gates = false;
  bool device_clock = false;
  bool interrupts_work = false;  // Backend::interrupts_aborted_work
  // Runs `fn` on the scheduling thread with the job `id`, if that job still
  // exists. Callable from any thread.
  std::function<void(uint64_t id, std::function<void(Job&)> fn)> post;
  // The same for the most frequent continuation, Job::NodeDone, without
  // allocating.
  std::function<void(uint64_t id, int index, absl::Status status)> node_done;
  // Pooled stream -> the error scope (job id) last set on it. Touched only
  // on the scheduling thread.
  absl::flat_hash_map<uint64_t, uint64_t>* stream_scopes = nullptr;
  // How many times a job switched a pooled stream's error scope so far.
  // While it does not move, a stream a job entered is still in its scope,
  // so the job need not look it up again. Touched only on the scheduling
  // thread.
  uint64_t* scope_switches = nullptr;
  // Most nodes a job keeps in flight, and most it issues per turn before
  // letting other jobs run.
  int window = 4096;
  int issue_batch = 256;
};

// Checks that `plan` can run `graph` on `num_devices` devices: every node
// exactly once, streams, devices and events in range, each node on its
// stream's device. INVALID_ARGUMENT naming the first problem.
absl::Status ValidatePlan(const scheduler::Graph& graph,
                          const scheduler::Plan& plan, int num_devices);

class Job {
 public:
  // REQUIRES: ValidatePlan(*graph, *plan, ...) is OK.
  Job(uint64_t id, const JobEnv* env,
      std::shared_ptr<const scheduler::Graph> graph,
      std::shared_ptr<const scheduler::Plan> plan, JobCallbacks callbacks);
  ~Job();

  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  uint64_t id() const { return id_; }
  bool done() const { return phase_ == Phase::kDone; }

  // Issue the job as device graphs where it fits. Call before Begin.
  void set_device_graphs(bool on) { device_graphs_ = on; }

  // Allocates memory and starts issuing.
  void Begin();
  // Stops issuing and abandons the work issued (see Cancelling above); the
  // job ends with `reason` (CANCELLED, or DEADLINE_EXCEEDED for a
  // deadline) unless it already failed or is finishing.
  void Cancel(absl::Status reason = absl::CancelledError("job cancelled"));
  // on_done was delivered (the job may still hold resources until done()).
  bool reported() const { return reported_; }
  // The device work of node `index` (plan index) completed with `status`.
  void NodeDone(int index, absl::Status status) {
    OnNodeDone(index, std::move(status));
  }

 private:
  enum class Phase { kIssuing, kDraining, kDone };

  // A buffer's copy in one location (a device, or the host).
  struct Copy {
    DevicePtr ptr;
    bool allocated = false;
    bool current = false;
    // Set while the copy's contents come from a transfer the plan does not
    // know about: streams other than `ready_stream` wait on `ready` first.
    EventHandle ready;
    int ready_device = -1;
    bool ready_pending = false;
    StreamHandle ready_stream;
    // The stream that last wrote this copy (for the final download).
    StreamHandle writer;
  };

  struct BufferState {
    std::vector<Copy> copies;  // by location: devices, then the host
    int latest = -1;           // location of the latest version; -1: none
    // Some node has written it; until then every copy holds its initial
    // contents, and a zero- or fill-initialized one is made in place.
    bool written = false;
    std::string host_data;     // the host copy's memory, once used
  };

  // A host-engine node between issue and completion.
  struct HostOp {
    GateHandle gate;           // 0 when the gate could not be enqueued
    absl::Status issue_error;  // why, then
    const CpuKernel* kernel = nullptr;
    std::vector<HostArg> args;
  };

  // Trace recording (only when on_trace is set).
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
  struct TraceState {
    std::vector<TracedOp> ops;
    std::vector<std::pair<int, int>> flows;  // op indices
    std::vector<TraceTrack> tracks;
    // (device * 4 + kind of track, pooled stream) -> track index.
    absl::flat_hash_map<std::pair<int, uint64_t>, int> track_index;
    std::vector<int> node_op;          // by plan index, -1 if none
    std::vector<int> event_signaller;  // by plan event: op index, -1
    // Pooled stream -> its last end marker, while nothing that takes time
    // was enqueued after it (so it can serve as the next start marker).
    absl::flat_hash_map<uint64_t, EventHandle> clean_end;
  };
  enum class TrackKind { kStream, kHostToDevice, kDeviceToHost, kPeer };

  // Continuations.
  void Pump();
  void OnNodeDone(int index, absl::Status status);
  void OnFence(StreamHandle stream, absl::Status status);
  void OnHostInputsReady(int index, absl::Status status);
  void FinishHostOp(int index, absl::Status status);

  void IssueSome();
  // Issues the whole job as device graphs, or nothing when it does not fit.
  absl::Status IssueDeviceGraphs();
  // Device graph `g` (of graphs_) completed with `status`.
  // Device graph `g`, launched on pooled `stream`, completed.
  void OnGraphDone(int g, StreamHandle stream, absl::Status status);
  absl::Status IssueNode(int index);
  // The host part of IssueNode, after the waits and transfers.
  absl::Status EnqueueHostOp(int index, StreamHandle stream,
                             const std::vector<scheduler::BufferUse>& uses);
  absl::Status AllocateBuffers();
  // Makes buffer `b` current at location `where` (a device, or host_) for
  // work about to go on `stream`, a stream of `stream_device`.
  absl::Status MakeCurrent(scheduler::BufferId b, int where,
                           int stream_device, StreamHandle stream);
  absl::Status Materialize(scheduler::BufferId b, int where,
                           int stream_device, StreamHandle stream);
  absl::Status WaitReady(Copy& copy, StreamHandle stream);
  absl::Status MarkTransferred(Copy& copy, int stream_device,
                               StreamHandle stream);
  void MarkWritten(const std::vector<scheduler::BufferUse>& uses, int where,
                   StreamHandle stream);
  // The host copy's memory, sized on first use (never reallocated after).
  char* HostData(scheduler::BufferId b);
  // The pooled stream of logical stream `logical`, acquired on first use.
  absl::StatusOr<StreamHandle> StreamFor(int logical);
  // A pooled stream of `device` for this job (one of its own when the
  // pool is at its cap).
  absl::StatusOr<StreamHandle> AcquireStream(int device);
  // Before the first node: uploads every buffer with initial data whose
  // first use in plan order is on a device, to that device, on one stream
  // per device, in that order. Its users wait for the copy's ready event,
  // so uploads run from the job's start and never hold a node's stream.
  absl::Status PrefetchUploads();
  // Puts `stream` in this job's error scope.
  absl::Status Enter(StreamHandle stream);
  // The same for `stream`, the pooled stream of logical stream `logical`,
  // without a lookup when no scope switched since the job last entered it.
  absl::Status EnterLogical(int logical, StreamHandle stream);
  absl::StatusOr<EventHandle> PlanEventFor(int event, int device);
  absl::Status DownloadOutputs();
  void StartDraining();
  // Reports an abandoned job while its work drains, its streams fenced
  // off until Finish.
  void Abandon();
  void Finish();
  // The output buffers, when the job succeeded.
  HostBuffers TakeOutputs();
  // Delivers the trace (if any) and on_done; once.
  void Deliver(std::optional<JobTrace> trace, HostBuffers outputs);
  // True when `status` is this job's own cancellation coming back from
  // work that was skipped because of it.
  bool IsOwnCancellation(const absl::Status& status) const;
  void Fail(absl::Status status, scheduler::NodeId node);
  // The initial contents of buffer `b`, computed on the host.
  std::string InitialContents(scheduler::BufferId b) const;

  // Tracing. TraceBegin returns the op index, or -1 when not tracing.
  int TraceBegin(SpanKind kind, int track, std::string name, std::string op,
                 scheduler::NodeId node, uint64_t bytes, StreamHandle stream,
                 int device);
  void TraceEnd(int op, StreamHandle stream, int device);
  // Something that takes time was enqueued on `stream` outside an op.
  void TraceDirty(StreamHandle stream);
  int TraceTrackFor(TrackKind kind, int device, StreamHandle stream);
  absl::StatusOr<EventHandle> TraceMarker(StreamHandle stream, int device);
  JobTrace BuildTrace();

  // Constant after construction.
  const uint64_t id_;
  const JobEnv* const env_;
  const std::shared_ptr<const scheduler::Graph> graph_;
  const std::shared_ptr<const scheduler::Plan> plan_;
  const JobCallbacks callbacks_;
  const int num_devices_;
  const int host_;  // the host's location index: num_devices_

  Phase phase_ = Phase::kIssuing;
  absl::Status status_;
  scheduler::NodeId failed_node_ = -1;
  bool cancelled_ = false;
  // Cancelled on a backend that cannot stop running work: report before
  // the work has drained.
  bool abandon_ = false;
  bool reported_ = false;
  bool fenced_ = false;  // Abandon fenced the streams off
  // What Cancel ended the job with, when that was the job's first error.
  absl::Status cancel_reason_;

  size_t next_ = 0;   // next plan index to issue
  int in_flight_ = 0;
  int fences_pending_ = 0;
  // A stream could not take its fence: the job's memory may still be in
  // use by queued work and must not be reused.
  bool unfenced_ = false;
  bool pump_posted_ = false;
  // Device graphs: whether to try them, and the graphs once issued.
  bool device_graphs_ = false;
  std::unique_ptr<JobGraphs> graphs_;

  std::vector<BufferState> buffers_;
  // Logical stream -> pooled stream (value 0 until first used).
  std::vector<StreamHandle> streams_;
  // Logical stream -> 1 + *env_->scope_switches when the job last entered
  // its pooled stream (0: never); current while the two are equal.
  std::vector<uint64_t> entered_;
  // Every Acquire from a stream pool, with the device, to release at the
  // end (a pooled stream may back several logical streams).
  std::vector<std::pair<StreamHandle, int>> acquired_streams_;
  // By device: the pooled streams this job holds, and where to fold next.
  std::vector<std::vector<StreamHandle>> own_streams_;
  std::vector<size_t> fold_next_;
  // Distinct pooled streams used, in first-use order: the fences go here.
  bool prefetched_ = false;  // PrefetchUploads has run
  std::vector<StreamHandle> used_streams_;
  // Pooled stream -> whether work on it failed.
  absl::flat_hash_map<uint64_t, bool> stream_failed_;
  // Pooled stream -> its device.
  absl::flat_hash_map<uint64_t, int> stream_devices_;
  // Plan event -> pooled event and its device.
  std::vector<EventHandle> events_;
  std::vector<int> event_devices_;
  // Every pooled event acquired, with its device, to give back at the end.
  std::vector<std::pair<EventHandle, int>> held_events_;
  // Host-engine nodes in flight, by plan index.
  absl::flat_hash_map<int, HostOp> host_ops_;
  // Host memory that pending uploads read from (a deque: elements never
  // move while uploads read them).
  std::deque<std::string> staging_;
  // Output buffers being downloaded: name and destination.
  std::vector<std::pair<std::string, std::unique_ptr<std::string>>> outputs_;
  // Output buffers whose latest version is the host copy.
  std::vector<std::pair<std::string, scheduler::BufferId>> host_outputs_;
  std::unique_ptr<TraceState> trace_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_JOB_H_
