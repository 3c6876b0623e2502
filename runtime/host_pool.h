// A small pool of host threads for work that must not run on the
// executor's scheduling thread or on a device stream: host-engine nodes.
//
// Tasks run in submission order as threads free up (FIFO start, not FIFO
// completion). With zero threads, Submit runs the task on the caller's
// thread before returning, which keeps single-threaded setups and tests
// simple. Destruction runs every task already submitted, then joins.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_HOST_POOL_H_
#define WEFT_RUNTIME_HOST_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace weft::runtime {

class HostPool {
 public:
  // REQUIRES: threads >= 0.
  explicit HostPool(int threads);
  ~HostPool() ABSL_LOCKS_EXCLUDED(mu_);

  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()); }

  // Runs `task` on a pool thread (or inline with zero threads). Tasks
  // submitted after destruction began are not accepted (dropped).
  void Submit(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

  // Tasks submitted and not yet finished.
  int pending() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;

  // Started in the constructor, joined in the destructor.
  std::vector<std::thread> workers_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_HOST_POOL_H_
