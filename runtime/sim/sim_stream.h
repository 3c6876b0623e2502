// One simulated stream: a FIFO queue of work drained by its own thread.
//
// Items run strictly in enqueue order, one at a time. Each item gets a
// sequence number (1, 2, ...); `completed()` counts the items that have
// finished, so "item s has completed" is `completed() >= s`, which is what
// simulated events capture. Work items return a Status; the first error
// makes the stream failed: later work items are skipped (reported with that
// error, as a CUDA stream with a sticky error would) and every later host
// callback receives it. Sequence numbers still advance for skipped items,
// so nothing waiting on this stream hangs.
//
// Lifecycle: running -> stopped (Stop) -> joined (Shutdown). Stopping drops
// the items not yet started without running them (callbacks included) and
// wakes every waiter.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_SIM_SIM_STREAM_H_
#define WEFT_RUNTIME_SIM_SIM_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/backend.h"

namespace weft::runtime {

class SimStream {
 public:
  using Work = std::function<absl::Status()>;

  // Starts the worker thread. `name` labels error messages.
  explicit SimStream(std::string name);
  ~SimStream();  // Shutdown()

  SimStream(const SimStream&) = delete;
  SimStream& operator=(const SimStream&) = delete;

  const std::string& name() const { return name_; }

  // Appends an item and returns its sequence number. After Shutdown the item
  // is dropped and the returned number never completes.
  uint64_t Enqueue(Work work) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t EnqueueCallback(HostCallback callback) ABSL_LOCKS_EXCLUDED(mu_);

  // Sequence number of the last item enqueued (0 when none).
  uint64_t enqueued() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t completed() const ABSL_LOCKS_EXCLUDED(mu_);
  bool IsComplete(uint64_t seq) const ABSL_LOCKS_EXCLUDED(mu_);
  // True when every enqueued item has completed.
  bool Idle() const ABSL_LOCKS_EXCLUDED(mu_);
  // The stream's first error, or OK.
  absl::Status error() const ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until item `seq` has completed (true) or the stream is shut down
  // first (false).
  bool AwaitComplete(uint64_t seq) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until the items enqueued before the call have completed; returns
  // the stream's first error, or ABORTED when shut down first.
  absl::Status Synchronize() ABSL_LOCKS_EXCLUDED(mu_);

  // Keeps the calling work item busy for `d` of real time, precisely
  // (sleeps, then yields for the last stretch). Returns early on Shutdown.
  // For use by work items running on this stream.
  void Occupy(absl::Duration d) ABSL_LOCKS_EXCLUDED(mu_);

  // True on this stream's worker thread.
  bool OnWorkerThread() const;

  // Asks the worker to stop after the item it is running, drops pending
  // items and wakes every waiter. Does not wait. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // Stop(), then joins the worker. Idempotent. Must not run on the worker
  // thread.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_, join_mu_);

 private:
  struct Item {
    Work work;              // set for work items
    HostCallback callback;  // set for host callbacks
  };

  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const std::string name_;

  mutable absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Mirrors stop_ for the lock-free spin in Occupy.
  std::atomic<bool> stopping_{false};

  // Serializes Shutdown's join. The thread is started in the constructor
  // body, after every other member is initialized; worker_id_ is constant
  // from then on.
  absl::Mutex join_mu_;
  std::thread worker_ ABSL_GUARDED_BY(join_mu_);
  std::thread::id worker_id_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_STREAM_H_
