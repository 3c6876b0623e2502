// A Backend made of CPU threads: simulated GPUs with checkable results.
//
// SimBackend implements runtime::Backend with classes that each own one
// part of the simulation:
//   SimMemory       each device's memory: capacity, allocations, and their
//                   contents, host memory only for the byte ranges that
//                   hold data, zeros everywhere else (sim_memory.h);
//   SimDeviceModel  each device's health and units (kernel capacity, three
//                   copy engines), on which work books its virtual time as
//                   the planner's cost model books it, and gives back what
//                   an interruption left unused (sim_device_model.h);
//   SimLaunches     kernel launches: the CPU reference kernel of the op on
//                   the device memory, then the booking (sim_launch.h);
//   SimCopies       copies: durations from the bandwidth matrix, the bytes
//                   moved, then the booking (sim_copy.h);
//   SimFaults       injected launch faults (sim_faults.h);
//   SimWorkerPool   the threads that run every SimStream, a FIFO queue per
//                   stream on the virtual clock (sim_stream.h,
//                   sim_timeline.h).
// A stream waiting on an event really waits until that work has completed,
// parked: it holds no thread meanwhile.
//
// Timing. Work is scheduled on a virtual clock in microseconds, one for all
// devices. With time_scale 0 the clock is unpaced: work completes as fast
// as the host runs it, the virtual times are exact, and every unit books
// its work in the order it was enqueued, so the schedule is deterministic
// and is what the cost model predicts for the same issue order. With
// time_scale > 0 the clock is paced: work completes no earlier in real time
// than its virtual end (scaled), each unit books the work of one error
// scope (a job) in the order it was enqueued and the work of different
// scopes as it arrives (so no job waits for another's turn), and nothing
// starts before the host enqueued it. Virtual times never include
// the host time the simulation itself takes; what does enter them, paced,
// is when the host enqueued the work, and the host work behind a host gate
// (Backend::EnqueueHostGate): the gate ends no earlier than the host opened
// it (unpaced, it lasts the busy time OpenHostGate is given). Events report
// the virtual time of their capture (EventTimeUs); stamps (Stamp), which
// traces use, report it without an event.
// Durations: a launch's cost_us that is negative or not a number occupies
// nothing, and one beyond kMaxDurationUs (or infinite) counts as
// kMaxDurationUs, so the virtual clock stays finite.
//
// User kernels (KernelLaunch::user_kernel) are NOT executed: the simulator
// has no GPU to run CUDA code on, so a user kernel only occupies its share
// of the device for its cost_us, and the buffers it was given keep their
// contents. Its buffer arguments are still resolved, so a bad address fails
// as it would for a built-in op. PrepareModules accepts every module.
//
// Interruption. Aborting an error scope (a cancelled job) interrupts the
// scope's work in progress as well as skipping its queued work
// (Options::interrupt_aborted_work): on a paced clock a kernel or copy that
// has started, or is booked to start later, stops at once, its stream goes
// on with its next item, and its booking is cut at the time it stopped, as
// when a GPU kills a context's kernels. Work of other jobs booked before
// the interruption keeps its times. A kernel's host computation is not
// interrupted: it is short next to the device time it models.
//
// Errors: synchronous ones (unknown handle, unknown op, an address outside
// any allocation, a lost device) are returned by the call; errors of
// enqueued work (a kernel rejecting its arguments, memory freed before the
// work ran, an injected fault) stick to the stream's error scope, as a
// sticky CUDA error would to a context: that scope's later work is skipped
// and its later host callbacks receive the error, while other scopes on the
// stream carry on (Backend::SetErrorScope). The error also reaches work of
// the same scope on other streams that waits on an event after it.
// LoseDevice makes every call and every piece of work on that device fail
// UNAVAILABLE with the reason; other devices carry on.
//
// Device graphs (Backend::LaunchDeviceGraph) run through a
// StreamGraphRunner: lowered onto lanes, streams of the backend itself, so
// graph work has the same timing, faults and error scopes as the same work
// issued node by node. A graph of kernels alone goes onto its lanes as one
// stream item per lane (SimLaunches::RunChain), as a GPU takes a graph in
// one launch: the kernels keep their own bookings and turns, and the host
// pays one enqueue per lane instead of one per node. Cached instances are
// counted (graph_stats()).
//
// Host callbacks run on a worker of the pool, one at a time per stream; a
// callback may synchronize or destroy other streams (the pool adds a worker
// while it blocks), not its own. Destroying the backend stops every stream,
// drops work not yet started (without calling its callbacks) and joins all
// threads.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_SIM_SIM_BACKEND_H_
#define WEFT_RUNTIME_SIM_SIM_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/backend.h"
#include "runtime/device_graph.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/sim/sim_copy.h"
#include "runtime/sim/sim_device_control.h"
#include "runtime/sim/sim_device_model.h"
#include "runtime/sim/sim_faults.h"
#include "runtime/sim/sim_launch.h"
#include "runtime/sim/sim_memory.h"
#include "runtime/sim/sim_stream.h"
#include "runtime/sim/sim_timeline.h"
#include "runtime/stream_graph_runner.h"

namespace weft::runtime {

class SimBackend final : public Backend {
 public:
  // Fails one kernel launch (sim_faults.h).
  using LaunchFault = SimLaunchFault;

  struct Options {
    int num_devices = 2;
    uint64_t memory_bytes = uint64_t{16} << 30;  // per device
    // Copy bandwidths in GB/s (1e9 bytes per second). Zero, a negative
    // value or infinity makes that kind of copy instantaneous.
    double host_to_device_gbps = 25;
    double device_to_host_gbps = 25;
    double device_to_device_gbps = 300;  // same device or peer
    // The topology, when given (as scheduler::Topology::Matrix() gives
    // it): GB/s from every memory (row) to every memory (column),
    // num_devices + 1 square, the host last; the diagonal is a device's copy
    // within itself. Infinity is instantaneous; 0 between two devices means
    // no direct link (the copy is staged through the host); every device
    // needs a non-zero link to and from the host. Replaces the three values
    // above.
    std::vector<std::vector<double>> bandwidth_gbps;
    // Kernels that run at once on one device, however small their
    // occupancy; more wait. 32 is the number of hardware work queues
    // (Hyper-Q) of current GPUs.
    int max_concurrent_kernels = 32;
    // Real time per unit of virtual time: 1 runs the model in real time,
    // 2 at half speed, 0 unpaced (as fast as the host can, with exact
    // virtual timing).
    double time_scale = 1.0;
    std::string device_name = "Weft Simulated GPU";
    // Kernels to run; not owned, must outlive the backend. Null: the
    // built-in ops.
    const CpuKernelTable* kernels = nullptr;
    // Threads that run the streams (all devices together); more are added
    // only while host code blocks them (sim_stream.h). 0: one per device,
    // at most one fewer than the host's hardware threads (at least one),
    // leaving a core to the thread that issues work: on a two-core host
    // one worker runs every stream, which costs less per node than two
    // (executor_overhead_bench).
    int worker_threads = 0;
    // How long every worker may be stuck in host code (a callback or a
    // kernel that blocks) while streams wait, before the pool adds one;
    // infinite: never (sim_stream.h).
    absl::Duration worker_stall_timeout = SimWorkerPool::kDefaultStallTimeout;
    // How long a worker that runs out of work polls for more before it
    // sleeps (one worker at a time; sim_worker_pool.h): work issued within
    // it costs the issuing thread no wake-up, as a launch on a GPU costs
    // none. Zero: workers sleep at once.
    absl::Duration worker_spin = absl::Microseconds(50);
    // Whether aborting an error scope (Backend::AbortErrorScope) also
    // interrupts the scope's work in progress: a paced kernel or copy stops
    // within a few milliseconds and gives back the rest of its device time
    // (interrupts_aborted_work()). False runs it to its end, as CUDA does:
    // for tests of what the executor does then.
    bool interrupt_aborted_work = true;
    // Fault injection: consulted on a worker just before a launch
    // runs; a non-OK answer fails that launch with this status.
    std::function<absl::Status(int device, const KernelLaunch& launch)>
        launch_fault;
    // Faults armed at creation.
    std::vector<LaunchFault> launch_faults;
  };

  // The longest a piece of work lasts, in virtual microseconds (31.7
  // years): longer costs are clamped to it.
  static constexpr double kMaxDurationUs = 1e15;

  static absl::StatusOr<std::unique_ptr<SimBackend>> Create(Options options);
  ~SimBackend() override;

  SimBackend(const SimBackend&) = delete;
  SimBackend& operator=(const SimBackend&) = delete;

  // Backend.
  int device_count() const override;
  DeviceInfo device_info(int device) const override;
  uint64_t memory_used_bytes(int device) const override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<StreamHandle> CreateStream(int device) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the stream's pending work, then stops it. Called from the
  // stream's own host callback (or work), as CUDA allows, it returns at once:
  // the stream runs the rest of its work and is shut down by a later
  // DestroyStream or by the backend's destructor.
  absl::Status DestroyStream(StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<EventHandle> CreateEvent(int device) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status DestroyEvent(EventHandle event) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RecordEvent(EventHandle event, StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status StreamWaitEvent(StreamHandle stream, EventHandle event) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<bool> QueryEvent(EventHandle event) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SynchronizeStream(StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<DevicePtr> Allocate(int device, uint64_t bytes) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Free(DevicePtr ptr) override ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status CopyHostToDevice(DevicePtr dst, const void* src, uint64_t bytes,
                                StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CopyDeviceToHost(void* dst, DevicePtr src, uint64_t bytes,
                                StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CopyDeviceToDevice(DevicePtr dst, DevicePtr src, uint64_t bytes,
                                  StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // One upload of `bytes`, timed and booked as CopyHostToDevice of `bytes`;
  // only the data takes host memory (sim_memory.h).
  absl::Status CopyHostToDevicePadded(DevicePtr dst, const void* src,
                                      uint64_t src_bytes, uint64_t bytes,
                                      StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // One download of `bytes`, timed and booked as CopyDeviceToHost of
  // `bytes`; `dst` stores the bytes up to the end of the data in the
  // source range (sim_memory.h), zeros after are left implicit.
  absl::Status CopyDeviceToHostBuffer(HostBuffer* dst, DevicePtr src,
                                      uint64_t bytes,
                                      StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status Launch(const KernelLaunch& launch, StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status AddHostCallback(StreamHandle stream,
                               HostCallback callback) override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status SetErrorScope(StreamHandle stream, uint64_t scope) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // With Options::interrupt_aborted_work, also interrupts the scope's work
  // in progress (the header comment, Interruption).
  absl::Status AbortErrorScope(StreamHandle stream, uint64_t scope,
                               absl::Status status) override
      ABSL_LOCKS_EXCLUDED(mu_);
  bool interrupts_aborted_work() const override {
    return options_.interrupt_aborted_work;
  }
  void ReleaseErrorScope(StreamHandle stream, uint64_t scope) override
      ABSL_LOCKS_EXCLUDED(mu_);
  bool supports_host_gates() const override { return true; }
  absl::StatusOr<GateHandle> EnqueueHostGate(StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status OpenHostGate(GateHandle gate, absl::Status status,
                            double busy_us) override ABSL_LOCKS_EXCLUDED(mu_);
  // Holds the streams this thread enqueues on until EndBatch.
  void BeginBatch() override;
  void EndBatch() override;
  bool has_device_clock() const override { return true; }
  absl::StatusOr<double> EventTimeUs(EventHandle event) override
      ABSL_LOCKS_EXCLUDED(mu_);
  bool supports_stamps() const override { return true; }
  absl::StatusOr<std::shared_ptr<const DeviceStamp>> Stamp(
      StreamHandle stream) override ABSL_LOCKS_EXCLUDED(mu_);

  // Every op with a CPU kernel may appear in a device graph.
  bool supports_device_graphs() const override { return true; }
  bool supports_device_graph_op(const std::string& op) const override;
  absl::Status LaunchDeviceGraph(const DeviceGraph& graph,
                                 StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status PrepareDeviceGraph(const DeviceGraph& graph) override;
  // Conditions and selectors evaluated by the device workers
  // (sim_device_control.h).
  bool supports_device_loops() const override { return true; }
  bool supports_nested_device_control() const override { return true; }
  absl::Status LaunchDeviceLoop(const DeviceLoop& loop, StreamHandle stream,
                                StreamHandle body_stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status LaunchDeviceCase(const DeviceCase& choice, StreamHandle stream,
                                StreamHandle body_stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  StreamGraphRunner::Stats graph_stats() const { return graphs_->stats(); }

  // Fault injection. INVALID_ARGUMENT for a device out of range, nth 0 or
  // an OK status.
  absl::Status InjectLaunchFault(LaunchFault fault);
  // From now on every call and all work on `device` fail UNAVAILABLE
  // ("device D (...) was lost: <reason>"), work already queued included.
  absl::Status LoseDevice(int device, absl::string_view reason);
  bool device_lost(int device) const;

  // Number of live streams and events over all devices.
  int stream_count() const ABSL_LOCKS_EXCLUDED(mu_);
  int event_count() const ABSL_LOCKS_EXCLUDED(mu_);
  // Threads the streams run on now (SimWorkerPool::threads).
  int worker_threads() const { return pool_->threads(); }
  // The virtual clock: paced, the time now; unpaced, 0.
  double NowUs() const { return clock_.NowUs(); }
  // Host bytes holding the contents of `device`'s memory (allocations not
  // yet materialised hold none; freed ones count until the work using them
  // has let go). For tests.
  uint64_t materialized_bytes(int device) const;

 private:
  struct Stream {
    int device = 0;
    std::shared_ptr<SimStream> queue;
  };

  struct Event {
    int device = 0;
    std::shared_ptr<SimStream> stream;  // null until recorded
    std::shared_ptr<const SimStream::Mark> mark;
  };

  struct PendingGate {
    std::shared_ptr<SimStream> stream;
    std::shared_ptr<SimStream::Gate> gate;
  };

  // The calling thread's batch (BeginBatch .. EndBatch); sim_backend.cc.
  struct Batch;
  static thread_local Batch tls_batch_;

  // `bandwidth_gbps`: SimCopies::BandwidthMatrix of the options.
  SimBackend(Options options, std::vector<double> bandwidth_gbps);

  absl::StatusOr<Stream> FindStream(StreamHandle handle) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The stream for one call. Inside a batch of this backend on the calling
  // thread, from the batch's cache (no lock, no reference count taken): the
  // answer points into the batch and stays valid until the thread's next
  // lookup. Otherwise FindStream fills `*storage` and the answer points
  // there.
  absl::StatusOr<const Stream*> FindStreamForCall(StreamHandle handle,
                                                  Stream* storage) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // A copy of the event's record (its last capture); NOT_FOUND if unknown.
  absl::StatusOr<Event> FindEvent(EventHandle handle) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // A duration the virtual clock can take: 0 for negative or NaN, at most
  // kMaxDurationUs.
  static double ClampDurationUs(double us);
  absl::Status CheckDevice(int device) const;
  absl::Status CheckHealthy(int device) const;
  // `stream`, of a healthy device, when `body_stream` is of the same one:
  // for control node `name`.
  absl::StatusOr<Stream> ControlStream(const std::string& name,
                                       StreamHandle stream,
                                       StreamHandle body_stream) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Inside this thread's batch: holds `stream` until EndBatch.
  void MaybeHold(const std::shared_ptr<SimStream>& stream) const;
  // The stream of a copy of `bytes` on `stream_handle` (FindStreamForCall),
  // once its device and the devices of `ranges` are healthy and each range
  // of `bytes` from there is allocated.
  absl::StatusOr<const Stream*> PrepareCopy(
      StreamHandle stream_handle, uint64_t bytes,
      std::initializer_list<DevicePtr> ranges, Stream* storage) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Enqueues `copy` on `stream`.
  void EnqueueCopy(const Stream& stream,
                   std::unique_ptr<SimCopyRecord> copy) const;
  // The record of `launch` on `device`, once its op exists, the device is
  // healthy and its buffers are allocated.
  absl::StatusOr<SimLaunches::RecordPtr> MakeLaunch(const KernelLaunch& launch,
                                                    int device);
  // StreamGraphRunner::Options::launch_kernels: `launches` in order, each
  // in chain `chain_of[i]`, chain c one item on `streams[c]` (streams of
  // one device). Nothing is enqueued when a launch is refused.
  absl::Status LaunchKernelChains(
      absl::Span<const KernelLaunch* const> launches,
      absl::Span<const int> chain_of, absl::Span<const StreamHandle> streams)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const uint64_t id_;  // unique among the backends of the process
  const Options options_;
  const int num_devices_;
  std::vector<DeviceInfo> device_infos_;
  const SimClock clock_;
  std::unique_ptr<SimMemory> memory_;
  std::vector<std::unique_ptr<SimDeviceModel>> models_;
  SimFaults faults_;
  std::unique_ptr<SimLaunches> launches_;
  std::unique_ptr<SimCopies> copies_;
  // Runs every stream; destroyed after them (the destructor shuts them
  // down).
  std::unique_ptr<SimWorkerPool> pool_;
  // Device graphs; lanes are streams of this backend, torn down with the
  // others (the runner's destructor touches nothing of the backend).
  std::unique_ptr<StreamGraphRunner> graphs_;
  std::unique_ptr<SimDeviceControl> control_;

  // Streams destroyed so far: a batch that cached streams drops them when
  // this moves, so a destroyed stream is never found there.
  std::atomic<uint64_t> streams_destroyed_{0};

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  // Destroyed from their own threads, not shut down yet.
  std::vector<std::shared_ptr<SimStream>> retired_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Event> events_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, PendingGate> gates_ ABSL_GUARDED_BY(mu_);
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_BACKEND_H_
