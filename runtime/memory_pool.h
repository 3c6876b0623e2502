// A per-device caching allocator over Backend::Allocate/Free.
//
// Device allocation is slow and, on CUDA, synchronizing (cudaFree waits for
// the whole device), so jobs take their buffers from this pool instead of
// the backend. A block a job gives back stays cached on its device; a later
// request of the same size class is served from the cache without calling
// the backend. Once a job shape has run, further jobs of that shape do no
// backend allocation at all.
//
// Size classes (RoundSize):
//   - up to 1 MiB: a multiple of 512 bytes (at most 511 bytes wasted per
//     block; a zero-byte request takes 512 bytes);
//   - above 1 MiB: 8 classes per power of two, i.e. a multiple of 2^k / 8
//     where 2^k <= size < 2^(k+1) (at most 1/8 of the request wasted).
// Reuse: a request takes the smallest cached block that holds it and is at
// most its class size, or, for a large request (above 1 MiB), at most 1/8
// larger than its class; a small request never takes a larger class. Worst
// case a block is therefore 511 bytes larger than a small request, and at
// most (9/8)^2 ~ 1.27x a large request. Blocks are never split or merged: a
// block is one backend allocation, given back whole.
//
// Out of memory: when the backend answers RESOURCE_EXHAUSTED, the pool
// returns every cached block of the device to the backend and retries once;
// if the class size does not fit but the exact size might, it tries the
// exact size last (such a block is cached under its exact size). What still
// fails is RESOURCE_EXHAUSTED naming the
// device, the bytes requested and the bytes in use and cached, with the
// backend's reason.
//
// Cap: `max_cached_bytes` bounds the bytes kept cached; giving back a block
// beyond it returns the least recently cached blocks to the backend first
// (a block larger than the cap goes straight back). 0 disables caching;
// kUnlimited (the default) caches until the device runs out of memory.
//
// Safety of reuse: Free hands a block to the next Allocate at once, so the
// caller must give a block back only when no work that uses it is pending
// on any stream. The executor frees a job's blocks only after every stream
// the job used has drained its work (job.h); a block that cannot be proven
// idle goes back with FreeUncached instead.
//
// Thread-safe. Jobs allocate in the executor's turn; stats are
// read from metrics and ListDevices threads. Backend calls are made without
// holding the lock.
#ifndef WEFT_RUNTIME_MEMORY_POOL_H_
#define WEFT_RUNTIME_MEMORY_POOL_H_

#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/backend.h"

namespace weft::runtime {

// A snapshot of one pool's counters.
struct MemoryPoolStats {
  // Bytes of the blocks handed out and not given back (class sizes, i.e.
  // what the device really holds for the jobs).
  uint64_t in_use_bytes = 0;
  // Bytes of the free blocks kept for reuse.
  uint64_t cached_bytes = 0;
  // Successful Backend::Allocate and Backend::Free calls.
  uint64_t backend_allocations = 0;
  uint64_t backend_frees = 0;
  // Allocations served from the cache.
  uint64_t cache_hits = 0;
  // Times the cache was emptied to retry an allocation the backend refused.
  uint64_t oom_releases = 0;
  // Allocations that failed.
  uint64_t failures = 0;
  // Most bytes in use at once since the pool was made.
  uint64_t peak_in_use_bytes = 0;
  // Arenas (AllocateArena) handed out and not given back, and the bytes
  // their holders asked for (the planned arena sizes, before rounding).
  uint64_t arenas_in_use = 0;
  uint64_t arena_bytes = 0;
  // Successful AllocateArena calls.
  uint64_t arena_allocations = 0;
};

class MemoryPool {
 public:
  static constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();
  // Requests up to this size use the fine classes.
  static constexpr uint64_t kSmallLimit = uint64_t{1} << 20;
  static constexpr uint64_t kSmallGranularity = 512;

  struct Options {
    // Most bytes kept cached (see the header comment).
    uint64_t max_cached_bytes = kUnlimited;
  };

  // `backend` is not owned and must outlive the pool.
  MemoryPool(Backend* backend, int device, Options options);
  // Returns the cached blocks to the backend. Blocks still in use are not
  // touched (their holders free them through the backend, or they leak).
  ~MemoryPool();

  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  int device() const { return device_; }

  // The class size of a request of `bytes` (see the header comment).
  static uint64_t RoundSize(uint64_t bytes);

  // A block of at least `bytes` on the device, from the cache or the
  // backend. RESOURCE_EXHAUSTED as described above; other backend errors
  // (a lost device) are returned as they are.
  absl::StatusOr<DevicePtr> Allocate(uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // As Allocate, for a job's arena (one block its planned buffers lie in):
  // counted in stats() as an arena of `bytes` until it is given back.
  absl::StatusOr<DevicePtr> AllocateArena(uint64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Gives back a block from Allocate for reuse. REQUIRES: no pending work
  // uses it. INVALID_ARGUMENT for a pointer the pool did not hand out.
  absl::Status Free(DevicePtr ptr) ABSL_LOCKS_EXCLUDED(mu_);

  // Gives back a block from Allocate straight to the backend, never to be
  // reused, for when work using it may still be pending (the backend
  // defers or synchronizes as its Free does).
  absl::Status FreeUncached(DevicePtr ptr) ABSL_LOCKS_EXCLUDED(mu_);

  // Returns every cached block to the backend. Returns the bytes released.
  uint64_t ReleaseCached() ABSL_LOCKS_EXCLUDED(mu_);

  MemoryPoolStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The largest cached block a request of class size `block` may take.
  static uint64_t MaxFit(uint64_t block);

  // Counts a block handed out.
  void AddInUse(DevicePtr ptr, uint64_t size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `ptr` from the blocks in use; returns its size.
  absl::StatusOr<uint64_t> TakeInUse(DevicePtr ptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the least recently cached blocks to `out` until `incoming` more
  // bytes fit under the cap.
  void EvictFor(uint64_t incoming, std::vector<DevicePtr>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns `blocks` to the backend (outside the lock) and counts them.
  void FreeToBackend(const std::vector<DevicePtr>& blocks)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  Backend* const backend_;
  const int device_;
  const uint64_t max_cached_bytes_;

  mutable absl::Mutex mu_;
  // Cached blocks by (size, age); age grows with each block cached.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> cached_
      ABSL_GUARDED_BY(mu_);  // -> address
  // Cached blocks by age (least recently cached first), for the cap.
  std::map<uint64_t, uint64_t> by_age_ ABSL_GUARDED_BY(mu_);  // -> size
  uint64_t next_age_ ABSL_GUARDED_BY(mu_) = 0;
  // Blocks handed out: address -> size.
  absl::flat_hash_map<uint64_t, uint64_t> in_use_ ABSL_GUARDED_BY(mu_);
  // Arenas among them: address -> bytes asked for.
  absl::flat_hash_map<uint64_t, uint64_t> arenas_ ABSL_GUARDED_BY(mu_);
  MemoryPoolStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_MEMORY_POOL_H_
