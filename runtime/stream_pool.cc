#include "runtime/stream_pool.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

StreamPool::StreamPool(Backend* backend, int device, int max_streams)
    : backend_(backend),
      device_(device),
      max_streams_(std::max(1, max_streams)) {}

StreamPool::~StreamPool() {
  std::vector<uint64_t> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [handle, entry] : entries_) all.push_back(handle);
    entries_.clear();
    order_.clear();
    free_.clear();
  }
  for (uint64_t handle : all) {
    backend_->DestroyStream(StreamHandle{handle}).IgnoreError();
  }
}

absl::StatusOr<StreamHandle> StreamPool::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      const uint64_t handle = free_.front();
      free_.pop_front();
      entries_[handle].holders = 1;
      ++busy_;
      return StreamHandle{handle};
    }
    const int alive = static_cast<int>(order_.size()) + creating_;
    if (alive >= max_streams_ && !order_.empty()) {
      // At the cap: share the least-held healthy stream not fenced off.
      uint64_t best = 0;
      int best_holders = std::numeric_limits<int>::max();
      for (uint64_t handle : order_) {
        const Entry& entry = entries_[handle];
        if (entry.fences == 0 && entry.holders < best_holders) {
          best = handle;
          best_holders = entry.holders;
        }
      }
      if (best == 0) {
        return absl::UnavailableError(absl::StrCat(
            "device ", device_, ": all ", order_.size(),
            " streams are fenced off until the device finishes the work of "
            "cancelled jobs"));
      }
      ++entries_[best].holders;
      return StreamHandle{best};
    }
    ++creating_;
  }
  return CreateCounted();
}

absl::StatusOr<std::optional<StreamHandle>> StreamPool::AcquireUnshared() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      const uint64_t handle = free_.front();
      free_.pop_front();
      entries_[handle].holders = 1;
      ++busy_;
      return std::optional<StreamHandle>(StreamHandle{handle});
    }
    if (static_cast<int>(order_.size()) + creating_ >= max_streams_) {
      return std::optional<StreamHandle>();
    }
    ++creating_;
  }
  WEFT_ASSIGN_OR_RETURN(StreamHandle created, CreateCounted());
  return std::optional<StreamHandle>(created);
}

absl::StatusOr<StreamHandle> StreamPool::CreateCounted() {
  absl::StatusOr<StreamHandle> created = backend_->CreateStream(device_);
  absl::MutexLock lock(&mu_);
  --creating_;
  if (!created.ok()) return created.status();
  entries_[created->value] = Entry{1, true};
  order_.push_back(created->value);
  ++busy_;
  return created;
}

void StreamPool::Release(StreamHandle stream, bool healthy) {
  bool destroy = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(stream.value);
    if (it == entries_.end() || it->second.holders == 0) return;
    Entry& entry = it->second;
    if (!healthy && entry.healthy) {
      entry.healthy = false;
      order_.erase(std::find(order_.begin(), order_.end(), stream.value));
    }
    if (--entry.holders > 0) return;
    --busy_;
    if (entry.fences > 0) {  // no holder is left to unfence it
      entry.fences = 0;
      --fenced_;
    }
    if (entry.healthy) {
      free_.push_back(stream.value);
    } else {
      entries_.erase(it);
      destroy = true;
    }
  }
  if (destroy) backend_->DestroyStream(stream).IgnoreError();
}

void StreamPool::Fence(StreamHandle stream) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(stream.value);
  if (it == entries_.end() || it->second.holders == 0) return;
  if (it->second.fences++ == 0) ++fenced_;
}

void StreamPool::Unfence(StreamHandle stream) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(stream.value);
  if (it == entries_.end() || it->second.fences == 0) return;
  if (--it->second.fences == 0) --fenced_;
}

int StreamPool::fenced() const {
  absl::MutexLock lock(&mu_);
  return fenced_;
}

int StreamPool::busy() const {
  absl::MutexLock lock(&mu_);
  return busy_;
}

int StreamPool::total() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(entries_.size());
}

}  // namespace weft::runtime
