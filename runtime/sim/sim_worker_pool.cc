#include "runtime/sim/sim_worker_pool.h"

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <iterator>

#include "absl/time/clock.h"

namespace weft::runtime {
namespace {

// The pool whose worker the calling thread is.
thread_local SimWorkerPool* tls_pool = nullptr;

}  // namespace

SimWorkerPool::SimWorkerPool(int threads, absl::Duration stall_timeout,
                             absl::Duration spin)
    : stall_timeout_(stall_timeout), spin_(spin) {
  absl::MutexLock lock(&mu_);
  timer_lead_ = spin_ / 2;
  for (int i = 0; i < std::max(1, threads); ++i) StartWorkerLocked();
  monitor_ = std::thread([this] { MonitorLoop(); });
}

SimWorkerPool::~SimWorkerPool() {
  std::vector<std::thread> workers;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    queued_.fetch_add(1, std::memory_order_release);
    work_cv_.SignalAll();
    monitor_cv_.SignalAll();
    workers.swap(workers_);
  }
  // Workers never start threads, so the list is complete.
  for (std::thread& worker : workers) worker.join();
  monitor_.join();
}

int SimWorkerPool::threads() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(workers_.size());
}

uint64_t SimWorkerPool::spins() const {
  absl::MutexLock lock(&mu_);
  return spins_;
}

absl::Duration SimWorkerPool::timer_lead() const {
  absl::MutexLock lock(&mu_);
  return timer_lead_;
}

SimWorkerPool* SimWorkerPool::Current() { return tls_pool; }

void SimWorkerPool::StartWorkerLocked() {
  if (stop_ || static_cast<int>(workers_.size()) >= kMaxThreads) return;
  const int index = static_cast<int>(running_.size());
  running_.push_back(nullptr);
  ++idle_;  // until it looks for work: no one starts another meanwhile
  workers_.emplace_back([this, index] { WorkerLoop(index); });
}

void SimWorkerPool::Schedule(SimRunnable* stream) {
  absl::MutexLock lock(&mu_);
  ready_.push_back(stream);
  WakeForQueuedLocked();
}

void SimWorkerPool::WakeForQueuedLocked() {
  queued_.fetch_add(1, std::memory_order_release);
  if (ready_.size() <= static_cast<size_t>(spinning_)) {
    // A spinning worker takes it, and looks at the queue again (under the
    // lock) before it sleeps.
    return;
  }
  if (idle_ > 0) {
    // An idle worker takes it; the monitor is needed only once streams
    // wait with no worker idle (WorkerLoop wakes it then).
    work_cv_.Signal();
  } else {
    WakeMonitorLocked();
  }
}

void SimWorkerPool::WakeMonitorLocked() {
  if (monitor_sleeping_) {
    monitor_sleeping_ = false;
    monitor_cv_.Signal();
  }
}

void SimWorkerPool::ScheduleAt(SimRunnable* stream, absl::Time at) {
  absl::MutexLock lock(&mu_);
  const bool earliest = timers_.empty() || at < timers_.begin()->first;
  timers_.emplace(at, stream);
  // An idle worker may sleep (or spin) past the new deadline: let it look
  // again.
  if (earliest && spinning_ > 0) {
    queued_.fetch_add(1, std::memory_order_release);
  } else if (earliest && idle_ > 0) {
    work_cv_.Signal();
  }
}

void SimWorkerPool::Unschedule(SimRunnable* stream) {
  absl::MutexLock lock(&mu_);
  ready_.erase(std::remove(ready_.begin(), ready_.end(), stream), ready_.end());
  for (auto it = timers_.begin(); it != timers_.end();) {
    it = it->second == stream ? timers_.erase(it) : std::next(it);
  }
}

void SimWorkerPool::ScheduleNow(SimRunnable* stream) {
  absl::MutexLock lock(&mu_);
  for (auto it = timers_.begin(); it != timers_.end(); ++it) {
    if (it->second != stream) continue;
    timers_.erase(it);
    ready_.push_back(stream);
    WakeForQueuedLocked();
    return;
  }
}

void SimWorkerPool::WaitUntilNotRunning(const SimRunnable* stream) {
  absl::MutexLock lock(&mu_);
  auto running = [this, stream]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::find(running_.begin(), running_.end(), stream) !=
           running_.end();
  };
  if (!running()) return;
  // A worker of this pool waiting for another: see WorkerMayBlock.
  if (tls_pool == this && idle_ == 0) StartWorkerLocked();
  ++running_waiters_;
  while (running()) running_cv_.Wait(&mu_);
  --running_waiters_;
}

void SimWorkerPool::WorkerMayBlock() {
  absl::MutexLock lock(&mu_);
  if (idle_ == 0) StartWorkerLocked();
}

void SimWorkerPool::PromoteTimersLocked(absl::Time now) {
  bool promoted = false;
  while (!timers_.empty() && timers_.begin()->first <= now) {
    ready_.push_back(timers_.begin()->second);
    timers_.erase(timers_.begin());
    queued_.fetch_add(1, std::memory_order_release);
    // As Schedule: an idle worker may sleep with no deadline.
    if (promoted && idle_ > 0) work_cv_.Signal();
    promoted = true;
  }
  if (promoted) WakeMonitorLocked();
}

bool SimWorkerPool::Spin(uint64_t seen, absl::Time until) {
  for (int polls = 0;; ++polls) {
    if (queued_.load(std::memory_order_acquire) != seen) return true;
    // The clock every few polls: a poll costs far less than reading it.
    if ((polls & 15) == 15 && absl::Now() >= until) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }
}

void SimWorkerPool::WorkerLoop(int index) {
  tls_pool = this;
#if defined(__linux__)
  // Paced deadlines are kept to the microsecond: without this the kernel
  // may wake a timed wait up to 50 us late (the default timer slack).
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
  mu_.Lock();
  --idle_;
  bool spun = false;  // since this worker last ran a stream
  // When this worker ran out of work; InfinitePast while it has some.
  absl::Time idle_since = absl::InfinitePast();
  while (!stop_) {
    if (!timers_.empty()) PromoteTimersLocked(absl::Now());
    if (ready_.empty() && idle_since == absl::InfinitePast()) {
      idle_since = absl::Now();
    }
    // Spinning pays only while work comes back within the spin: when it
    // keeps coming later, the core is worth more to other threads.
    if (ready_.empty() && !spun && spinning_ == 0 &&
        spin_ > absl::ZeroDuration() && recent_gap_ <= spin_) {
      // Poll a while before sleeping, never past a paced deadline.
      absl::Time until = absl::Now() + spin_;
      if (!timers_.empty()) until = std::min(until, timers_.begin()->first);
      ++spinning_;
      ++spins_;
      // What has been queued so far, read under the lock: a stream queued
      // once it is released finds spinning_ set and does not wake anyone,
      // so the spin must see it as new.
      const uint64_t seen = queued_.load(std::memory_order_acquire);
      mu_.Unlock();
      Spin(seen, until);
      mu_.Lock();
      --spinning_;
      spun = true;
      continue;
    }
    if (ready_.empty()) {
      if (timers_.empty()) {
        ++idle_;
        work_cv_.Wait(&mu_);
        --idle_;
        continue;
      }
      const absl::Time due = timers_.begin()->first;
      if (spinning_ == 0 && due - absl::Now() <= timer_lead_) {
        // Closer to the deadline than a sleep would wake: poll until it.
        ++spinning_;
        const uint64_t seen = queued_.load(std::memory_order_acquire);
        mu_.Unlock();
        Spin(seen, due);
        mu_.Lock();
        --spinning_;
        continue;
      }
      // Wake early by the lateness seen so far (one poller at a time).
      const absl::Time wake = spinning_ == 0 ? due - timer_lead_ : due;
      ++idle_;
      const bool timed_out = work_cv_.WaitWithDeadline(&mu_, wake);
      --idle_;
      if (timed_out && spin_ > absl::ZeroDuration()) {
        const absl::Duration late =
            std::clamp(absl::Now() - wake, absl::ZeroDuration(), spin_);
        timer_lead_ += (late - timer_lead_) / 4;
      }
      continue;
    }
    if (idle_since != absl::InfinitePast()) {
      // A moving average over about the last eight idle gaps, each
      // counted up to four spins (longer ones all mean "do not spin").
      const absl::Duration gap = std::min(absl::Now() - idle_since, 4 * spin_);
      recent_gap_ += (gap - recent_gap_) / 8;
      idle_since = absl::InfinitePast();
    }
    SimRunnable* stream = ready_.front();
    ready_.pop_front();
    // Streams left waiting with every worker busy: stalls need watching.
    if (!ready_.empty() && idle_ == 0) WakeMonitorLocked();
    running_[index] = stream;
    spun = false;
    mu_.Unlock();
    stream->RunSlice();
    mu_.Lock();
    running_[index] = nullptr;
    if (running_waiters_ > 0) running_cv_.SignalAll();
  }
  mu_.Unlock();
}

bool SimWorkerPool::StalledLocked() const {
  // A stream whose paced deadline has passed waits to run as much as a
  // queued one: only a worker moves it to the queue.
  return !stop_ && idle_ == 0 &&
         (!ready_.empty() ||
          (!timers_.empty() && timers_.begin()->first <= absl::Now()));
}

void SimWorkerPool::MonitorLoop() {
  absl::MutexLock lock(&mu_);
  while (!stop_) {
    if (stall_timeout_ == absl::InfiniteDuration() ||
        (ready_.empty() && idle_ == static_cast<int>(workers_.size()))) {
      // Nothing runs (or stalls are not watched): sleep until streams
      // wait with no worker idle to take them.
      monitor_sleeping_ = true;
      monitor_cv_.Wait(&mu_);
      monitor_sleeping_ = false;
      continue;
    }
    // Busy: look every stall_timeout_, without being signalled.
    const bool stalled = StalledLocked();
    const uint64_t before = progress_.load(std::memory_order_relaxed);
    monitor_cv_.WaitWithTimeout(&mu_, stall_timeout_);
    // Streams waited from before to after the timeout and no item
    // completed: every worker is blocked in host code. One more lets the
    // queue move.
    if (stalled && StalledLocked() &&
        progress_.load(std::memory_order_relaxed) == before) {
      StartWorkerLocked();
    }
  }
}

}  // namespace weft::runtime
