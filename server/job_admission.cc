#include "server/job_admission.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/retry_info.h"

namespace weft::server {

AdmissionControl::AdmissionControl(const Limits& limits)
    : max_queued_jobs_(limits.max_queued_jobs),
      max_queued_per_tenant_(limits.max_queued_per_tenant == 0
                                 ? limits.max_queued_jobs
                                 : limits.max_queued_per_tenant),
      min_retry_delay_(limits.min_retry_delay),
      max_retry_delay_(limits.max_retry_delay) {}

absl::Status AdmissionControl::Check(absl::string_view tenant,
                                     const JobQueue& queue,
                                     int64_t running) const {
  if (!accepting_) {
    return absl::UnavailableError(
        "weftd is shutting down and accepts no new jobs");
  }
  if (queue.size() >= max_queued_jobs_) {
    return WithRetryDelay(
        absl::ResourceExhaustedError(absl::StrFormat(
            "admission queue is full (%d jobs queued, %d running); retry "
            "later",
            queue.size(), running)),
        RetryDelay(1, running));
  }
  const int64_t mine = queue.queued(tenant);
  if (mine >= max_queued_per_tenant_) {
    return WithRetryDelay(
        absl::ResourceExhaustedError(absl::StrFormat(
            "tenant '%s' has %d jobs queued, the most one tenant may "
            "queue; retry later",
            tenant, mine)),
        RetryDelay(queue.tenants_waiting(), running));
  }
  return absl::OkStatus();
}

void AdmissionControl::RecordRunTime(absl::Duration run_time) {
  mean_run_time_ = mean_run_time_ == absl::ZeroDuration()
                       ? run_time
                       : (mean_run_time_ * 7 + run_time) / 8;
}

absl::Duration AdmissionControl::RetryDelay(int turns, int64_t running) const {
  absl::Duration delay = absl::Milliseconds(100);
  if (mean_run_time_ > absl::ZeroDuration()) {
    delay = mean_run_time_ / std::max<int64_t>(1, running);
  }
  delay *= std::max(1, turns);
  return std::clamp(delay, min_retry_delay_, max_retry_delay_);
}

}  // namespace weft::server
