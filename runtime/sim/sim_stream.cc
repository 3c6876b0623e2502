#include "runtime/sim/sim_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace weft::runtime {
namespace {

// Sleeping is coarse (the kernel adds tens of microseconds); the last
// stretch of an Occupy is spent yielding instead.
constexpr absl::Duration kYieldSpan = absl::Microseconds(200);

}  // namespace

SimStream::SimStream(std::string name) : name_(std::move(name)) {
  absl::MutexLock lock(&join_mu_);
  worker_ = std::thread([this] { Loop(); });
  worker_id_ = worker_.get_id();
}

SimStream::~SimStream() { Shutdown(); }

uint64_t SimStream::Enqueue(Work work) {
  absl::MutexLock lock(&mu_);
  if (!stop_) queue_.push_back(Item{std::move(work), nullptr});
  return ++enqueued_;
}

uint64_t SimStream::EnqueueCallback(HostCallback callback) {
  absl::MutexLock lock(&mu_);
  if (!stop_) queue_.push_back(Item{nullptr, std::move(callback)});
  return ++enqueued_;
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

absl::Status SimStream::error() const {
  absl::MutexLock lock(&mu_);
  return error_;
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
  return error_;
}

void SimStream::Occupy(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return;
  const absl::Time deadline = absl::Now() + d;
  if (d > kYieldSpan) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(&stop_), deadline - kYieldSpan);
  }
  while (absl::Now() < deadline &&
         !stopping_.load(std::memory_order_relaxed)) {
    std::this_thread::yield();
  }
}

bool SimStream::OnWorkerThread() const {
  return std::this_thread::get_id() == worker_id_;
}

void SimStream::Stop() {
  std::deque<Item> dropped;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    stopping_.store(true, std::memory_order_relaxed);
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

void SimStream::Loop() {
  while (true) {
    Item item;
    absl::Status first_error;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stop_;
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      first_error = error_;
    }
    absl::Status status;
    if (item.callback) {
      item.callback(first_error);
    } else if (first_error.ok()) {
      status = item.work();
    }
    // Destroy the item's closure before completing it, so whatever it
    // captured is released by the time a waiter observes completion.
    item = Item();
    absl::MutexLock lock(&mu_);
    if (!status.ok() && error_.ok()) error_ = std::move(status);
    ++completed_;
  }
}

}  // namespace weft::runtime
