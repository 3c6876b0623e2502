#include "server/watch_reactor.h"

#include <utility>

#include "absl/time/time.h"
#include "server/job_info.h"
#include "server/job_proto.h"
#include "server/stream_reactors.h"

namespace weft::server {

WatchWaker::WatchWaker() : thread_([this] { Run(); }) {}

WatchWaker::~WatchWaker() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void WatchWaker::Post(std::function<void()> resume) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(resume));
}

void WatchWaker::Run() {
  while (true) {
    std::deque<std::function<void()>> batch;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this] {
        mu_.AssertHeld();
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping
      batch.swap(queue_);
    }
    for (std::function<void()>& resume : batch) resume();
  }
}

WatchReactor::WatchReactor(std::unique_ptr<JobWatch> watch, WatchWaker* waker,
                           std::atomic<int>* watchers)
    : watch_(std::move(watch)), waker_(waker), watchers_(watchers) {
  watch_->SetListener([this] { Wake(); });
  Resume();
}

void WatchReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(ClientGone());
    return;
  }
  Resume();
}

void WatchReactor::OnCancel() {
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (busy_) return;  // the holder finishes
    busy_ = true;
  }
  Finish(ClientGone());
}

void WatchReactor::OnDone() {
  watch_.reset();  // no Wake runs after this
  watchers_->fetch_sub(1, std::memory_order_relaxed);
  delete this;
}

void WatchReactor::Wake() {
  {
    absl::MutexLock lock(&mu_);
    if (busy_) {
      woken_ = true;  // the holder looks again before letting go
      return;
    }
    busy_ = true;
  }
  waker_->Post([this] { Resume(); });
}

void WatchReactor::Resume() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) break;
      woken_ = false;
    }
    WatchUpdate update = watch_->Next(absl::InfinitePast());
    if (update.changed) {
      message_.Clear();
      *message_.mutable_job() = JobToProto(update.job);
      for (const NodeEventInfo& event : update.events) {
        *message_.add_node_events() = NodeEventToProto(event);
      }
      message_.set_events_dropped(update.events_dropped);
      if (update.done) {
        StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
      } else {
        StartWrite(&message_);
      }
      return;
    }
    if (update.done) {
      Finish(grpc::Status::OK);
      return;
    }
    absl::MutexLock lock(&mu_);
    if (!woken_ && !cancelled_) {
      busy_ = false;
      return;
    }
  }
  Finish(ClientGone());
}

}  // namespace weft::server
