#include "server/job_retention.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace weft::server {

void JobRetention::Add(std::shared_ptr<JobRecord> job, absl::Time end,
                       int64_t output_bytes, int64_t trace_bytes) {
  output_bytes_ += output_bytes;
  trace_bytes_ += trace_bytes;
  holding_.push_back(job);
  if (trace_bytes > 0) tracing_.push_back(job);
  finished_.emplace_back(end, std::move(job));
  ReleaseOverBytes();
}

std::vector<std::shared_ptr<JobRecord>> JobRetention::Expire(absl::Time now) {
  std::vector<std::shared_ptr<JobRecord>> expired;
  while (!finished_.empty() &&
         (static_cast<int64_t>(finished_.size()) > options_.max_jobs ||
          finished_.front().first + options_.max_age <= now)) {
    std::shared_ptr<JobRecord> job = std::move(finished_.front().second);
    finished_.pop_front();
    {
      absl::MutexLock lock(&job->mu);
      job->trace.reset();
      trace_bytes_ -= job->trace_bytes;
      job->trace_bytes = 0;
      output_bytes_ -= job->output_bytes;
      job->output_bytes = 0;
      job->outputs.clear();
    }
    expired.push_back(std::move(job));
  }
  return expired;
}

void JobRetention::ReleaseOverBytes() {
  while (output_bytes_ > options_.max_output_bytes && !holding_.empty()) {
    std::shared_ptr<JobRecord> job = holding_.front().lock();
    holding_.pop_front();
    if (job == nullptr) continue;  // expired, bytes already returned
    absl::MutexLock lock(&job->mu);
    if (job->output_bytes == 0) continue;
    output_bytes_ -= job->output_bytes;
    job->output_bytes = 0;
    job->outputs.clear();
    job->outputs_released = absl::StrCat(
        "its outputs were released to keep the outputs of finished jobs "
        "within ",
        options_.max_output_bytes, " bytes (weftd --retain_output_bytes)");
  }
  while (trace_bytes_ > options_.max_trace_bytes && !tracing_.empty()) {
    std::shared_ptr<JobRecord> job = tracing_.front().lock();
    tracing_.pop_front();
    if (job == nullptr) continue;  // expired, bytes already returned
    absl::MutexLock lock(&job->mu);
    if (job->trace_bytes == 0) continue;
    trace_bytes_ -= job->trace_bytes;
    job->trace_bytes = 0;
    job->trace.reset();
    job->trace_released = absl::StrCat(
        "its trace was released to keep the traces of finished jobs within ",
        options_.max_trace_bytes, " bytes (weftd --retain_trace_bytes)");
  }
}

absl::Duration JobRetention::UntilNextExpiry(absl::Time now) const {
  if (finished_.empty() || options_.max_age == absl::InfiniteDuration()) {
    return absl::InfiniteDuration();
  }
  return std::max(absl::ZeroDuration(),
                  finished_.front().first + options_.max_age - now);
}

}  // namespace weft::server
