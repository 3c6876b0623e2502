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
    queue_.push_back(std::move(item));
  }
  return ++enqueued_;
}

uint64_t SimStream::Enqueue(Work work) {
  Item item;
  item.kind = Kind::kWork;
  item.work = std::move(work);
  return Push(std::move(item));
}

uint64_t SimStream::EnqueueCallback(HostCallback callback) {
  Item item;
  item.kind = Kind::kCallback;
  item.callback = std::move(callback);
  return Push(std::move(item));
}

uint64_t SimStream::EnqueueWait(std::shared_ptr<SimStream> target,
                                std::shared_ptr<const Mark> mark) {
  Item item;
  item.kind = Kind::kWait;
  item.target = std::move(target);
  item.mark = std::move(mark);
  return Push(std::move(item));
}

uint64_t SimStream::EnqueueGate(std::shared_ptr<Gate> gate) {
  Item item;
  item.kind = Kind::kGate;
  item.gate = std::move(gate);
  return Push(std::move(item));
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
  std::deque<Item> dropped;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    dropped.swap(queue_);
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
  switch (item.kind) {
    case Kind::kWork: {
      if (!scope_error.ok()) return scope_error;
      if (health_ != nullptr && health_->lost()) return health_->error();
      Timing timing{ready, ready};
      absl::Status status = item.work(timing);
      end = std::max(ready, timing.end_us);
      return status;
    }
    case Kind::kCallback:
      item.callback(scope_error);
      return absl::OkStatus();
    case Kind::kWait: {
      if (item.target.get() == this) return absl::OkStatus();
      if (!item.target->AwaitComplete(item.mark->seq)) {
        return absl::AbortedError(absl::StrCat(
            item.target->name(), " stopped before the awaited work"));
      }
      std::optional<double> time = item.target->MarkTime(*item.mark);
      if (time.has_value()) end = std::max(ready, *time);
      // What this scope waited for failed: its dependents fail too.
      return item.target->scope_error(item.scope);
    }
    case Kind::kGate: {
      absl::Status status;
      double busy = 0;
      {
        absl::MutexLock lock(&mu_);
        Gate* gate = item.gate.get();
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
  }
  return absl::OkStatus();
}

void SimStream::Loop() {
  while (true) {
    Item item;
    absl::Status scope_error;
    double ready = 0;
    {
      absl::MutexLock lock(&mu_);
      auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stop_;
      };
      mu_.Await(absl::Condition(&has_work));
      if (stop_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      scope_error = ScopeError(item.scope);
      ready = last_end_us_;
    }
    if (clock_->paced()) ready = std::max(ready, clock_->NowUs());
    double end = ready;
    absl::Status status = Run(item, scope_error, ready, end);
    PaceUntil(end);
    const uint64_t scope = item.scope;
    // Destroy the item's closure before completing it, so whatever it
    // captured is released by the time a waiter observes completion.
    item = Item();
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
