#include "runtime/host_pool.h"

#include <algorithm>
#include <utility>

namespace weft::runtime {

HostPool::HostPool(int threads) {
  const int n = std::max(0, threads);
  workers_.reserve(n);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { Loop(); });
}

HostPool::~HostPool() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

void HostPool::Submit(std::function<void()> task) {
  if (workers_.empty()) {
    {
      absl::MutexLock lock(&mu_);
      if (closing_) return;
      ++running_;
    }
    task();
    absl::MutexLock lock(&mu_);
    --running_;
    return;
  }
  absl::MutexLock lock(&mu_);
  if (closing_) return;
  tasks_.push_back(std::move(task));
}

int HostPool::pending() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(tasks_.size()) + running_;
}

void HostPool::Loop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !tasks_.empty() || closing_;
      };
      mu_.Await(absl::Condition(&ready));
      // Closing drains what was submitted before it.
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++running_;
    }
    task();
    task = nullptr;  // release captures before counting the task done
    absl::MutexLock lock(&mu_);
    --running_;
  }
}

}  // namespace weft::runtime
