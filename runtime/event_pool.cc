#include "runtime/event_pool.h"

#include <utility>

namespace weft::runtime {

EventPool::EventPool(Backend* backend, int device)
    : backend_(backend), device_(device) {}

EventPool::~EventPool() {
  std::deque<uint64_t> free;
  {
    absl::MutexLock lock(&mu_);
    free.swap(free_);
  }
  for (uint64_t handle : free) {
    backend_->DestroyEvent(EventHandle{handle}).IgnoreError();
  }
}

absl::StatusOr<EventHandle> EventPool::Acquire() {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      const uint64_t handle = free_.back();
      free_.pop_back();
      ++in_use_;
      return EventHandle{handle};
    }
  }
  absl::StatusOr<EventHandle> created = backend_->CreateEvent(device_);
  if (created.ok()) {
    absl::MutexLock lock(&mu_);
    ++in_use_;
  }
  return created;
}

void EventPool::Release(EventHandle event) {
  if (event.value == 0) return;
  absl::MutexLock lock(&mu_);
  free_.push_back(event.value);
  --in_use_;
}

void EventPool::Release(absl::Span<const EventHandle> events) {
  absl::MutexLock lock(&mu_);
  for (const EventHandle event : events) {
    if (event.value == 0) continue;
    free_.push_back(event.value);
    --in_use_;
  }
}

int EventPool::in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

int EventPool::total() const {
  absl::MutexLock lock(&mu_);
  return in_use_ + static_cast<int>(free_.size());
}

}  // namespace weft::runtime
