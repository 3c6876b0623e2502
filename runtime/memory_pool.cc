#include "runtime/memory_pool.h"

#include <algorithm>
#include <utility>

#include "absl/numeric/bits.h"
#include "absl/strings/str_cat.h"

namespace weft::runtime {
namespace {

uint64_t RoundUp(uint64_t bytes, uint64_t granularity) {
  const uint64_t rest = bytes % granularity;
  if (rest == 0) return bytes;
  const uint64_t pad = granularity - rest;
  // Sizes this close to 2^64 cannot be allocated anyway; keep them exact.
  if (bytes > std::numeric_limits<uint64_t>::max() - pad) return bytes;
  return bytes + pad;
}

}  // namespace

MemoryPool::MemoryPool(Backend* backend, int device, Options options)
    : backend_(backend),
      device_(device),
      max_cached_bytes_(options.max_cached_bytes) {}

MemoryPool::~MemoryPool() { ReleaseCached(); }

uint64_t MemoryPool::RoundSize(uint64_t bytes) {
  if (bytes == 0) return kSmallGranularity;
  if (bytes <= kSmallLimit) return RoundUp(bytes, kSmallGranularity);
  const uint64_t power = absl::bit_floor(bytes);
  return RoundUp(bytes, power / 8);
}

uint64_t MemoryPool::MaxFit(uint64_t block) {
  if (block <= kSmallLimit) return block;
  const uint64_t slack = block / 8;
  if (block > std::numeric_limits<uint64_t>::max() - slack) {
    return std::numeric_limits<uint64_t>::max();
  }
  return block + slack;
}

absl::StatusOr<DevicePtr> MemoryPool::Allocate(uint64_t bytes) {
  const uint64_t block = RoundSize(bytes);
  {
    absl::MutexLock lock(&mu_);
    // Blocks of an exact size (see below) may lie between bytes and block.
    auto it = cached_.lower_bound({bytes, 0});
    if (it != cached_.end() && it->first.first <= MaxFit(block)) {
      const uint64_t size = it->first.first;
      const DevicePtr ptr{device_, it->second};
      by_age_.erase(it->first.second);
      cached_.erase(it);
      stats_.cached_bytes -= size;
      AddInUse(ptr, size);
      ++stats_.cache_hits;
      return ptr;
    }
  }
  uint64_t size = block;
  uint64_t released = 0;
  absl::StatusOr<DevicePtr> ptr = backend_->Allocate(device_, size);
  if (!ptr.ok() && absl::IsResourceExhausted(ptr.status())) {
    // Cached blocks may be what fills the device: give them back and retry.
    released = ReleaseCached();
    if (released > 0) {
      {
        absl::MutexLock lock(&mu_);
        ++stats_.oom_releases;
      }
      ptr = backend_->Allocate(device_, size);
    }
    if (!ptr.ok() && absl::IsResourceExhausted(ptr.status()) && bytes > 0 &&
        block > bytes) {
      // The rounding may be what does not fit.
      size = bytes;
      ptr = backend_->Allocate(device_, size);
    }
  }
  absl::MutexLock lock(&mu_);
  if (!ptr.ok()) {
    ++stats_.failures;
    if (!absl::IsResourceExhausted(ptr.status())) return ptr.status();
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", device_, " is out of memory: requested ", bytes,
        " bytes (a ", block, "-byte block) with ", stats_.in_use_bytes,
        " bytes in use by jobs and ", stats_.cached_bytes, " bytes cached (",
        released,
        " cached bytes released to retry): ", ptr.status().message()));
  }
  ++stats_.backend_allocations;
  AddInUse(*ptr, size);
  return *ptr;
}

absl::StatusOr<DevicePtr> MemoryPool::AllocateArena(uint64_t bytes) {
  absl::StatusOr<DevicePtr> ptr = Allocate(bytes);
  if (!ptr.ok()) return ptr.status();
  absl::MutexLock lock(&mu_);
  arenas_.emplace(ptr->address, bytes);
  ++stats_.arenas_in_use;
  stats_.arena_bytes += bytes;
  ++stats_.arena_allocations;
  return *ptr;
}

void MemoryPool::AddInUse(DevicePtr ptr, uint64_t size) {
  in_use_.emplace(ptr.address, size);
  stats_.in_use_bytes += size;
  stats_.peak_in_use_bytes =
      std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
}

absl::StatusOr<uint64_t> MemoryPool::TakeInUse(DevicePtr ptr) {
  auto it = in_use_.find(ptr.address);
  if (ptr.device != device_ || it == in_use_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("address ", ptr.address, " on device ", ptr.device,
                     " was not allocated by the pool of device ", device_));
  }
  const uint64_t size = it->second;
  in_use_.erase(it);
  stats_.in_use_bytes -= size;
  if (auto arena = arenas_.find(ptr.address); arena != arenas_.end()) {
    --stats_.arenas_in_use;
    stats_.arena_bytes -= arena->second;
    arenas_.erase(arena);
  }
  return size;
}

void MemoryPool::EvictFor(uint64_t incoming, std::vector<DevicePtr>* out) {
  while (!by_age_.empty() &&
         stats_.cached_bytes > max_cached_bytes_ - incoming) {
    auto oldest = by_age_.begin();
    const std::pair<uint64_t, uint64_t> key(oldest->second, oldest->first);
    auto it = cached_.find(key);
    out->push_back(DevicePtr{device_, it->second});
    stats_.cached_bytes -= key.first;
    cached_.erase(it);
    by_age_.erase(oldest);
  }
}

absl::Status MemoryPool::Free(DevicePtr ptr) {
  std::vector<DevicePtr> to_backend;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<uint64_t> size = TakeInUse(ptr);
    if (!size.ok()) return size.status();
    if (*size > max_cached_bytes_) {
      to_backend.push_back(ptr);
    } else {
      EvictFor(*size, &to_backend);
      const uint64_t age = next_age_++;
      cached_.emplace(std::make_pair(*size, age), ptr.address);
      by_age_.emplace(age, *size);
      stats_.cached_bytes += *size;
    }
  }
  FreeToBackend(to_backend);
  return absl::OkStatus();
}

absl::Status MemoryPool::FreeUncached(DevicePtr ptr) {
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<uint64_t> size = TakeInUse(ptr);
    if (!size.ok()) return size.status();
  }
  absl::Status status = backend_->Free(ptr);
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.backend_frees;
  }
  return status;
}

uint64_t MemoryPool::ReleaseCached() {
  std::vector<DevicePtr> blocks;
  uint64_t released = 0;
  {
    absl::MutexLock lock(&mu_);
    blocks.reserve(cached_.size());
    for (const auto& [key, address] : cached_) {
      blocks.push_back(DevicePtr{device_, address});
    }
    released = stats_.cached_bytes;
    cached_.clear();
    by_age_.clear();
    stats_.cached_bytes = 0;
  }
  FreeToBackend(blocks);
  return released;
}

void MemoryPool::FreeToBackend(const std::vector<DevicePtr>& blocks) {
  if (blocks.empty()) return;
  uint64_t freed = 0;
  for (const DevicePtr& block : blocks) {
    // A block the backend refuses to free (a lost device) is gone anyway.
    if (backend_->Free(block).ok()) ++freed;
  }
  absl::MutexLock lock(&mu_);
  stats_.backend_frees += freed;
}

MemoryPoolStats MemoryPool::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace weft::runtime
