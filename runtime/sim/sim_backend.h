// A Backend made of CPU threads: simulated GPUs with checkable results.
//
// Each simulated device has a memory capacity (allocations are accounted
// against it by size; running out is RESOURCE_EXHAUSTED naming the device,
// the request and the free bytes). Each stream is a SimStream: a FIFO queue
// that the backend's pool of worker threads drains (Options::worker_threads,
// however many streams there are; sim_stream.h). Kernels run the CPU
// reference implementation from a CpuKernelTable, on the device memory;
// copies move the bytes. A stream waiting on an event really waits until
// that work has completed, parked: it holds no thread meanwhile.
//
// Memory. An allocation's contents are host memory, but only once some
// operation needs real contents: a kernel that computes on it (every op
// but `spin` and user kernels, which the simulator does not run), a copy
// from the host, a fill with anything but zero, or a copy from memory that
// has contents. Until then it reads as zeros and takes no host memory: a
// zero fill of it does nothing, a copy from it to memory without contents
// does nothing, and a copy from it to the host writes zeros. So a graph of
// spins over large buffers costs no host memory (materialized_bytes()).
//
// Timing model. Work is scheduled on a virtual clock in microseconds, one
// for all devices (sim_timeline.h), and each piece of work is booked on one
// unit of one device, a scheduler::OccupancyTimeline (scheduler/
// occupancy.h), exactly as the planner's cost model (scheduler/
// cost_model.h) books it:
//   - kernels: a launch lasts its cost_us (a `spin` does nothing else) and
//     keeps occupancy_units of its stream's device busy; kernels run side
//     by side while their units add up to at most kOccupancyUnits and there
//     are at most max_concurrent_kernels of them. A kernel of full
//     occupancy (the default) thus runs alone on its device. Every launch
//     books this way except those of COPY-engine nodes
//     (KernelLaunch::engine kCopy), which run on the device-to-device
//     engine of their stream's device;
//   - copies: a copy lasts bytes / bandwidth, from the bandwidth matrix
//     (source row, destination column, the host last), on one of three
//     engines per device, each running one copy at a time: host-to-device
//     (uploads into the device), device-to-host (downloads from it) and
//     device-to-device (copies into it from another device, copies within
//     it, and COPY-engine launches on it). A copy between two devices
//     without a link goes through the host: it lasts both legs, back to
//     back, on the destination's device-to-device engine.
// Work of no duration books nothing.
// A piece of work is ready once the work before it on its stream and the
// events it waits on have finished, and starts at the earliest time at or
// after that at which its unit has room for its whole duration, filling
// gaps left by earlier bookings. With time_scale 0 the clock is unpaced:
// work completes as fast as the host runs it and the virtual times are
// exact; every unit books its work in the order it was enqueued (launch
// and copy calls take a ticket per unit, and work that reaches its unit
// before an earlier ticket has booked parks its stream until it has), so
// the schedule does not depend on which thread runs first: it is
// deterministic, and it is what the cost model predicts for the same
// issue order. With time_scale > 0 the clock is paced: work completes no
// earlier in real time than its virtual end (scaled), each unit books work
// as it arrives, and nothing starts before the host enqueued it.
//
// Virtual times never include the host time the simulation itself takes:
// moving bytes, computing a kernel's results and a worker's turn delay only
// when work completes in real time, never its virtual start or end (on a
// paced clock an item is ready when the item before it ends or when the
// host enqueued it, not when a worker ran it; sim_stream.h). What does
// enter them, paced, is when the host enqueued the work, and the host work
// behind a host gate (Backend::EnqueueHostGate), which is real: the gate
// ends no earlier than the host opened it (unpaced, it lasts the busy time
// OpenHostGate is given). Events report the virtual time of their capture
// (EventTimeUs), which traces use.
//
// User kernels (KernelLaunch::user_kernel) are NOT executed: the simulator
// has no GPU to run CUDA code on, so a user kernel only occupies its share
// of the device for its cost_us, and the buffers it was given keep their
// contents. Its buffer arguments are still resolved, so a bad address fails
// as it would for a built-in op. PrepareModules accepts every module.
//
// Interruption. Aborting an error scope (a cancelled job) interrupts the
// scope's work in progress as well as skipping its queued work: on a paced
// clock a kernel or copy that has started, or is booked to start later,
// stops at once instead of waiting for its real-time end (sim_stream.h),
// its stream goes on with its next item, and its booking on its unit is
// cut at the time it stopped (given back entirely if it had not started),
// so work booked afterwards is not held up by work that no longer runs.
// That is what a GPU does when a context's kernels are killed: their
// blocks retire and the next work takes the SMs. Work of other jobs booked
// before the interruption keeps the times it was given (a GPU would start
// it earlier; the simulator does not move bookings once made). Unpaced,
// work completes as fast as the host runs it and nothing needs stopping.
// A kernel's host computation (the CPU kernel of a built-in op) is not
// interrupted: it is short next to the device time it models.
//
// Durations: a launch's cost_us that is negative or not a number occupies
// nothing, and one beyond kMaxDurationUs (or infinite) counts as
// kMaxDurationUs, so the virtual clock stays finite.
//
// Errors: synchronous ones (unknown handle, unknown op, an address outside
// any allocation, a lost device) are returned by the call; errors of
// enqueued work (a kernel rejecting its arguments, memory freed before the
// work ran, an injected fault) stick to the stream's error scope, as a
// sticky CUDA error would to a context: that scope's later work is skipped
// and its later host callbacks receive the error, while other scopes on the
// stream carry on (Backend::SetErrorScope). The error also reaches work of
// the same scope on other streams that waits on an event after it, so the
// dependents of failed work are skipped too.
//
// Fault injection: fail the k-th kernel launch on a device or on any device
// (the count is of Launch calls, in the order they were made), a hook
// consulted before every launch runs, and LoseDevice, after which every
// call and every piece of work on that device fails UNAVAILABLE with the
// reason. Other devices carry on.
//
// Device graphs (Backend::LaunchDeviceGraph) run through a
// StreamGraphRunner: lowered onto lanes, streams of the backend itself, so
// graph work has the same timing, faults and error scopes as the same work
// issued node by node. Cached instances are counted (graph_stats()).
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

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
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
#include "runtime/backend.h"
#include "runtime/device_graph.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/sim/sim_stream.h"
#include "runtime/sim/sim_timeline.h"
#include "runtime/stream_graph_runner.h"
#include "scheduler/occupancy.h"

namespace weft::runtime {

class SimBackend final : public Backend {
 public:
  // Fails one kernel launch: the nth Launch call counted from when the
  // fault is armed, on `device` or (device -1) on any device.
  struct LaunchFault {
    int device = -1;
    uint64_t nth = 1;
    absl::Status status = absl::InternalError("injected launch fault");
  };

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
    absl::Duration worker_stall_timeout =
        SimWorkerPool::kDefaultStallTimeout;
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
  // Waits for the stream's pending work, then stops it. FAILED_PRECONDITION
  // when called from the stream's own host callback (or work).
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

  // Every op with a CPU kernel may appear in a device graph.
  bool supports_device_graphs() const override { return true; }
  bool supports_device_graph_op(const std::string& op) const override;
  absl::Status LaunchDeviceGraph(const DeviceGraph& graph,
                                 StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status PrepareDeviceGraph(const DeviceGraph& graph) override;
  StreamGraphRunner::Stats graph_stats() const { return graphs_->stats(); }

  // Fault injection. INVALID_ARGUMENT for a device out of range, nth 0 or
  // an OK status.
  absl::Status InjectLaunchFault(LaunchFault fault)
      ABSL_LOCKS_EXCLUDED(fault_mu_);
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
  // Frees what std::calloc gave.
  struct FreeDeleter {
    void operator()(char* p) const { std::free(p); }
  };

  struct Allocation {
    ~Allocation();
    uint64_t address = 0;
    uint64_t size = 0;
    // The contents, zero-filled when first needed (Materialize); null while
    // the memory reads as zeros. Set once, under the backend's mu_, and
    // read under it (Resolve); the bytes themselves are the work's.
    std::unique_ptr<char, FreeDeleter> data;
    // The device's count of materialised bytes (DeviceModel::materialized).
    std::atomic<uint64_t>* materialized = nullptr;
  };

  struct Device {
    DeviceInfo info;
    uint64_t used = 0;
    uint64_t next_address = 0;
    // By start address. shared_ptr: work that resolved an address keeps
    // its memory alive even when it is freed meanwhile.
    std::map<uint64_t, std::shared_ptr<Allocation>> allocations;
  };

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

  // The units of a device that work books (the header comment).
  enum class Engine { kKernels, kHostToDevice, kDeviceToHost, kDeviceToDevice };
  static constexpr int kEngines = 4;
  static constexpr size_t EngineIndex(Engine engine) {
    return static_cast<size_t>(engine);
  }

  // One unit's bookings and, unpaced, their order: tickets are handed out
  // as work is enqueued, and work books only when every earlier ticket has
  // booked or been given up (its work never ran).
  //
  // Paced, it also keeps the bookings that may not have ended yet (`live`,
  // in booking order), so that an interrupted booking can be given back:
  // the timeline is then rebuilt from `now` on out of the others
  // (ReleaseBooking).
  struct LiveBooking {
    uint64_t id = 0;
    double start_us = 0;
    double end_us = 0;
    int32_t units = 0;
  };
  struct EngineBook {
    explicit EngineBook(int max_kernels) : max_kernels(max_kernels) {
      timeline.emplace(max_kernels);
    }
    int max_kernels;
    // Always set; optional only to be rebuilt in place.
    std::optional<scheduler::OccupancyTimeline> timeline;
    std::vector<LiveBooking> live;
    uint64_t next_booking = 1;
    size_t prune_at = 64;  // live bookings past which ended ones are dropped
    uint64_t next_ticket = 0;
    uint64_t next_to_book = 0;
    std::set<uint64_t> given_up;
    // Streams parked until their ticket's turn, by ticket.
    std::map<uint64_t, std::shared_ptr<SimStream::Waker>> turn_waiters;
  };

  // A device's health, its units and the host bytes behind its memory.
  struct DeviceModel {
    explicit DeviceModel(int kernel_slots)
        : books{{EngineBook(kernel_slots), EngineBook(1), EngineBook(1),
                 EngineBook(1)}} {}
    SimDeviceHealth health;
    // Counted by the thread that launches, while workers read `health`
    // for every item: each on a cache line of its own.
    alignas(64) std::atomic<uint64_t> launches{0};
    alignas(64) std::atomic<uint64_t> materialized{0};
    alignas(64) absl::Mutex mu;
    // By Engine.
    std::array<EngineBook, kEngines> books ABSL_GUARDED_BY(mu);
    bool closed ABSL_GUARDED_BY(mu) = false;
  };

  // A piece of work's place in its unit's booking order; given up when the
  // work is dropped without booking (skipped, failed, never run).
  struct Ticket {
    Ticket(DeviceModel* model, Engine engine, uint64_t number)
        : model(model), engine(engine), number(number) {}
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket();
    DeviceModel* const model;
    const Engine engine;
    const uint64_t number;
    bool booked = false;
  };

  // What a kernel does to the contents of its buffers.
  enum class Contents {
    kNone,      // nothing (`spin`, user kernels): none is materialised
    kZeroFill,  // writes zeros: nothing to do where there are none yet
    kCompute,   // reads or writes them: all are materialised
  };

  // What the work of one launch keeps. Records are pooled: Launch takes
  // one, and its work gives it back when destroyed (run or dropped), so
  // that a launch allocates nothing once the pool has warmed up and the
  // buffers inside keep their capacity. Records go back to the pool on the
  // thread that ran the work, one at a time; a thread inside a batch takes
  // them a few at a time.
  struct LaunchRecord {
    explicit LaunchRecord(SimBackend* owner) : owner(owner) {}
    // Drops what the launch held: its fault, its ticket (given up when it
    // never booked) and its arguments.
    void Clear();

    SimBackend* const owner;
    KernelLaunch launch;
    const CpuKernel* kernel = nullptr;
    Contents contents = Contents::kCompute;
    int device = 0;
    Engine engine = Engine::kKernels;
    int32_t units = scheduler::kOccupancyUnits;
    absl::Status fault;  // an injected fault, returned instead of running
    // Unpaced launches that take time book their unit in launch order.
    std::optional<Ticket> ticket;
    bool ran = false;  // the kernel ran; only booking is left
    // RunKernel's arguments, kept for their capacity.
    std::vector<HostArg> host_args;
    std::vector<std::shared_ptr<Allocation>> keep_alive;
  };
  struct GiveBackRecord {
    void operator()(LaunchRecord* record) const;
  };
  using RecordPtr = std::unique_ptr<LaunchRecord, GiveBackRecord>;
  // Most records a batch takes from the pool at once.
  static constexpr size_t kRecordsPerTake = 32;

  struct ArmedFault {
    int device = -1;
    uint64_t at = 0;  // the launch count that fails
    absl::Status status;
  };

  // A resolved address: host memory kept alive by `owner`; null `data`
  // for memory without contents yet (it reads as zeros).
  struct Resolved {
    std::shared_ptr<Allocation> owner;
    char* data = nullptr;
  };
  // Whether resolving gives memory contents.
  enum class Need { kAddress, kContents };

  // One copy's work: moves the bytes once, then books its engine.
  enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };
  struct CopyRecord {
    CopyKind kind = CopyKind::kDeviceToDevice;
    DevicePtr dst;
    DevicePtr src;
    void* host_dst = nullptr;
    const void* host_src = nullptr;
    uint64_t bytes = 0;
    // The engine it books: the destination's for uploads and device
    // copies, the source's for downloads.
    int engine_device = 0;
    Engine engine = Engine::kDeviceToDevice;
    double duration = 0;
    std::optional<Ticket> ticket;
    bool moved = false;  // the bytes moved; only booking is left
  };

  // The calling thread's batch (BeginBatch .. EndBatch); sim_backend.cc.
  struct Batch;
  static thread_local Batch tls_batch_;

  explicit SimBackend(Options options);

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
  absl::Status CheckDevice(int device) const;
  // The memory at [ptr, ptr + bytes); with kContents, materialised first
  // (RESOURCE_EXHAUSTED when the host has no memory for it).
  absl::StatusOr<Resolved> Resolve(DevicePtr ptr, uint64_t bytes,
                                   Need need = Need::kAddress) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Resolved> ResolveUnlocked(DevicePtr ptr, uint64_t bytes,
                                           Need need = Need::kAddress) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Gives `allocation` of `device` its (zeroed) host bytes, once.
  absl::Status Materialize(int device, Allocation& allocation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Virtual microseconds a copy of `bytes` from memory `from` to memory
  // `to` takes (num_devices_ is the host).
  double CopyUs(uint64_t bytes, int from, int to) const;
  // What `kernel` running `launch` does to its buffers' contents.
  Contents ContentsOf(const CpuKernel* kernel,
                      const KernelLaunch& launch) const;
  absl::Status CheckHealthy(int device) const;
  // Inside this thread's batch: holds `stream` until EndBatch.
  void MaybeHold(const std::shared_ptr<SimStream>& stream) const;
  // Counts a launch on `device`; the fault it hits, or OK.
  absl::Status NextLaunchFault(int device, const KernelLaunch& launch)
      ABSL_LOCKS_EXCLUDED(fault_mu_);
  // kernels_->Find(op), remembering the calling thread's last answer (the
  // table does not change while the backend uses it).
  const CpuKernel* FindKernel(const std::string& op) const;
  // A launch record from the pool, or a new one.
  RecordPtr TakeLaunchRecord() ABSL_LOCKS_EXCLUDED(records_mu_);
  void GiveBackLaunchRecord(LaunchRecord* record)
      ABSL_LOCKS_EXCLUDED(records_mu_);
  // Enqueues `work` on `queue`. Unpaced work that takes time first takes
  // a ticket of `engine` on `device` into `*ticket` (which `work` owns),
  // under the device's lock, so that every unit's tickets follow the order
  // of the work on every stream.
  void EnqueueInTurn(SimStream& queue, int device, Engine engine,
                     double duration, std::optional<Ticket>* ticket,
                     SimStream::Work work) const;
  // The work of a launch, on a worker: runs its kernel, then books it.
  absl::Status RunLaunch(LaunchRecord& record, SimStream::Timing& timing) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs the kernel of a launch on a worker.
  absl::Status RunKernel(LaunchRecord& record) const ABSL_LOCKS_EXCLUDED(mu_);
  // Enqueues `copy` on `stream` (EnqueueInTurn).
  void EnqueueCopy(const Stream& stream,
                   std::unique_ptr<CopyRecord> copy) const;
  // The work of a copy, on a worker: moves the bytes, then books it.
  absl::Status RunCopy(CopyRecord& copy, SimStream::Timing& timing) const
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status MoveBytes(const CopyRecord& copy) const ABSL_LOCKS_EXCLUDED(mu_);
  // Books `duration` of `units` on `engine` of `device` from
  // timing.ready_us and sets timing.end_us. `ticket` is null when the work
  // books as it comes (paced, or no duration); otherwise, before its turn,
  // it parks the stream (timing.Park()) until the turn comes.
  absl::Status BookInTurn(int device, Engine engine, double duration,
                          int32_t units, Ticket* ticket,
                          SimStream::Timing& timing) const;
  // Gives back what is left after `at_us` of paced booking `id` on
  // `engine` of `device`, which stopped then (an interrupted item): the
  // unit's timeline is rebuilt from `at_us` on out of its other live
  // bookings, each where it was booked.
  void ReleaseBooking(int device, Engine engine, uint64_t id,
                      double at_us) const;
  // The next ticket's turn on `engine`; the stream waiting for it, if any.
  static std::shared_ptr<SimStream::Waker> AdvanceTurnLocked(
      DeviceModel& model, Engine engine) ABSL_EXCLUSIVE_LOCKS_REQUIRED(model.mu);

  // Constant after construction.
  const uint64_t id_;  // unique among the backends of the process
  const Options options_;
  const int num_devices_;
  std::unique_ptr<CpuKernelTable> owned_kernels_;
  const CpuKernelTable* kernels_ = nullptr;
  // What a user kernel runs here: nothing (its cost is its only effect).
  const CpuKernel user_kernel_stand_in_ =
      [](absl::Span<const HostArg>) { return absl::OkStatus(); };
  // The table's kernels that are the built-in `spin` and `fill`, or null.
  const CpuKernel* spin_kernel_ = nullptr;
  const CpuKernel* fill_kernel_ = nullptr;
  std::vector<DeviceInfo> device_infos_;
  // (num_devices_ + 1)^2 bandwidths, row-major, source by destination.
  std::vector<double> bandwidth_gbps_;
  const SimClock clock_;
  std::vector<std::unique_ptr<DeviceModel>> models_;
  // Runs every stream; destroyed after them (the destructor shuts them
  // down).
  std::unique_ptr<SimWorkerPool> pool_;

  absl::Mutex fault_mu_;
  std::vector<ArmedFault> faults_ ABSL_GUARDED_BY(fault_mu_);
  std::atomic<bool> has_faults_{false};
  alignas(64) std::atomic<uint64_t> total_launches_{0};
  // Device graphs; lanes are streams of this backend, torn down with the
  // others (the runner's destructor touches nothing of the backend).
  std::unique_ptr<StreamGraphRunner> graphs_;

  // Streams destroyed so far: a batch that cached streams drops them when
  // this moves, so a destroyed stream is never found there.
  std::atomic<uint64_t> streams_destroyed_{0};

  // Launch records: those not in use, and all of them (freed with the
  // backend, after every stream has dropped its work).
  alignas(64) absl::Mutex records_mu_;
  std::vector<LaunchRecord*> free_records_ ABSL_GUARDED_BY(records_mu_);
  std::vector<std::unique_ptr<LaunchRecord>> records_
      ABSL_GUARDED_BY(records_mu_);

  mutable absl::Mutex mu_;
  std::vector<Device> devices_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Event> events_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, PendingGate> gates_ ABSL_GUARDED_BY(mu_);
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_BACKEND_H_
