// CallWorkers: a fixed set of threads that run the service's long calls
// (planning a large graph at submission) so that gRPC's callback threads,
// which every call on the callback API shares, never wait on them.
//
// Work runs in the order it was handed over, on one of `threads` threads
// that live as long as the object; no thread is started per call. The
// destructor runs the work still queued, then joins the threads.
#ifndef WEFT_SERVER_CALL_WORKERS_H_
#define WEFT_SERVER_CALL_WORKERS_H_

#include <cstddef>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace weft::server {

class CallWorkers {
 public:
  // REQUIRES: threads > 0.
  explicit CallWorkers(int threads);
  ~CallWorkers();
  CallWorkers(const CallWorkers&) = delete;
  CallWorkers& operator=(const CallWorkers&) = delete;

  // Queues `work` to run on a worker thread.
  void Run(absl::AnyInvocable<void() &&> work) ABSL_LOCKS_EXCLUDED(mu_);

  // Work handed over and not yet started.
  size_t queued() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_CALL_WORKERS_H_
