// AdmissionControl: whether the job manager may queue one more job now.
//
// A submission is refused with UNAVAILABLE once StopAccepting was called,
// and with RESOURCE_EXHAUSTED when max_queued_jobs jobs are queued or its
// tenant already has max_queued_per_tenant queued. RESOURCE_EXHAUSTED
// carries a google.rpc.RetryInfo payload (common/retry_info.h) estimating when
// a queue slot frees: a slot frees when a running job ends, so with R jobs
// running for T each on average about every T / R, times the turns the
// submitter waits (its tenant waits behind the other tenants with queued
// jobs), within [min_retry_delay, max_retry_delay]. T is a moving average
// of the run times RecordRunTime is given; 100 ms before the first.
//
// Not thread-safe: the job manager calls it under its lock.
#ifndef WEFT_SERVER_JOB_ADMISSION_H_
#define WEFT_SERVER_JOB_ADMISSION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/job_queue.h"

namespace weft::server {

class AdmissionControl {
 public:
  struct Limits {
    int max_queued_jobs = 1024;
    // Queued jobs of one tenant; 0 means max_queued_jobs.
    int max_queued_per_tenant = 0;
    absl::Duration min_retry_delay = absl::Milliseconds(10);
    absl::Duration max_retry_delay = absl::Seconds(30);
  };

  explicit AdmissionControl(const Limits& limits);

  // From now on every Check answers UNAVAILABLE. Irreversible.
  void StopAccepting() { accepting_ = false; }

  // OK when a job of `tenant` may join `queue` while `running` jobs run;
  // otherwise the rejection (see the header comment).
  absl::Status Check(absl::string_view tenant, const JobQueue& queue,
                     int64_t running) const;

  // A job ran (start to end) for `run_time`.
  void RecordRunTime(absl::Duration run_time);

  // The delay suggested to a submitter who waits `turns` queue slots while
  // `running` jobs run.
  absl::Duration RetryDelay(int turns, int64_t running) const;

 private:
  const int max_queued_jobs_;
  const int max_queued_per_tenant_;
  const absl::Duration min_retry_delay_;
  const absl::Duration max_retry_delay_;
  bool accepting_ = true;
  // Moving average of run times; zero before the first.
  absl::Duration mean_run_time_ = absl::ZeroDuration();
};

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_ADMISSION_H_
