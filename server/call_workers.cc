#include "server/call_workers.h"

#include <pthread.h>

#include <utility>

namespace weft::server {

CallWorkers::CallWorkers(int threads) {
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "weft-calls");
      Loop();
    });
  }
}

CallWorkers::~CallWorkers() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void CallWorkers::Run(absl::AnyInvocable<void() &&> work) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(work));
}

size_t CallWorkers::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

void CallWorkers::Loop() {
  while (true) {
    absl::AnyInvocable<void() &&> work;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this] {
        mu_.AssertHeld();
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, nothing left
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(work)();
  }
}

}  // namespace weft::server
