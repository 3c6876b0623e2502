// The simulated devices' memory: allocations, their contents and capacity.
//
// Each device has a capacity; allocations are accounted against it by size
// (running out is RESOURCE_EXHAUSTED naming the device, the request and the
// free bytes) and get 256-byte aligned addresses away from zero, as
// cudaMalloc gives.
//
// Contents. An allocation reads as zeros except in the byte ranges it
// records as holding data (SimRanges): only operations that put real bytes
// there add ranges (an upload's data, a kernel that computes on its
// buffers, a copy of ranges holding data), and zeros written by an
// upload's zero tail, a zero fill (Clear) or a copy of zeros only remove
// them, with no host work. The executor places many buffers in one
// allocation (an arena), so the ranges are byte ranges inside an
// allocation rather than a mark per allocation. Host memory for the bytes
// is one block per allocation, made on the first operation that needs
// real bytes (zeroed_memory.h: pages the OS zeroes on first touch): an
// upload of one byte of data into a 1 GiB allocation touches one page.
// Host bytes outside the data ranges may be stale (once written, since
// cleared): whoever needs real contents of a range zeroes its stale parts
// first (Resolve with Need::kContents), and reads and copies move only
// data ranges (Read, Copy), zeros standing in for the rest.
// materialized_bytes counts the host bytes ever written.
//
// Resolving an address finds the allocation that holds the whole range and
// keeps that allocation alive (Resolved::owner) for as long as the caller
// holds it, so work that resolved its buffers before they were freed still
// has memory to touch.
//
// Thread-safe: the ranges change under one lock (as do the stale bytes
// Need::kContents zeroes); the bytes themselves move outside it, and the
// device's ordering of the work keeps operations on the same bytes apart.
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
#include "runtime/host_buffer.h"
#include "runtime/sim/zeroed_memory.h"

namespace weft::runtime {

// A set of byte offsets as disjoint ranges [begin, end), merged where they
// touch. Not thread-safe.
class SimRanges {
 public:
  // Adds [begin, end); returns how many of its bytes were not in the set.
  uint64_t Add(uint64_t begin, uint64_t end);
  // Removes [begin, end); returns how many of its bytes were in the set.
  uint64_t Remove(uint64_t begin, uint64_t end);
  // Calls `each(b, e)` for the parts of [begin, end) in the set, in order.
  void ForEach(uint64_t begin, uint64_t end,
               absl::FunctionRef<void(uint64_t, uint64_t)> each) const;
  // Calls `each(b, e)` for the parts of [begin, end) not in the set, in
  // order.
  void ForEachGap(uint64_t begin, uint64_t end,
                  absl::FunctionRef<void(uint64_t, uint64_t)> each) const;
  bool empty() const { return ranges_.empty(); }
  // Bytes in the set.
  uint64_t bytes() const { return bytes_; }
  // The ranges, by begin: end.
  const std::map<uint64_t, uint64_t>& ranges() const { return ranges_; }

 private:
  std::map<uint64_t, uint64_t> ranges_;
  uint64_t bytes_ = 0;
};

class SimMemory {
 private:
  struct Allocation;

 public:
  // Whether resolving gives memory contents.
  enum class Need { kAddress, kContents };

  // A resolved address: host memory kept alive by `owner`; null `data`
  // for an allocation without host memory yet (it reads as zeros). Only
  // the data ranges of `data` hold the memory's bytes (see the header
  // comment), except after Need::kContents, which makes the whole range
  // real.
  struct Resolved {
    std::shared_ptr<const void> owner;
    char* data = nullptr;
    // SimMemory's own: the allocation `owner` keeps and the offset in it.
    Allocation* allocation = nullptr;
    uint64_t offset = 0;
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

  // The memory at [ptr, ptr + bytes); with kContents, its host bytes are
  // made real first (stale ones zeroed) and the whole range holds data from
  // then on, for a kernel to read and write (RESOURCE_EXHAUSTED when the
  // host has no memory for it). INVALID_ARGUMENT when the range is not
  // inside one allocation.
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

  // Whether [ptr, ptr + bytes), resp. every buffer argument of `args`, lies
  // inside one allocation: OK, or Resolve's error. For enqueueing calls,
  // which only check: a thread remembers the allocations it found last,
  // and while no allocation has been freed since (addresses are never
  // reused), a range inside one of them is answered without the lock.
  absl::Status CheckRange(DevicePtr ptr, uint64_t bytes) const
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CheckArgs(absl::Span<const KernelArg> args) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // The operations on contents. Each checks its ranges as Resolve does.
  //
  // Copies [src, src + bytes) to host memory `out`: the data ranges' bytes,
  // zeros elsewhere.
  absl::Status Read(DevicePtr src, uint64_t bytes, void* out) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same into `out`, which stores the bytes up to the end of the last
  // data range and leaves the zeros after it implicit (no host memory).
  absl::Status ReadInto(DevicePtr src, uint64_t bytes, HostBuffer* out) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the first `src_bytes` of host memory `src` at `dst`, then zeros
  // up to `bytes` (src_bytes <= bytes). Only the data up to its last
  // nonzero byte becomes a data range; the rest is cleared.
  absl::Status Write(DevicePtr dst, const void* src, uint64_t src_bytes,
                     uint64_t bytes) const ABSL_LOCKS_EXCLUDED(mu_);
  // Copies [src, src + bytes) to `dst` (the ranges may overlap): moves the
  // source's data ranges and clears the rest of the destination.
  absl::Status Copy(DevicePtr dst, DevicePtr src, uint64_t bytes) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The `bytes` at `resolved` read as zeros from now on, with no host
  // work. Through the allocation `resolved` keeps, so that it clears
  // nothing else even when that was freed meanwhile.
  void Clear(const Resolved& resolved, uint64_t bytes) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Bytes allocated on `device`; 0 for a device out of range.
  uint64_t used_bytes(int device) const ABSL_LOCKS_EXCLUDED(mu_);
  // Host bytes written with contents of `device`'s memory: the bytes of
  // every range that ever held data, cleared since or not, as their host
  // pages stay with the allocation (allocations without data hold none;
  // freed ones count until the work using them has let go). Pages are
  // taken whole, so the host memory behind it rounds up to pages.
  uint64_t materialized_bytes(int device) const;

 private:
  // Fields other than `address` and `size` change under mu_ only.
  struct Allocation {
    ~Allocation();
    uint64_t address = 0;
    uint64_t size = 0;
    // The host bytes, zero-filled when first needed (Materialize); null
    // while the memory reads as zeros. Set once; the bytes themselves are
    // the work's.
    ZeroedBytes data;
    // Offsets that hold data: everything else reads as zeros.
    SimRanges valid;
    // Offsets whose host bytes were ever written (a superset of `valid`):
    // elsewhere they are still the zeros they were given.
    SimRanges written;
    // The device's count of materialised bytes (written.bytes()).
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

  // `bytes` at `src` resolved, with the ranges holding data among them
  // appended to `parts` (from `src`, ascending, disjoint).
  absl::StatusOr<Resolved> ResolveData(
      DevicePtr src, uint64_t bytes,
      std::vector<std::pair<uint64_t, uint64_t>>* parts) const
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<Resolved> ResolveLocked(DevicePtr ptr, uint64_t bytes,
                                         Need need) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives `allocation` of `device` its (zeroed) host bytes, once.
  absl::Status Materialize(int device, Allocation& allocation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes [begin, end) of `allocation` real (stale bytes zeroed) and holding
  // data.
  absl::Status MakeContents(int device, Allocation& allocation, uint64_t begin,
                            uint64_t end) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // [begin, end) of `allocation` holds data; its host bytes are about to be
  // written. REQUIRES: materialised.
  void MarkData(Allocation& allocation, uint64_t begin, uint64_t end) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckDevice(int device) const;

  // Constant after construction.
  const uint64_t id_;  // unique in the process, for the threads' memories
  const std::vector<std::string> names_;
  const uint64_t capacity_;
  std::unique_ptr<Counter[]> materialized_;

  // Allocations freed so far: what CheckRange's remembered answers hold
  // for. Written under mu_; read without it.
  alignas(64) std::atomic<uint64_t> frees_{0};

  mutable absl::Mutex mu_;
  std::vector<Device> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_MEMORY_H_
