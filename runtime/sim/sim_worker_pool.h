// The threads that run the simulated backend's streams.
//
// A simulated stream (SimStream) owns no thread: when it has items to run
// it is scheduled on a SimWorkerPool, whose workers run a slice of its
// items at a time (SimRunnable::RunSlice), so any number of streams share
// a few threads, and a stream parked until a real time (a paced clock)
// waits on the pool's timers, not on a thread.
#ifndef WEFT_RUNTIME_SIM_SIM_WORKER_POOL_H_
#define WEFT_RUNTIME_SIM_SIM_WORKER_POOL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace weft::runtime {

// What a SimWorkerPool runs: a simulated stream.
class SimRunnable {
 public:
  virtual ~SimRunnable() = default;
  // Runs a slice of the stream's items, on a worker of the pool it was
  // scheduled on.
  virtual void RunSlice() = 0;
};

// The threads that run simulated streams. A worker takes a runnable stream
// off the queue (in the order they became runnable) and runs a slice of its
// items; streams parked on a paced clock's deadline come back when it
// passes (the idle workers sleep until the earliest one or new work).
//
// The pool starts `threads` workers and adds more only when the ones it has
// are stuck in host code while streams wait to run: at once when a worker
// blocks in a SimStream call (Synchronize, AwaitComplete, Shutdown of
// another stream), and after a stall (no item completed for the stall
// timeout while runnable streams waited) when a worker blocks anywhere
// else (streams whose paced deadline has passed count as waiting). A stall
// is judged by the clock, so a host too busy to run the workers may get one
// more than it needs. So a pool never deadlocks on work that only another
// queued stream can finish; it stays at its size while its items do not
// block. Added workers stay until the pool is destroyed; there are at most
// kMaxThreads.
//
// A worker that runs out of work may first poll for more for a short
// `spin` (one worker at a time), as a GPU's front end polls its queues:
// work scheduled meanwhile is taken without waking a sleeping thread, so
// the thread that issues it pays no wake-up. Workers spin only while work
// has been coming back within a spin (a moving average of the pool's idle
// gaps): when it comes later, as from many independent clients, a spin
// would only take a core from the threads that issue the work. The spin
// ends early at a paced deadline.
//
// A sleep until a paced deadline wakes late by the host's timer latency
// (tens of microseconds on some virtual machines, a few on bare metal),
// and each such delay would end a simulated kernel late. So, with a spin
// set, an idle worker sleeps until the deadline less the lateness its
// timed sleeps have shown (a moving average, at most the spin), and polls
// from there (one worker at a time).
//
// Thread-safe.
class SimWorkerPool {
 public:
  static constexpr int kMaxThreads = 1024;
  static constexpr absl::Duration kDefaultStallTimeout = absl::Milliseconds(10);

  // Starts max(1, threads) workers and a monitor thread. An infinite
  // `stall_timeout` adds no workers on stalls (only in WorkerMayBlock).
  // `spin` (zero: none) is how long an idle worker polls before sleeping.
  explicit SimWorkerPool(int threads,
                         absl::Duration stall_timeout = kDefaultStallTimeout,
                         absl::Duration spin = absl::ZeroDuration());
  // Joins every thread. REQUIRES: every stream on the pool is shut down.
  ~SimWorkerPool() ABSL_LOCKS_EXCLUDED(mu_);

  SimWorkerPool(const SimWorkerPool&) = delete;
  SimWorkerPool& operator=(const SimWorkerPool&) = delete;

  // Workers started so far.
  int threads() const ABSL_LOCKS_EXCLUDED(mu_);
  // Spins begun so far (all workers).
  uint64_t spins() const ABSL_LOCKS_EXCLUDED(mu_);
  // How long before a paced deadline an idle worker wakes to poll for it:
  // half the spin at first, then how late timed sleeps have woken (zero
  // without a spin).
  absl::Duration timer_lead() const ABSL_LOCKS_EXCLUDED(mu_);

  // The interface of the streams (which call these with their own lock
  // held: a stream's lock comes before the pool's).
  // Queues `stream` to run now, or at real time `at`.
  void Schedule(SimRunnable* stream) ABSL_LOCKS_EXCLUDED(mu_);
  void ScheduleAt(SimRunnable* stream, absl::Time at) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes `stream` off the queue and the timers, if it is there.
  void Unschedule(SimRunnable* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Moves `stream` from the timers to the queue, if it waits there.
  void ScheduleNow(SimRunnable* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until no worker runs `stream`, or took it to run (on a worker,
  // after WorkerMayBlock's step).
  void WaitUntilNotRunning(const SimRunnable* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Called on a worker of this pool about to block on other streams'
  // progress: adds a worker at once if none is idle.
  void WorkerMayBlock() ABSL_LOCKS_EXCLUDED(mu_);
  // The pool whose worker is the calling thread, or null.
  static SimWorkerPool* Current();
  // One item of a stream completed: the monitor's sign of progress.
  void CountProgress() { progress_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void StartWorkerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the monitor if it sleeps.
  void WakeMonitorLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WorkerLoop(int index) ABSL_LOCKS_EXCLUDED(mu_);
  void MonitorLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the streams whose time has come from the timers to the queue.
  void PromoteTimersLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool StalledLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A stream joined the queue: wakes an idle worker unless a spinning one
  // will take it, or the monitor when none is idle.
  void WakeForQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Polls until `until` for streams queued after the count `seen` (read
  // under the lock before it was released); true if one came.
  bool Spin(uint64_t seen, absl::Time until) ABSL_LOCKS_EXCLUDED(mu_);

  const absl::Duration stall_timeout_;
  const absl::Duration spin_;

  mutable absl::Mutex mu_;
  absl::CondVar work_cv_;     // idle workers wait on it
  absl::CondVar monitor_cv_;  // the monitor's untimed sleep
  absl::CondVar running_cv_;  // WaitUntilNotRunning
  std::deque<SimRunnable*> ready_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, SimRunnable*>> timers_ ABSL_GUARDED_BY(mu_);
  // What each worker runs (or took to run), null when none.
  std::vector<const SimRunnable*> running_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  int running_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  int spinning_ ABSL_GUARDED_BY(mu_) = 0;  // workers polling (at most one)
  uint64_t spins_ ABSL_GUARDED_BY(mu_) = 0;
  // Moving average of how long workers waited for work.
  absl::Duration recent_gap_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  // How late timed sleeps wake (a moving average, at most spin_): how long
  // before a paced deadline an idle worker wakes to poll for it.
  absl::Duration timer_lead_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  bool monitor_sleeping_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Items completed by the pool's streams: the monitor's sign of progress.
  // Counted by the workers for every item, on a cache line of its own.
  alignas(64) std::atomic<uint64_t> progress_{0};
  // Streams queued so far (and the pool's stop): what a spinning worker
  // polls, on a cache line of its own.
  alignas(64) std::atomic<uint64_t> queued_{0};
  std::thread monitor_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_WORKER_POOL_H_
