#include "runtime/sim/sim_stream.h"

#include <algorithm>
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

SimStream::SimStream(std::string name, const SimClock* clock,
                     const SimDeviceHealth* health)
    : name_(std::move(name)), clock_(clock), health_(health) {
  absl::MutexLock lock(&join_mu_);
  worker_ = std::thread([this] { Loop(); });
  worker_id_ = worker_.get_id();
}

SimStream::~SimStream() { Shutdown(); }

uint64_t SimStream::Push(Item item) {
  absl::MutexLock lock(&mu_);
  if (!stop_) {
    item.scope = scope_;
    items_.push_back(std::move(item));
    if (hold_token_.load(std::memory_order_relaxed) == 0 ||
        items_.size() - released_ >= kMaxHeld) {
      released_ = items_.size();
    }
  }
  return ++enqueued_;
}

bool SimStream::Hold(uint64_t token) {
  if (hold_token_.load(std::memory_order_relaxed) == token) return false;
  absl::MutexLock lock(&mu_);
  hold_token_.store(token, std::memory_order_relaxed);
  return true;
}

void SimStream::Release() {
  absl::MutexLock lock(&mu_);
  hold_token_.store(0, std::memory_order_relaxed);
  released_ = items_.size();
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
  return absl::OkStatus();
}

void SimStream::SetScope(uint64_t scope) {
  absl::MutexLock lock(&mu_);
  scope_ = scope;
}

uint64_t SimStream::scope() const {
  absl::MutexLock lock(&mu_);
  return scope_;
}

void SimStream::AbortScope(uint64_t scope, absl::Status status) {
  absl::MutexLock lock(&mu_);
  scope_errors_.emplace(scope, std::move(status));
}

void SimStream::ForgetScope(uint64_t scope) {
  absl::MutexLock lock(&mu_);
  scope_errors_.erase(scope);
}

std::shared_ptr<SimStream::Mark> SimStream::Record() {
  auto mark = std::make_shared<Mark>();
  absl::MutexLock lock(&mu_);
  mark->seq = enqueued_;
  if (completed_ >= enqueued_) {
    mark->done = true;
    mark->time_us = std::max(last_end_us_, clock_->NowUs());
  } else {
    pending_marks_.push_back(mark);
  }
  return mark;
}

std::optional<double> SimStream::MarkTime(const Mark& mark) const {
  absl::MutexLock lock(&mu_);
  if (!mark.done) return std::nullopt;
  return mark.time_us;
}

uint64_t SimStream::enqueued() const {
  absl::MutexLock lock(&mu_);
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
  absl::MutexLock lock(&mu_);
  auto done = [this, seq]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return completed_ >= seq || stop_;
  };
  mu_.Await(absl::Condition(&done));
  return completed_ >= seq;
}

absl::Status SimStream::Synchronize() {
  absl::MutexLock lock(&mu_);
  const uint64_t target = enqueued_;
  auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return completed_ >= target || stop_;
  };
  mu_.Await(absl::Condition(&done));
  if (completed_ < target) {
    return absl::AbortedError(
        absl::StrCat(name_, " was shut down before its work completed"));
  }
  return ScopeError(scope_);
}

void SimStream::PaceUntil(double us) {
  if (!clock_->paced()) return;
  const absl::Time deadline = clock_->RealTimeOf(us);
  if (absl::Now() >= deadline) return;
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(&stop_), deadline);
}

bool SimStream::OnWorkerThread() const {
  return std::this_thread::get_id() == worker_id_;
}

void SimStream::Stop() {
  std::vector<Item> dropped;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    dropped.swap(items_);
    head_ = 0;
    released_ = 0;
  }
  // `dropped` is destroyed here, outside mu_: its closures may hold the
  // last reference to another stream, whose destructor joins a thread.
}

void SimStream::Shutdown() {
  Stop();
  absl::MutexLock lock(&join_mu_);
  if (worker_.joinable()) worker_.join();
}

absl::Status SimStream::Run(Item& item, const absl::Status& scope_error,
                            double ready, double& end) {
  end = ready;
  if (Work* work = std::get_if<Work>(&item.what)) {
    if (!scope_error.ok()) return scope_error;
    if (health_ != nullptr && health_->lost()) return health_->error();
    Timing timing{ready, ready};
    absl::Status status = (*work)(timing);
    end = std::max(ready, timing.end_us);
    return status;
  }
  if (HostCallback* callback = std::get_if<HostCallback>(&item.what)) {
    (*callback)(scope_error);
    return absl::OkStatus();
  }
  if (WaitFor* wait = std::get_if<WaitFor>(&item.what)) {
    if (wait->target.get() == this) return absl::OkStatus();
    if (!wait->target->AwaitComplete(wait->mark->seq)) {
      return absl::AbortedError(absl::StrCat(
          wait->target->name(), " stopped before the awaited work"));
    }
    std::optional<double> time = wait->target->MarkTime(*wait->mark);
    if (time.has_value()) end = std::max(ready, *time);
    // What this scope waited for failed: its dependents fail too.
    return wait->target->scope_error(item.scope);
  }
  Gate* gate = std::get<std::shared_ptr<Gate>>(item.what).get();
  absl::Status status;
  double busy = 0;
  {
    absl::MutexLock lock(&mu_);
    auto opened = [this, gate]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return gate->open || stop_;
    };
    mu_.Await(absl::Condition(&opened));
    if (!gate->open) {
      return absl::AbortedError(
          absl::StrCat(name_, " stopped before its gate opened"));
    }
    status = gate->status;
    busy = gate->busy_us;
  }
  // The host work started when the stream reached the gate; on a paced
  // clock it ended no earlier than now.
  end = std::max(ready + busy, clock_->NowUs());
  if (!scope_error.ok()) return scope_error;
  return status;
}

void SimStream::Loop() {
  while (true) {
    absl::Status status;
    uint64_t scope = 0;
    double end = 0;
    {
      Item item;
      absl::Status scope_error;
      double ready = 0;
      {
        absl::MutexLock lock(&mu_);
        auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return head_ < released_ || stop_;
        };
        mu_.Await(absl::Condition(&has_work));
        if (stop_) return;
        item = std::move(items_[head_++]);
        if (head_ == items_.size()) {
          items_.clear();  // keeps its capacity
          head_ = 0;
          released_ = 0;
        } else if (head_ >= 1024 && head_ * 2 >= items_.size()) {
          items_.erase(items_.begin(), items_.begin() + head_);
          released_ -= head_;
          head_ = 0;
        }
        scope_error = ScopeError(item.scope);
        ready = last_end_us_;
      }
      if (clock_->paced()) ready = std::max(ready, clock_->NowUs());
      status = Run(item, scope_error, ready, end);
      scope = item.scope;
      // The item is destroyed here, before it completes, so whatever it
      // captured is released by the time a waiter observes completion.
    }
    PaceUntil(end);
    absl::MutexLock lock(&mu_);
    if (!status.ok()) scope_errors_.emplace(scope, std::move(status));
    last_end_us_ = std::max(last_end_us_, end);
    ++completed_;
    while (!pending_marks_.empty() &&
           pending_marks_.front()->seq <= completed_) {
      pending_marks_.front()->done = true;
      pending_marks_.front()->time_us = last_end_us_;
      pending_marks_.pop_front();
    }
  }
}

}  // namespace weft::runtime
