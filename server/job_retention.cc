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

namespace {

// Releases what the jobs in `queue` (oldest first) hold until `*held` is
// within `max`: `release` frees one job's share, with the job's lock held,
// and returns the bytes it freed (0: the job held none any more).
template <typename Release>
void ReleaseOldest(std::deque<std::weak_ptr<JobRecord>>& queue, int64_t* held,
                   int64_t max, Release release) {
  while (*held > max && !queue.empty()) {
    std::shared_ptr<JobRecord> job = queue.front().lock();
    queue.pop_front();
    if (job == nullptr) continue;  // expired, bytes already returned
    absl::MutexLock lock(&job->mu);
    *held -= release(*job);
  }
}

}  // namespace

void JobRetention::ReleaseOverBytes() {
  const int64_t max_outputs = options_.max_output_bytes;
  ReleaseOldest(holding_, &output_bytes_, max_outputs, [&](JobRecord& job) {
    job.mu.AssertHeld();
    const int64_t bytes = job.output_bytes;
    if (bytes == 0) return bytes;
    job.output_bytes = 0;
    job.outputs.clear();
    job.outputs_released = absl::StrCat(
        "its outputs were released to keep the outputs of finished jobs "
        "within ",
        max_outputs, " bytes (weftd --retain_output_bytes)");
    return bytes;
  });
  const int64_t max_traces = options_.max_trace_bytes;
  ReleaseOldest(tracing_, &trace_bytes_, max_traces, [&](JobRecord& job) {
    job.mu.AssertHeld();
    const int64_t bytes = job.trace_bytes;
    if (bytes == 0) return bytes;
    job.trace_bytes = 0;
    job.trace.reset();
    job.trace_released = absl::StrCat(
        "its trace was released to keep the traces of finished jobs within ",
        max_traces, " bytes (weftd --retain_trace_bytes)");
    return bytes;
  });
}

absl::Duration JobRetention::UntilNextExpiry(absl::Time now) const {
  if (finished_.empty() || options_.max_age == absl::InfiniteDuration()) {
    return absl::InfiniteDuration();
  }
  return std::max(absl::ZeroDuration(),
                  finished_.front().first + options_.max_age - now);
}

}  // namespace weft::server
