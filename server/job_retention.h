// JobRetention: how long finished jobs, and their outputs, are kept.
//
// A finished job stays (visible to Get, List, ReadBuffer and idempotent
// resubmission) until more than `max_jobs` jobs have finished after it or
// `max_age` has passed since it finished, whichever comes first. The
// outputs finished jobs hold are also bounded in bytes (`max_output_bytes`):
// beyond it the oldest jobs' outputs are released first, the jobs
// themselves staying, and such a job says why (JobRecord::outputs_released).
// The traces finished jobs hold are bounded the same way
// (`max_trace_bytes`, JobRecord::trace_released).
// Releasing a job drops its trace and outputs at once, even if a watcher
// or reader still holds the record (a reader keeps what it is streaming).
// Not thread-safe: the owner (JobManager) serialises calls; it takes each
// record's own lock where it touches the record.
#ifndef WEFT_SERVER_JOB_RETENTION_H_
#define WEFT_SERVER_JOB_RETENTION_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "server/job_record.h"

namespace weft::server {

class JobRetention {
 public:
  struct Options {
    int max_jobs = 1000;
    absl::Duration max_age = absl::InfiniteDuration();
    int64_t max_output_bytes = int64_t{1} << 62;
    int64_t max_trace_bytes = int64_t{1} << 62;
  };

  explicit JobRetention(Options options) : options_(options) {}

  // A job has finished at `end`, holding `output_bytes` of outputs
  // (JobRecord::output_bytes) and a trace of `trace_bytes`
  // (JobRecord::trace_bytes). Releases outputs and traces over the byte
  // bounds, the oldest first.
  void Add(std::shared_ptr<JobRecord> job, absl::Time end, int64_t output_bytes,
           int64_t trace_bytes = 0);

  // Removes and returns the jobs past their retention at `now`, their
  // traces and outputs dropped; the caller forgets them.
  std::vector<std::shared_ptr<JobRecord>> Expire(absl::Time now);

  // How long until the oldest job expires by age (infinite: never).
  absl::Duration UntilNextExpiry(absl::Time now) const;

  // Bytes of outputs, and of traces, held by the jobs kept.
  int64_t output_bytes() const { return output_bytes_; }
  int64_t trace_bytes() const { return trace_bytes_; }
  int64_t size() const { return static_cast<int64_t>(finished_.size()); }

 private:
  void ReleaseOverBytes();

  const Options options_;
  // Finished jobs in finishing order, with their end times.
  std::deque<std::pair<absl::Time, std::shared_ptr<JobRecord>>> finished_;
  // Jobs that may still hold outputs, in finishing order.
  std::deque<std::weak_ptr<JobRecord>> holding_;
  // Jobs that may still hold traces, in finishing order.
  std::deque<std::weak_ptr<JobRecord>> tracing_;
  int64_t output_bytes_ = 0;
  int64_t trace_bytes_ = 0;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_RETENTION_H_
