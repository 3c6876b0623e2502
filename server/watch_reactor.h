// The WatchJob stream: a WatchReactor per call, woken by its job and
// resumed on the service's WatchWaker thread.
//
// A watch is woken by its job (JobWatch::SetListener) and by its client
// going away or its deadline (OnCancel), never by a timer; everything that
// happened while a write was outstanding goes out in the next message. Job
// changes are announced under the job's lock, where the watch cannot read
// the job, so a woken watch reads the job and starts its write on the
// waker's thread.
#ifndef WEFT_SERVER_WATCH_REACTOR_H_
#define WEFT_SERVER_WATCH_REACTOR_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/server_callback.h"
#include "server/job_watch.h"
#include "weft/v1/weft.pb.h"

namespace weft::server {

// Resumes woken watches, and answers CancelJob calls whose job drained, on
// a thread of its own, in the order they were woken. Thread-safe.
class WatchWaker {
 public:
  WatchWaker();
  // Runs what is queued, then stops the thread.
  ~WatchWaker();

  WatchWaker(const WatchWaker&) = delete;
  WatchWaker& operator=(const WatchWaker&) = delete;

  // Runs `resume` soon on the waker's thread. Never blocks on it.
  void Post(std::function<void()> resume) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest exists
};

// One WatchJob call: the job, then its events and state changes, until the
// job is terminal or the client goes away. Deletes itself when gRPC is done
// with it, giving its watcher slot back.
//
// `busy_` is the right to read the watch and to write. The constructor holds
// it first; an outstanding write keeps it until OnWriteDone, which resumes
// with it; a wake or a cancellation that finds it free takes it. So at most
// one write is ever outstanding, and Finish is called once, by the holder,
// which then keeps it for good (no more wakes are queued, and OnDone cannot
// meet a queued Resume).
class WatchReactor final
    : public grpc::ServerWriteReactor<weft::v1::WatchJobResponse> {
 public:
  // `waker` and `watchers` outlive the call; the caller counted this call in
  // `watchers`.
  WatchReactor(std::unique_ptr<JobWatch> watch, WatchWaker* waker,
               std::atomic<int>* watchers);

  void OnWriteDone(bool ok) override;
  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_);
  void OnDone() override;

 private:
  // The job changed. Runs under the job's lock (JobWatch::SetListener).
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);

  // Writes what is new, finishes, or lets go of `busy_` when there is
  // nothing to write. REQUIRES: the caller holds `busy_`. Touches nothing of
  // this object after starting a write or finishing.
  void Resume() ABSL_LOCKS_EXCLUDED(mu_);

  std::unique_ptr<JobWatch> watch_;  // used by the holder of busy_
  WatchWaker* const waker_;
  std::atomic<int>* const watchers_;
  weft::v1::WatchJobResponse message_;  // the write outstanding

  absl::Mutex mu_;
  bool busy_ ABSL_GUARDED_BY(mu_) = true;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_WATCH_REACTOR_H_
