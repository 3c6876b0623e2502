#include "runtime/sim/sim_stream.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace weft::runtime {

absl::Status SimDeviceHealth::error() const {
  absl::MutexLock lock(&mu_);
  return error_;
}

void SimDeviceHealth::Lose(absl::Status error) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return;
  error_ = std::move(error);
  lost_.store(true, std::memory_order_release);
}

namespace {

// The stream a worker runs now.
thread_local const SimStream* tls_running_stream = nullptr;

// Tells the calling thread's pool, if it is a worker, that it is about to
// block.
void BeforeBlocking() {
  if (SimWorkerPool* pool = SimWorkerPool::Current()) pool->WorkerMayBlock();
}

}  // namespace

void SimStream::Waker::Wake() {
  absl::MutexLock lock(&mu_);
  if (stream_ == nullptr) return;
  absl::MutexLock stream_lock(&stream_->mu_);
  stream_->WakeLocked();
}

SimStream::SimStream(std::string name, const SimClock* clock,
                     const SimDeviceHealth* health, SimWorkerPool* pool)
    : name_(std::move(name)),
      clock_(clock),
      health_(health),
      own_pool_(pool == nullptr ? std::make_unique<SimWorkerPool>(1) : nullptr),
      pool_(pool == nullptr ? own_pool_.get() : pool),
      waker_(new Waker(this)) {
  // Room for a short issue batch from the start: the vectors swap their
  // buffers as items move from held to queued, keeping both capacities.
  held_.reserve(kInitialItems);
  items_.reserve(kInitialItems);
}

SimStream::~SimStream() { Shutdown(); }

void SimStream::MaybeScheduleLocked() {
  if (state_ == State::kIdle && !stop_ && head_ < items_.size()) {
    state_ = State::kRunnable;
    pool_->Schedule(this);
  }
}

void SimStream::WakeLocked() {
  if (stop_) return;
  if (state_ == State::kParked) {
    state_ = State::kRunnable;
    pool_->Schedule(this);
  } else if (state_ == State::kRunning) {
    woken_ = true;
  }
}

uint64_t SimStream::Push(Item item) {
  // `item`, when dropped, is destroyed by the caller, outside the locks.
  if (clock_->paced()) item.enqueued_us = clock_->NowUs();
  absl::MutexLock push_lock(&push_mu_);
  const uint64_t seq = ++enqueued_;
  if (push_stopped_) return seq;
  item.scope = scope_;
  if (hold_token_.load(std::memory_order_relaxed) != 0 &&
      held_.size() + 1 < kMaxHeld) {
    held_.push_back(std::move(item));
    return seq;
  }
  // Not holding, or a long run: everything held so far, then this.
  held_.push_back(std::move(item));
  absl::MutexLock lock(&mu_);
  ReleaseHeldLocked();
  return seq;
}

void SimStream::ReleaseHeldLocked() {
  if (held_.empty() || stop_) return;
  // Their sequence numbers follow those of the marks pending already.
  for (std::shared_ptr<Mark>& mark : held_marks_) {
    pending_marks_.push_back(std::move(mark));
  }
  held_marks_.clear();
  if (head_ == items_.size()) {
    // The common case: the workers took everything; swap, keeping both
    // buffers' capacity.
    items_.clear();
    head_ = 0;
    items_.swap(held_);
  } else {
    items_.insert(items_.end(), std::make_move_iterator(held_.begin()),
                  std::make_move_iterator(held_.end()));
    held_.clear();
  }
  MaybeScheduleLocked();
}

bool SimStream::Hold(uint64_t token) {
  if (hold_token_.load(std::memory_order_relaxed) == token) return false;
  absl::MutexLock push_lock(&push_mu_);
  hold_token_.store(token, std::memory_order_relaxed);
  return true;
}

void SimStream::Release() {
  absl::MutexLock push_lock(&push_mu_);
  hold_token_.store(0, std::memory_order_relaxed);
  if (held_.empty()) return;
  absl::MutexLock lock(&mu_);
  ReleaseHeldLocked();
}

uint64_t SimStream::Enqueue(Work work) {
  return Push(Item{0, std::move(work)});
}

uint64_t SimStream::EnqueueCallback(HostCallback callback) {
  return Push(Item{0, std::move(callback)});
}

uint64_t SimStream::EnqueueWait(std::shared_ptr<SimStream> target,
                                std::shared_ptr<const Mark> mark) {
  return Push(Item{0, WaitFor{std::move(target), std::move(mark)}});
}

uint64_t SimStream::EnqueueGate(std::shared_ptr<Gate> gate) {
  return Push(Item{0, std::move(gate)});
}

absl::Status SimStream::OpenGate(Gate& gate, absl::Status status,
                                 double busy_us) {
  absl::MutexLock lock(&mu_);
  if (gate.open) {
    return absl::FailedPreconditionError(
        absl::StrCat("a gate on ", name_, " was opened twice"));
  }
  gate.open = true;
  gate.status = std::move(status);
  gate.busy_us = std::max(0.0, busy_us);
  gate.opened_us = clock_->NowUs();
  WakeLocked();
  return absl::OkStatus();
}

void SimStream::SetScope(uint64_t scope) {
  absl::MutexLock push_lock(&push_mu_);
  scope_ = scope;
}

uint64_t SimStream::scope() const {
  absl::MutexLock push_lock(&push_mu_);
  return scope_;
}

void SimStream::AbortScope(uint64_t scope, absl::Status status,
                           bool interrupt) {
  InterruptHook hook;
  double at = 0;
  {
    absl::MutexLock lock(&mu_);
    scope_errors_.emplace(scope, std::move(status));
    if (!interrupt) return;
    interrupted_scopes_.insert(scope);
    if (!pacing_.has_value() || pacing_->scope != scope) return;
    // The item has run and waits for its real-time end: it ends now. The
    // worker that completes it (at once: its timer fires now) finds the
    // new end.
    at = clock_->NowUs();
    if (pacing_->end_us <= at) return;  // ends anyway
    pacing_->end_us = at;
    hook = std::move(pacing_->interrupt);
    pool_->ScheduleNow(this);
  }
  if (hook) hook(at);
}

void SimStream::ForgetScope(uint64_t scope) {
  absl::MutexLock lock(&mu_);
  scope_errors_.erase(scope);
  interrupted_scopes_.erase(scope);
}

std::shared_ptr<SimStream::Mark> SimStream::Record() {
  auto mark = std::make_shared<Mark>();
  // Held items count: they run, in order, before anything enqueued later.
  absl::MutexLock push_lock(&push_mu_);
  mark->seq_ = enqueued_;
  if (!held_.empty()) {
    // Not done before the held items run: it waits with them, without
    // taking the workers' lock.
    held_marks_.push_back(mark);
    return mark;
  }
  absl::MutexLock lock(&mu_);
  if (completed_ >= enqueued_) {
    mark->Complete(std::max(last_end_us_, clock_->NowUs()));
  } else {
    pending_marks_.push_back(mark);
  }
  return mark;
}

std::optional<double> SimStream::MarkTime(const Mark& mark) const {
  return mark.TimeUs();
}

uint64_t SimStream::enqueued() const {
  absl::MutexLock push_lock(&push_mu_);
  return enqueued_;
}

uint64_t SimStream::completed() const {
  absl::MutexLock lock(&mu_);
  return completed_;
}

bool SimStream::IsComplete(uint64_t seq) const {
  absl::MutexLock lock(&mu_);
  return completed_ >= seq;
}

bool SimStream::Idle() const {
  absl::MutexLock push_lock(&push_mu_);
  absl::MutexLock lock(&mu_);
  return completed_ == enqueued_;
}

absl::Status SimStream::ScopeError(uint64_t scope) const {
  if (health_ != nullptr && health_->lost()) return health_->error();
  if (scope_errors_.empty()) return absl::OkStatus();
  auto it = scope_errors_.find(scope);
  return it == scope_errors_.end() ? absl::OkStatus() : it->second;
}

absl::Status SimStream::error() const {
  absl::MutexLock push_lock(&push_mu_);
  absl::MutexLock lock(&mu_);
  return ScopeError(scope_);
}

absl::Status SimStream::scope_error(uint64_t scope) const {
  absl::MutexLock lock(&mu_);
  return ScopeError(scope);
}

double SimStream::last_end_us() const {
  absl::MutexLock lock(&mu_);
  return last_end_us_;
}

bool SimStream::AwaitComplete(uint64_t seq) {
  {
    absl::MutexLock lock(&mu_);
    if (completed_ >= seq || stop_) return completed_ >= seq;
  }
  BeforeBlocking();
  absl::MutexLock lock(&mu_);
  auto done = [this, seq]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return completed_ >= seq || stop_;
  };
  mu_.Await(absl::Condition(&done));
  return completed_ >= seq;
}

absl::Status SimStream::Synchronize() {
  uint64_t target = 0;
  bool must_wait = false;
  {
    absl::MutexLock push_lock(&push_mu_);
    target = enqueued_;
    absl::MutexLock lock(&mu_);
    must_wait = completed_ < target && !stop_;
  }
  if (must_wait) BeforeBlocking();
  {
    absl::MutexLock lock(&mu_);
    auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return completed_ >= target || stop_;
    };
    mu_.Await(absl::Condition(&done));
    if (completed_ < target) {
      return absl::AbortedError(
          absl::StrCat(name_, " was shut down before its work completed"));
    }
  }
  return error();
}

SimStream::Outcome SimStream::AwaitOrRegister(
    uint64_t seq, const std::shared_ptr<Waker>& waker, bool& completed) {
  absl::MutexLock lock(&mu_);
  completed = completed_ >= seq;
  if (completed || stop_) return Outcome::kDone;
  waiters_.emplace(seq, waker);
  return Outcome::kParked;
}

bool SimStream::OnWorkerThread() const { return tls_running_stream == this; }

void SimStream::WakeAll(WakeList& wake) {
  for (const std::shared_ptr<Waker>& waker : wake) waker->Wake();
  wake.clear();
}

void SimStream::Stop() {
  std::vector<Item> dropped;
  std::vector<Item> held;
  std::optional<Item> parked;
  WakeList wake;
  {
    absl::MutexLock push_lock(&push_mu_);
    push_stopped_ = true;
    held.swap(held_);
    held_marks_.clear();  // never complete, as the marks pending below
    absl::MutexLock lock(&mu_);
    if (!stop_) {
      stop_ = true;
      dropped.swap(items_);
      head_ = 0;
      parked.swap(parked_);
      // The item waiting for its deadline ran: it completes now.
      if (pacing_.has_value()) {
        CompleteLocked(std::move(*pacing_), wake);
        pacing_.reset();
      }
      if (state_ == State::kRunnable || state_ == State::kPacing) {
        pool_->Unschedule(this);  // a worker that took it sees stop_
      }
      if (state_ != State::kRunning) state_ = State::kIdle;
      for (auto& [seq, waker] : waiters_) wake.push_back(std::move(waker));
      waiters_.clear();
    }
  }
  WakeAll(wake);
  // `dropped`, `held` and `parked` are destroyed here, outside the locks:
  // their closures may hold the last reference to another stream, whose
  // destructor waits for a worker.
}

void SimStream::Shutdown() {
  absl::MutexLock shutdown_lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  Stop();
  pool_->WaitUntilNotRunning(this);
  {
    absl::MutexLock lock(&waker_->mu_);
    waker_->stream_ = nullptr;
  }
  // A pool of its own has no other stream: its threads go with it.
  own_pool_.reset();
}

void SimStream::CompleteLocked(Done done, WakeList& wake) {
  if (!done.status.ok()) {
    scope_errors_.emplace(done.scope, std::move(done.status));
  }
  last_end_us_ = std::max(last_end_us_, done.end_us);
  ++completed_;
  while (!pending_marks_.empty() &&
         pending_marks_.front()->seq_ <= completed_) {
    pending_marks_.front()->Complete(last_end_us_);
    pending_marks_.pop_front();
  }
  while (!waiters_.empty() && waiters_.begin()->first <= completed_) {
    wake.push_back(std::move(waiters_.begin()->second));
    waiters_.erase(waiters_.begin());
  }
}

SimStream::Outcome SimStream::Run(Item& item, const absl::Status& scope_error,
                                  double ready, double& end,
                                  absl::Status& status,
                                  InterruptHook& interrupt) {
  end = ready;
  if (Work* work = std::get_if<Work>(&item.what)) {
    if (!scope_error.ok()) {
      status = scope_error;
      return Outcome::kDone;
    }
    if (health_ != nullptr && health_->lost()) {
      status = health_->error();
      return Outcome::kDone;
    }
    Timing timing(ready, &waker_, this, item.scope);
    status = (*work)(timing);
    if (timing.parked()) return Outcome::kParked;
    end = std::max(ready, timing.end_us);
    interrupt = timing.TakeInterruptHook();
    return Outcome::kDone;
  }
  if (HostCallback* callback = std::get_if<HostCallback>(&item.what)) {
    (*callback)(scope_error);
    return Outcome::kDone;
  }
  if (WaitFor* wait = std::get_if<WaitFor>(&item.what)) {
    if (wait->target.get() == this) return Outcome::kDone;
    bool completed = false;
    if (wait->target->AwaitOrRegister(wait->mark->seq(), waker_, completed) ==
        Outcome::kParked) {
      return Outcome::kParked;
    }
    if (!completed) {
      status = absl::AbortedError(absl::StrCat(
          wait->target->name(), " stopped before the awaited work"));
      return Outcome::kDone;
    }
    std::optional<double> time = wait->target->MarkTime(*wait->mark);
    if (time.has_value()) end = std::max(ready, *time);
    // What this scope waited for failed: its dependents fail too.
    status = wait->target->scope_error(item.scope);
    return Outcome::kDone;
  }
  Gate* gate = std::get<std::shared_ptr<Gate>>(item.what).get();
  double busy = 0;
  double opened = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!gate->open) {
      if (!stop_) return Outcome::kParked;  // OpenGate wakes the stream
      status = absl::AbortedError(
          absl::StrCat(name_, " stopped before its gate opened"));
      return Outcome::kDone;
    }
    status = gate->status;
    busy = gate->busy_us;
    opened = gate->opened_us;
  }
  // The host work started when the stream reached the gate; on a paced
  // clock it ended no earlier than the host opened the gate (0 unpaced).
  end = std::max(ready + busy, opened);
  if (!scope_error.ok()) status = scope_error;
  return Outcome::kDone;
}

void SimStream::RunSlice() {
  tls_running_stream = this;
  WakeList wake;
  std::optional<Done> done;
  int budget = kSliceItems;
  while (true) {
    std::optional<Item> item;
    absl::Status scope_error;
    double ready = 0;
    bool resumed = false;
    {
      absl::MutexLock lock(&mu_);
      if (done.has_value()) {
        CompleteLocked(std::move(*done), wake);
        done.reset();
      }
      if (pacing_.has_value()) {  // its deadline has passed
        CompleteLocked(std::move(*pacing_), wake);
        pacing_.reset();
      }
      if (stop_ || (!parked_.has_value() && head_ == items_.size())) {
        state_ = State::kIdle;
        break;
      }
      if (budget-- == 0) {
        state_ = State::kRunnable;
        pool_->Schedule(this);
        break;
      }
      state_ = State::kRunning;
      if (parked_.has_value()) {
        item.swap(parked_);
        ready = parked_ready_us_;
        resumed = true;
      } else {
        ready = last_end_us_;
        item.emplace(std::move(items_[head_++]));
        if (head_ == items_.size()) {
          items_.clear();  // keeps its capacity
          head_ = 0;
        } else if (head_ >= 1024 && head_ * 2 >= items_.size()) {
          items_.erase(items_.begin(), items_.begin() + head_);
          head_ = 0;
        }
      }
      scope_error = ScopeError(item->scope);
    }
    if (!wake.empty()) WakeAll(wake);
    // Paced, nothing starts before the host enqueued it; but not "now":
    // host time spent on earlier items (or waiting for a worker) is not
    // device time. A resumed item keeps the ready time it first had: a
    // gate's host work and a wait count from then, not from the wake.
    if (!resumed) ready = std::max(ready, item->enqueued_us);
    double end = 0;
    absl::Status status;
    InterruptHook interrupt;
    if (Run(*item, scope_error, ready, end, status, interrupt) ==
        Outcome::kParked) {
      absl::MutexLock lock(&mu_);
      if (stop_) {
        state_ = State::kIdle;
        break;  // the item is dropped with `item`, outside mu_
      }
      parked_.swap(item);
      parked_ready_us_ = ready;
      if (woken_) {  // what it waits for may have come meanwhile
        woken_ = false;
        continue;
      }
      state_ = State::kParked;
      break;
    }
    const uint64_t scope = item->scope;
    // The item is destroyed here, before it completes, so whatever it
    // captured is released by the time a waiter observes completion.
    item.reset();
    pool_->CountProgress();
    if (clock_->paced()) {
      const absl::Time deadline = clock_->RealTimeOf(end);
      if (absl::Now() < deadline) {
        bool interrupted = false;
        {
          absl::MutexLock lock(&mu_);
          interrupted = interrupted_scopes_.contains(scope);
          if (!stop_ && !interrupted) {
            pacing_ = Done{std::move(status), scope, end, std::move(interrupt)};
            state_ = State::kPacing;
            pool_->ScheduleAt(this, deadline);
            break;
          }
        }
        if (interrupted) {
          // Aborted while it ran: it stops instead of pacing.
          const double at = std::max(ready, clock_->NowUs());
          if (at < end) {
            end = at;
            if (interrupt) interrupt(at);
          }
        }
      }
    }
    done = Done{std::move(status), scope, end};
  }
  tls_running_stream = nullptr;
  WakeAll(wake);
}

}  // namespace weft::runtime
