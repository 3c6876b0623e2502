// One run of a Plan on a Backend: the per-job state machine of the executor.
//
// Lifecycle: kIssuing -> kDraining -> kDone.
//   kIssuing: nodes are issued in plan order, at most a window of them in
//     flight (issued, completion not yet reported), so a cancelled or failed
//     job stops promptly. Issuing a node means, on its pooled stream: wait
//     for the plan's events, make its buffers current on its device, launch,
//     add a host callback that reports it finished, and record its signal
//     event (after the callback, so progress reports follow dependencies).
//   kDraining: entered when every node is issued (outputs are then copied
//     back, each on the stream that last wrote it), or at the first error or
//     a cancel. A fence (host callback) goes onto every stream the job used;
//     since streams are FIFO, when all fences have fired, all of the job's
//     work has completed and every node callback has been handled.
//   kDone: memory freed, events and streams back in their pools, on_done
//     called, exactly once.
//
// Buffers live on every device whose nodes use them, each copy allocated at
// the start. Coherence follows plan order: the job tracks which device holds
// the latest version of each buffer and which copies are current. Before a
// node runs on device d, a stale or missing copy there is refreshed (initial
// contents uploaded, or a device-to-device copy from the latest version) on
// the node's stream after its waits. Such a transfer is not part of the
// plan, so it records an event that any other stream using that copy waits
// for before touching it. Plan dependencies order everything else: a node
// that writes a buffer depends on every earlier reader and writer.
//
// Host-engine nodes run like device nodes, on their device's stream (the
// built-in ops run wherever their buffers are); a host worker pool is a
// later refinement.
//
// Not thread-safe: every method runs on the executor's scheduling thread.
// Work completes on backend threads, which hand continuations back through
// JobEnv::post.
#ifndef WEFT_RUNTIME_JOB_H_
#define WEFT_RUNTIME_JOB_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "runtime/backend.h"
#include "runtime/event_pool.h"
#include "runtime/executor.h"
#include "runtime/stream_pool.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::runtime {

class Job;

// What jobs share: the backend, the per-device pools and a way back onto
// the scheduling thread. Not owned by jobs; outlives them.
struct JobEnv {
  Backend* backend = nullptr;
  std::vector<StreamPool*> stream_pools;  // by device
  std::vector<EventPool*> event_pools;    // by device
  // Runs `fn` on the scheduling thread with the job `id`, if that job still
  // exists. Callable from any thread.
  std::function<void(uint64_t id, std::function<void(Job&)> fn)> post;
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

  // Allocates memory and starts issuing.
  void Begin();
  // Stops issuing; the job ends CANCELLED unless it already failed or is
  // finishing.
  void Cancel();

 private:
  enum class Phase { kIssuing, kDraining, kDone };

  // A buffer's copy on one device.
  struct Copy {
    DevicePtr ptr;
    bool allocated = false;
    bool current = false;
    // Set while the copy's contents come from a transfer the plan does not
    // know about: streams other than `ready_stream` wait on `ready` first.
    EventHandle ready;
    bool ready_pending = false;
    StreamHandle ready_stream;
    // The stream that last wrote this copy (for the final download).
    StreamHandle writer;
  };

  struct BufferState {
    std::vector<Copy> copies;  // by device
    int latest = -1;           // device of the latest version; -1: none yet
  };

  // Continuations.
  void Pump();
  void OnNodeDone(int index, absl::Status status);
  void OnFence(StreamHandle stream, absl::Status status);

  void IssueSome();
  absl::Status IssueNode(int index);
  absl::Status AllocateBuffers();
  // Makes buffer `b` current on `device` for work about to go on `stream`.
  absl::Status MakeCurrent(scheduler::BufferId b, int device,
                           StreamHandle stream);
  absl::Status Materialize(scheduler::BufferId b, int device,
                           StreamHandle stream);
  absl::Status WaitReady(Copy& copy, StreamHandle stream);
  absl::Status MarkTransferred(Copy& copy, int device, StreamHandle stream);
  absl::StatusOr<StreamHandle> StreamFor(int logical);
  absl::StatusOr<EventHandle> PlanEventFor(int event, int device);
  absl::Status DownloadOutputs();
  void StartDraining();
  void Finish();
  void Fail(absl::Status status, scheduler::NodeId node);
  // The initial contents of buffer `b`, computed on the host.
  std::string InitialContents(scheduler::BufferId b) const;

  // Constant after construction.
  const uint64_t id_;
  const JobEnv* const env_;
  const std::shared_ptr<const scheduler::Graph> graph_;
  const std::shared_ptr<const scheduler::Plan> plan_;
  const JobCallbacks callbacks_;
  const int num_devices_;

  Phase phase_ = Phase::kIssuing;
  absl::Status status_;
  scheduler::NodeId failed_node_ = -1;
  bool cancelled_ = false;

  size_t next_ = 0;   // next plan index to issue
  int in_flight_ = 0;
  int fences_pending_ = 0;
  bool pump_posted_ = false;

  std::vector<BufferState> buffers_;
  // Logical stream -> pooled stream (value 0 until first used).
  std::vector<StreamHandle> streams_;
  // Every Acquire from a stream pool, with the device, to release at the
  // end (a pooled stream may back several logical streams).
  std::vector<std::pair<StreamHandle, int>> acquired_streams_;
  // Distinct pooled streams used, in first-use order: the fences go here.
  std::vector<StreamHandle> used_streams_;
  // Pooled stream -> whether work on it failed.
  absl::flat_hash_map<uint64_t, bool> stream_failed_;
  // Plan event -> pooled event and its device.
  std::vector<EventHandle> events_;
  std::vector<int> event_devices_;
  // Every pooled event acquired, with its device, to give back at the end.
  std::vector<std::pair<EventHandle, int>> held_events_;
  // Host memory that pending uploads read from (a deque: elements never
  // move while uploads read them).
  std::deque<std::string> staging_;
  // Output buffers being downloaded: name and destination.
  std::vector<std::pair<std::string, std::unique_ptr<std::string>>> outputs_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_JOB_H_
