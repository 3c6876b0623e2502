// The simulated devices' memory: allocations, their contents and capacity.
//
// Each device has a capacity; allocations are accounted against it by size
// (running out is RESOURCE_EXHAUSTED naming the device, the request and the
// free bytes) and get 256-byte aligned addresses away from zero, as
// cudaMalloc gives. An allocation's contents are host memory, but only
// once some operation needs real contents (Need::kContents): until then it
// reads as zeros and takes no host memory, so a graph of spins over large
// buffers costs none (materialized_bytes). Contents, once made, are zeroed
// pages from calloc, which the OS hands out lazily.
//
// Resolving an address finds the allocation that holds the whole range and
// keeps that allocation alive (Resolved::owner) for as long as the caller
// holds it, so work that resolved its buffers before they were freed still
// has memory to touch.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_SIM_SIM_MEMORY_H_
#define WEFT_RUNTIME_SIM_SIM_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "runtime/backend.h"

namespace weft::runtime {

class SimMemory {
 public:
  // Whether resolving gives memory contents.
  enum class Need { kAddress, kContents };

  // A resolved address: host memory kept alive by `owner`; null `data`
  // for memory without contents yet (it reads as zeros).
  struct Resolved {
    std::shared_ptr<const void> owner;
    char* data = nullptr;
  };

  // `device_names` (one per device) name devices in errors; each has
  // `capacity_bytes`.
  SimMemory(std::vector<std::string> device_names, uint64_t capacity_bytes);

  SimMemory(const SimMemory&) = delete;
  SimMemory& operator=(const SimMemory&) = delete;

  int num_devices() const { return static_cast<int>(names_.size()); }
  uint64_t capacity_bytes() const { return capacity_; }

  absl::StatusOr<DevicePtr> Allocate(int device, uint64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  // INVALID_ARGUMENT unless `ptr` is the start of an allocation.
  absl::Status Free(DevicePtr ptr) ABSL_LOCKS_EXCLUDED(mu_);

  // The memory at [ptr, ptr + bytes); with kContents, materialised first
  // (RESOURCE_EXHAUSTED when the host has no memory for it).
  // INVALID_ARGUMENT when the range is not inside one allocation.
  absl::StatusOr<Resolved> Resolve(DevicePtr ptr, uint64_t bytes,
                                   Need need = Need::kAddress) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Resolves the buffer arguments of `args` in order, all under one lock,
  // and calls `each(arg, resolved)` for every argument (`resolved` null
  // for scalars). Stops at the first error, which it returns.
  absl::Status ResolveArgs(
      absl::Span<const KernelArg> args, Need need,
      absl::FunctionRef<void(const KernelArg&, Resolved*)> each) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Bytes allocated on `device`; 0 for a device out of range.
  uint64_t used_bytes(int device) const ABSL_LOCKS_EXCLUDED(mu_);
  // Host bytes holding the contents of `device`'s memory (allocations not
  // yet materialised hold none; freed ones count until the work using them
  // has let go).
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
    // the memory reads as zeros. Set once, under mu_, and read under it
    // (Resolve); the bytes themselves are the work's.
    std::unique_ptr<char, FreeDeleter> data;
    // The device's count of materialised bytes.
    std::atomic<uint64_t>* materialized = nullptr;
  };

  struct Device {
    uint64_t used = 0;
    uint64_t next_address = 0;
    // By start address. shared_ptr: work that resolved an address keeps
    // its memory alive even when it is freed meanwhile.
    std::map<uint64_t, std::shared_ptr<Allocation>> allocations;
  };

  // Counted by the threads that materialise, read by tests: each on a
  // cache line of its own.
  struct alignas(64) Counter {
    std::atomic<uint64_t> bytes{0};
  };

  absl::StatusOr<Resolved> ResolveLocked(DevicePtr ptr, uint64_t bytes,
                                         Need need) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives `allocation` of `device` its (zeroed) host bytes, once.
  absl::Status Materialize(int device, Allocation& allocation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckDevice(int device) const;

  // Constant after construction.
  const std::vector<std::string> names_;
  const uint64_t capacity_;
  std::unique_ptr<Counter[]> materialized_;

  mutable absl::Mutex mu_;
  std::vector<Device> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_MEMORY_H_
