#include "server/job_watch.h"

#include <algorithm>
#include <utility>

#include "server/job_record.h"

namespace weft::server {

JobWatch::JobWatch(std::shared_ptr<JobRecord> job) : job_(std::move(job)) {
  absl::MutexLock lock(&job_->mu);
  ++job_->watchers;
}

JobWatch::~JobWatch() {
  ClearListener();
  absl::MutexLock lock(&job_->mu);
  --job_->watchers;
  job_->MaybeDropEvents();
}

void JobWatch::SetListener(std::function<void()> on_change) {
  absl::MutexLock lock(&job_->mu);
  if (!listener_) job_->listeners.push_back(&listener_);
  listener_ = std::move(on_change);
}

std::optional<JobInfo> JobWatch::SetTerminalListener(
    std::function<void(const JobInfo&)> on_terminal) {
  JobRecord* const job = job_.get();
  absl::MutexLock lock(&job->mu);
  if (IsTerminal(job->state)) return job->Snapshot();
  if (!listener_) job->listeners.push_back(&listener_);
  listener_ = [job, on_terminal = std::move(on_terminal),
               told = false]() mutable {
    job->mu.AssertHeld();
    if (told || !IsTerminal(job->state)) return;
    told = true;
    on_terminal(job->Snapshot());
  };
  return std::nullopt;
}

void JobWatch::ClearListener() {
  absl::MutexLock lock(&job_->mu);
  if (!listener_) return;
  std::vector<const std::function<void()>*>& all = job_->listeners;
  all.erase(std::find(all.begin(), all.end(), &listener_));
  listener_ = nullptr;
}

JobInfo JobWatch::Job() const {
  absl::MutexLock lock(&job_->mu);
  return job_->Snapshot();
}

WatchUpdate JobWatch::Next(absl::Time deadline, int max_events) {
  WatchUpdate update;
  JobRecord& job = *job_;
  absl::MutexLock lock(&job.mu);
  if (first_) {
    first_ = false;
    seen_version_ = job.version;
    update.job = job.Snapshot();
    update.changed = true;
    update.done = IsTerminal(job.state) && next_event_ >= job.events.end();
    return update;
  }
  auto ready = [this, &job]() {
    job.mu.AssertHeld();
    return job.version > seen_version_ || next_event_ < job.events.end();
  };
  job.mu.AwaitWithDeadline(absl::Condition(&ready), deadline);
  update.job = job.Snapshot();
  if (!ready()) {
    update.done = IsTerminal(job.state) && next_event_ >= job.events.end();
    return update;
  }
  if (next_event_ < job.events.begin()) {
    update.events_dropped = job.events.begin() - next_event_;
    next_event_ = job.events.begin();
  }
  const int64_t end =
      std::min(job.events.end(), next_event_ + std::max(max_events, 1));
  for (int64_t i = next_event_; i < end; ++i) {
    update.events.push_back(job.events.at(i));
  }
  next_event_ = end;
  seen_version_ = job.version;
  update.changed = true;
  update.done = IsTerminal(job.state) && next_event_ >= job.events.end();
  return update;
}

}  // namespace weft::server
