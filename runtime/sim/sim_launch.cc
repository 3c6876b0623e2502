#include "runtime/sim/sim_launch.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "runtime/ops/scalars.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

std::atomic<uint64_t> next_launches_id{1};

// The calling thread's last few kernel lookups: a launch of an op seen
// lately on the same SimLaunches skips hashing its name (a loop's body
// alternates a few ops). They are told apart by an id that is never reused
// (an address may be).
struct KernelLookups {
  static constexpr int kEntries = 4;
  struct Entry {
    uint64_t owner = 0;
    std::string op;
    const CpuKernel* kernel = nullptr;
  };
  Entry entries[kEntries];
  int next = 0;  // the entry replaced next
};
thread_local KernelLookups tls_kernel_lookups;

// Whether `kernel` is the built-in function `fn` (cpu_kernels.h).
bool IsBuiltin(const CpuKernel* kernel,
               absl::Status (*fn)(absl::Span<const HostArg>)) {
  if (kernel == nullptr) return false;
  auto* const* target =
      kernel->target<absl::Status (*)(absl::Span<const HostArg>)>();
  return target != nullptr && *target == fn;
}

// Whether a scalar argument is a zero whose bytes are all zero in every
// dtype (not -0.0).
bool IsPlainZero(const KernelArg& arg) {
  if (const auto* f = std::get_if<float>(&arg)) {
    return *f == 0 && !std::signbit(*f);
  }
  if (const auto* d = std::get_if<double>(&arg)) {
    return *d == 0 && !std::signbit(*d);
  }
  if (const auto* i = std::get_if<int32_t>(&arg)) return *i == 0;
  if (const auto* l = std::get_if<int64_t>(&arg)) return *l == 0;
  return false;
}

}  // namespace

void SimLaunchRecord::Clear() {
  // The rest of a chain goes back with its first record, one at a time
  // (a chain may be long).
  while (chain_next != nullptr) {
    SimLaunchRecord* next = chain_next;
    chain_next = next->chain_next;
    next->chain_next = nullptr;
    SimLaunches::GiveBack()(next);
  }
  chain_at = nullptr;
  chain_ready_us = 0;
  chain_hooks.clear();
  ticket.reset();
  fault = absl::OkStatus();
  contents = SimContents::kCompute;
  launch.args.clear();
  launch.user_kernel = nullptr;
  launch.module = nullptr;
  ran = false;
  host_args.clear();
  keep_alive.clear();
}

void SimLaunches::GiveBack::operator()(SimLaunchRecord* record) const {
  record->owner->GiveBackRecord(record);
}

SimLaunches::SimLaunches(Options options)
    : id_(next_launches_id.fetch_add(1, std::memory_order_relaxed)),
      options_(std::move(options)) {
  if (options_.kernels == nullptr) {
    owned_kernels_ =
        std::make_unique<CpuKernelTable>(CpuKernelTable::WithBuiltins());
    kernels_ = owned_kernels_.get();
  } else {
    kernels_ = options_.kernels;
  }
  if (const CpuKernel* spin = kernels_->Find("spin");
      IsBuiltin(spin, &SpinKernel)) {
    spin_kernel_ = spin;
  }
  if (const CpuKernel* fill = kernels_->Find("fill");
      IsBuiltin(fill, &FillKernel)) {
    fill_kernel_ = fill;
  }
}

SimLaunches::~SimLaunches() = default;

const CpuKernel* SimLaunches::KernelFor(const KernelLaunch& launch) const {
  if (launch.user_kernel != nullptr) return &user_kernel_stand_in_;
  KernelLookups& lookups = tls_kernel_lookups;
  for (const KernelLookups::Entry& entry : lookups.entries) {
    if (entry.owner == id_ && entry.op == launch.op) return entry.kernel;
  }
  const CpuKernel* kernel = kernels_->Find(launch.op);
  if (kernel != nullptr) {
    KernelLookups::Entry& entry = lookups.entries[lookups.next];
    lookups.next = (lookups.next + 1) % KernelLookups::kEntries;
    entry.owner = id_;
    entry.op = launch.op;
    entry.kernel = kernel;
  }
  return kernel;
}

SimContents SimLaunches::ContentsOf(const CpuKernel* kernel,
                                    const KernelLaunch& launch) const {
  if (kernel == &user_kernel_stand_in_ || kernel == spin_kernel_) {
    return SimContents::kNone;
  }
  // fill(buffer, +0): memory without contents reads as zeros already.
  if (kernel == fill_kernel_ && launch.args.size() == 2 &&
      std::holds_alternative<DeviceBufferArg>(launch.args[0]) &&
      IsPlainZero(launch.args[1])) {
    return SimContents::kZeroFill;
  }
  return SimContents::kCompute;
}

SimLaunches::RecordPtr SimLaunches::Make(const KernelLaunch& launch,
                                         double cost_us,
                                         const CpuKernel* kernel, int device,
                                         SimDeviceModel* model,
                                         absl::Status fault,
                                         std::vector<SimLaunchRecord*>* cache) {
  RecordPtr record = Take(cache);
  record->launch.op = launch.op;
  record->launch.args = launch.args;
  record->launch.cost_us = cost_us;
  record->launch.occupancy_units = launch.occupancy_units;
  record->launch.engine = launch.engine;
  record->launch.user_kernel = launch.user_kernel;
  record->launch.module = launch.module;
  record->kernel = kernel;
  record->contents = ContentsOf(kernel, launch);
  record->device = device;
  record->model = model;
  if (launch.engine == scheduler::Engine::kCopy) {
    record->engine = SimDeviceModel::Engine::kDeviceToDevice;
    record->units = scheduler::kOccupancyUnits;
  } else {
    record->engine = SimDeviceModel::Engine::kKernels;
    record->units = launch.occupancy_units;
  }
  record->fault = std::move(fault);
  return record;
}

SimLaunches::RecordPtr SimLaunches::Take(std::vector<SimLaunchRecord*>* cache) {
  SimLaunchRecord* record = nullptr;
  if (cache != nullptr) {
    if (cache->empty()) {
      absl::MutexLock lock(&mu_);
      const size_t n = std::min(free_.size(), kRecordsPerTake);
      cache->assign(free_.end() - n, free_.end());
      free_.resize(free_.size() - n);
    }
    if (!cache->empty()) {
      record = cache->back();
      cache->pop_back();
    }
  } else {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      record = free_.back();
      free_.pop_back();
    }
  }
  if (record == nullptr) {
    auto fresh = std::make_unique<SimLaunchRecord>(this);
    record = fresh.get();
    absl::MutexLock lock(&mu_);
    all_.push_back(std::move(fresh));
  }
  return RecordPtr(record);
}

void SimLaunches::Return(std::vector<SimLaunchRecord*>* cache) {
  if (cache->empty()) return;
  absl::MutexLock lock(&mu_);
  free_.insert(free_.end(), cache->begin(), cache->end());
  cache->clear();
}

void SimLaunches::GiveBackRecord(SimLaunchRecord* record) {
  record->Clear();  // outside mu_: a ticket given up wakes a stream
  absl::MutexLock lock(&mu_);
  free_.push_back(record);
}

int SimLaunches::records() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(all_.size());
}

absl::Status SimLaunches::Run(SimLaunchRecord& record,
                              SimStream::Timing& timing) const {
  // The kernel runs once; before its ticket's turn the stream parks and
  // comes back to book (`ran` remembers).
  if (!record.ran) {
    if (!record.fault.ok()) return record.fault;
    WEFT_RETURN_IF_ERROR(RunKernel(record));
    record.ran = true;
  }
  return record.model->BookInTurn(
      record.engine, record.launch.cost_us, record.units,
      record.ticket.has_value() ? &*record.ticket : nullptr, timing);
}

void SimLaunches::Append(SimLaunchRecord& first, SimLaunchRecord*& last,
                         RecordPtr next) {
  SimLaunchRecord* const added = next.release();
  if (last == nullptr) last = &first;
  last->chain_next = added;
  last = added;
}

absl::Status SimLaunches::RunChain(SimLaunchRecord& first,
                                   SimStream::Timing& timing) const {
  SimLaunchRecord* record = &first;
  if (first.chain_at != nullptr) {
    record = first.chain_at;
    timing.ready_us = first.chain_ready_us;
  }
  while (true) {
    timing.end_us = timing.ready_us;
    WEFT_RETURN_IF_ERROR(Run(*record, timing));
    if (timing.parked()) {
      // Back here, with this launch's own ready time, once it is woken.
      first.chain_at = record;
      first.chain_ready_us = timing.ready_us;
      return absl::OkStatus();
    }
    if (SimStream::InterruptHook hook = timing.TakeInterruptHook()) {
      first.chain_hooks.push_back(std::move(hook));
    }
    record = record->chain_next;
    if (record == nullptr) break;
    // Aborted or failed meanwhile: the rest is skipped, as separate
    // items of the scope would be.
    WEFT_RETURN_IF_ERROR(timing.scope_error());
    timing.ready_us = timing.end_us;
  }
  // Paced: an interruption cuts every booking still running or ahead.
  if (first.chain_hooks.size() == 1) {
    timing.OnInterrupt(std::move(first.chain_hooks.front()));
  } else if (!first.chain_hooks.empty()) {
    timing.OnInterrupt(
        [hooks = std::move(first.chain_hooks)](double at_us) mutable {
          for (SimStream::InterruptHook& hook : hooks) hook(at_us);
        });
  }
  first.chain_hooks.clear();
  return absl::OkStatus();
}

absl::Status SimLaunches::RunKernel(SimLaunchRecord& record) const {
  const KernelLaunch& launch = record.launch;
  const int device = record.device;
  std::vector<HostArg>& args = record.host_args;
  // Whatever the outcome, the memory is held only while the kernel runs.
  std::vector<std::shared_ptr<const void>>& keep_alive = record.keep_alive;
  absl::Cleanup release = [&args, &keep_alive] {
    args.clear();
    keep_alive.clear();
  };
  // Only a kernel that computes on its buffers gives them contents.
  const SimMemory::Need need = record.contents == SimContents::kCompute
                                   ? SimMemory::Need::kContents
                                   : SimMemory::Need::kAddress;
  // What a zero fill clears: its buffer, argument 0 (ContentsOf).
  SimMemory::Resolved zeroed;
  if (!launch.args.empty()) {
    args.reserve(launch.args.size());
    absl::Status resolved = options_.memory->ResolveArgs(
        launch.args, need, [&](const KernelArg& arg, SimMemory::Resolved* r) {
          if (r == nullptr) {
            args.push_back(ConvertScalar<HostArg>(arg));
            return;
          }
          const auto& b = std::get<DeviceBufferArg>(arg);
          if (record.contents == SimContents::kZeroFill && args.empty()) {
            zeroed = *r;
          }
          args.push_back(
              HostBufferArg{r->data, b.size_bytes, b.dtype, b.access});
          keep_alive.push_back(std::move(r->owner));
        });
    if (!resolved.ok()) {
      return absl::Status(resolved.code(),
                          absl::StrCat(launch.op, " on device ", device, ": ",
                                       resolved.message()));
    }
  }
  if (options_.launch_fault) {
    absl::Status fault = options_.launch_fault(device, launch);
    if (!fault.ok()) return fault;
  }
  // Zeros: the range reads as zeros from now on, with no host work.
  if (record.contents == SimContents::kZeroFill) {
    options_.memory->Clear(
        zeroed, std::get<DeviceBufferArg>(launch.args[0]).size_bytes);
    return absl::OkStatus();
  }
  absl::Status status = (*record.kernel)(args);
  if (!status.ok()) {
    return absl::Status(
        status.code(),
        absl::StrCat(launch.op, " on device ", device, ": ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace weft::runtime
