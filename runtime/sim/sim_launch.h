// Kernel launches on the simulated backend: their records and their work.
//
// A launch's work runs on a worker of the pool, in two steps: once, the
// kernel (the CPU reference implementation of its op, from a
// CpuKernelTable, on the device memory), then the booking of its device
// time on its unit (SimDeviceModel), which may park the stream until its
// turn and run again to book. An injected fault (SimFaults) is returned
// instead of running, and a hook (Options::launch_fault) consulted just
// before the kernel runs may fail it too.
//
// What a kernel does to its buffers' contents decides which memory gets
// contents (SimMemory): `spin` and user kernels (which the simulator does
// not run: it has no GPU for CUDA code) touch none, a fill with +0 clears
// its buffer's range (it reads as zeros from then on, with no host work),
// and every other op computes on all of its buffers, whose stale bytes are
// zeroed first.
//
// Records are pooled: Make takes one, and the work gives it back when
// destroyed (run or dropped), so that a launch allocates nothing once the
// pool has warmed up and the buffers inside keep their capacity. A thread
// inside a batch takes records a few at a time into the batch's cache.
// Records are freed with this object, which must outlive every stream that
// holds launch work.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_SIM_SIM_LAUNCH_H_
#define WEFT_RUNTIME_SIM_SIM_LAUNCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "runtime/backend.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/sim/sim_device_model.h"
#include "runtime/sim/sim_memory.h"
#include "runtime/sim/sim_stream.h"
#include "scheduler/occupancy.h"

namespace weft::runtime {

class SimLaunches;

// What a kernel does to the contents of its buffers.
enum class SimContents {
  kNone,      // nothing (`spin`, user kernels): none is materialised
  kZeroFill,  // writes zeros: the range reads as zeros, no host work
  kCompute,   // reads or writes them: all are materialised
};

// What the work of one launch keeps.
struct SimLaunchRecord {
  explicit SimLaunchRecord(SimLaunches* owner) : owner(owner) {}
  // Drops what the launch held: its fault, its ticket (given up when it
  // never booked) and its arguments.
  void Clear();

  SimLaunches* const owner;
  KernelLaunch launch;
  const CpuKernel* kernel = nullptr;
  SimContents contents = SimContents::kCompute;
  int device = 0;
  SimDeviceModel* model = nullptr;  // the device's
  SimDeviceModel::Engine engine = SimDeviceModel::Engine::kKernels;
  int32_t units = scheduler::kOccupancyUnits;
  absl::Status fault;  // an injected fault, returned instead of running
  // Unpaced launches that take time book their unit in launch order.
  std::optional<SimDeviceModel::Ticket> ticket;
  bool ran = false;  // the kernel ran; only booking is left
  // RunKernel's arguments, kept for their capacity.
  std::vector<HostArg> host_args;
  std::vector<std::shared_ptr<const void>> keep_alive;

  // A chain (SimLaunches::Chain): the launch after this one, owned by the
  // chain's first record and given back with it.
  SimLaunchRecord* chain_next = nullptr;
  // On the first record: the launch to run next (null: this one) and when
  // it is ready, once the chain has parked part way; the paced bookings'
  // interrupt hooks so far.
  SimLaunchRecord* chain_at = nullptr;
  double chain_ready_us = 0;
  std::vector<SimStream::InterruptHook> chain_hooks;
};

class SimLaunches {
 public:
  struct GiveBack {
    void operator()(SimLaunchRecord* record) const;
  };
  using RecordPtr = std::unique_ptr<SimLaunchRecord, GiveBack>;
  // Most records a batch takes from the pool at once.
  static constexpr size_t kRecordsPerTake = 32;

  struct Options {
    // Kernels to run; not owned. Null: the built-in ops.
    const CpuKernelTable* kernels = nullptr;
    SimMemory* memory = nullptr;  // not owned
    // Consulted on a worker just before a launch runs; a non-OK answer
    // fails that launch with this status.
    std::function<absl::Status(int device, const KernelLaunch& launch)>
        launch_fault;
  };

  explicit SimLaunches(Options options);
  ~SimLaunches();

  SimLaunches(const SimLaunches&) = delete;
  SimLaunches& operator=(const SimLaunches&) = delete;

  const CpuKernelTable& kernels() const { return *kernels_; }
  // The kernel that runs `launch`: its op's from the table, remembering
  // the calling thread's last few answers, or for a user kernel a stand-in that
  // does nothing. Null for an op the table lacks.
  const CpuKernel* KernelFor(const KernelLaunch& launch) const;
  // What `kernel` running `launch` does to its buffers' contents.
  SimContents ContentsOf(const CpuKernel* kernel,
                         const KernelLaunch& launch) const;

  // A record of `launch` (its cost clamped to `cost_us`) running `kernel`
  // on `device`, whose model is `model`, failing with `fault` when that is
  // not OK. A COPY-engine launch books the device-to-device engine, one
  // copy at a time; any other shares the kernels' capacity. `cache` (a
  // batch's, or null) is where records are taken from, a few at a time.
  RecordPtr Make(const KernelLaunch& launch, double cost_us,
                 const CpuKernel* kernel, int device, SimDeviceModel* model,
                 absl::Status fault, std::vector<SimLaunchRecord*>* cache)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Returns the records left in a batch's `cache` to the pool.
  void Return(std::vector<SimLaunchRecord*>* cache) ABSL_LOCKS_EXCLUDED(mu_);

  // The work of a launch, on a worker: runs its kernel (once), then books
  // it.
  absl::Status Run(SimLaunchRecord& record, SimStream::Timing& timing) const;

  // Launches run back to back as one stream item, as a GPU runs a chain of
  // a graph's kernels: each starts when the one before it ends, books its
  // own unit in its own turn, and the item ends with the last. The first
  // record owns the others (appended with Append). A failure ends the
  // chain there, and the launches after it never run; so does an abort or
  // a failure of the chain's error scope meanwhile.
  static void Append(SimLaunchRecord& first, SimLaunchRecord*& last,
                     RecordPtr next);
  // The work of a chain, on a worker: runs its launches from where it
  // parked last, parking the stream again where one must wait for its
  // turn.
  absl::Status RunChain(SimLaunchRecord& first,
                        SimStream::Timing& timing) const;

  // Records made so far (in use or pooled).
  int records() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  RecordPtr Take(std::vector<SimLaunchRecord*>* cache) ABSL_LOCKS_EXCLUDED(mu_);
  void GiveBackRecord(SimLaunchRecord* record) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RunKernel(SimLaunchRecord& record) const;

  // Constant after construction.
  const uint64_t id_;  // unique in the process, for the threads' lookups
  const Options options_;
  std::unique_ptr<CpuKernelTable> owned_kernels_;
  const CpuKernelTable* kernels_ = nullptr;
  // What a user kernel runs here: nothing (its cost is its only effect).
  const CpuKernel user_kernel_stand_in_ = [](absl::Span<const HostArg>) {
    return absl::OkStatus();
  };
  // The table's kernels that are the built-in `spin` and `fill`, or null.
  const CpuKernel* spin_kernel_ = nullptr;
  const CpuKernel* fill_kernel_ = nullptr;

  // Records not in use, and all of them.
  mutable absl::Mutex mu_;
  std::vector<SimLaunchRecord*> free_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<SimLaunchRecord>> all_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_LAUNCH_H_
