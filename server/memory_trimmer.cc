#include "server/memory_trimmer.h"

#include "common/allocator.h"

namespace weft::server {

MemoryTrimmer::MemoryTrimmer(absl::Duration delay)
    : delay_(delay), thread_([this] { Run(); }) {}

MemoryTrimmer::~MemoryTrimmer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void MemoryTrimmer::Request() {
  absl::MutexLock lock(&mu_);
  requested_ = true;
}

int64_t MemoryTrimmer::trims() const {
  absl::MutexLock lock(&mu_);
  return trims_;
}

void MemoryTrimmer::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto asked = [this]() {
      mu_.AssertHeld();
      return requested_ || stopping_;
    };
    mu_.Await(absl::Condition(&asked));
    if (stopping_) return;
    // Let the call that asked finish and free what it holds.
    auto stopping = [this]() {
      mu_.AssertHeld();
      return stopping_;
    };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping), delay_)) return;
    requested_ = false;
    mu_.Unlock();
    ReleaseFreeMemory();
    mu_.Lock();
    ++trims_;
  }
}

}  // namespace weft::server
