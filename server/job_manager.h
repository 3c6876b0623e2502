// The job manager: admission, ordering, dispatch, cancellation and retention
// of jobs.
//
// A job is one submitted graph. Its lifecycle:
//
//   QUEUED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED
//   QUEUED -> CANCELLED            (cancelled, or the daemon shut down)
//   QUEUED -> FAILED               (reserved: admission-time failures)
//
// No other move is legal (CheckTransition answers FAILED_PRECONDITION), and
// every accepted job reaches exactly one terminal state.
//
// Admission: Submit validates nothing about the graph (the caller hands in a
// built, validated scheduler::Graph) but enforces the bounded queue
// (RESOURCE_EXHAUSTED when max_queued_jobs jobs are waiting), idempotency
// (a repeated non-empty request_id of the same tenant returns the original
// job while it is retained) and draining (UNAVAILABLE after StopAccepting).
//
// Dispatch: one dispatcher thread takes the queued job with the highest
// priority (FIFO among equal priorities) whenever fewer than
// max_running_jobs are running, plans it with scheduler::PlanGraph (using the
// executor's current stream load) and starts it on the runtime::Executor.
// Planning failures fail the job with the planner's status. Device work
// never runs on the dispatcher thread.
//
// Cancellation: a queued job is cancelled at once; a running job is asked to
// stop (runtime::Executor::Cancel) and becomes CANCELLED when the executor
// reports that its work in flight has drained. Cancelling a CANCELLED job is
// a no-op; cancelling a SUCCEEDED or FAILED job is FAILED_PRECONDITION.
//
// Retention: finished jobs keep their output buffers and stay visible (Get,
// List, ReadBuffer, idempotency) until more than retain_jobs jobs have
// finished after them or retain_for has passed, whichever comes first.
//
// Watching: Watch returns a JobWatch that yields the job, then its node
// events and state changes, until the job is terminal.
#ifndef WEFT_SERVER_JOB_MANAGER_H_
#define WEFT_SERVER_JOB_MANAGER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/executor.h"
#include "scheduler/graph.h"
#include "scheduler/planner.h"
#include "server/metrics.h"
#include "weft/v1/weft.pb.h"

namespace weft::server {

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };

// "QUEUED", "RUNNING", ... (the weft.v1.JobState names).
absl::string_view JobStateName(JobState state);
bool IsTerminal(JobState state);
weft::v1::JobState JobStateToProto(JobState state);
// INVALID_ARGUMENT for JOB_STATE_UNSPECIFIED and unknown values.
absl::StatusOr<JobState> JobStateFromProto(weft::v1::JobState state);
// OK when `from -> to` is a legal move of the lifecycle above, else
// FAILED_PRECONDITION naming both states.
absl::Status CheckTransition(JobState from, JobState to);

// A job as submitted: a validated graph and how to plan it.
struct JobSpec {
  std::shared_ptr<const scheduler::Graph> graph;  // required
  // num_devices must be set; busy_streams is filled in at dispatch.
  scheduler::PlannerOptions planner_options;
  std::string request_id;  // idempotency key; empty: none
  int32_t priority = 0;    // higher runs first
  std::string tenant;      // who submitted; scopes request_id
};

// An output buffer of a finished job. `data` is shared, never copied.
struct OutputBuffer {
  scheduler::DType dtype = scheduler::DType::kBytes;
  std::shared_ptr<const std::string> data;
};

// One step of a watch.
struct WatchUpdate {
  weft::v1::Job job;                         // the job now
  std::vector<weft::v1::NodeEvent> events;   // node events since last step
  bool changed = false;  // false: the deadline passed with nothing new
  bool done = false;     // the job is terminal and every event was returned
};

struct JobRecord;  // internal, defined in job_manager.cc
class JobManager;

// A watcher's cursor over one job. Obtained from JobManager::Watch.
// Not thread-safe (one watcher uses it); may outlive the job's retention.
class JobWatch {
 public:
  ~JobWatch();
  JobWatch(const JobWatch&) = delete;
  JobWatch& operator=(const JobWatch&) = delete;

  // The first call returns the job at once with no events. Later calls block
  // until there are new events or a state change, or until `deadline`
  // (then `changed` is false). At most `max_events` events are returned per
  // call; the rest come with the next calls, which then do not block.
  WatchUpdate Next(absl::Time deadline, int max_events = 4096);

 private:
  friend class JobManager;
  explicit JobWatch(std::shared_ptr<JobRecord> job);

  const std::shared_ptr<JobRecord> job_;
  bool first_ = true;
  int64_t seen_version_ = -1;
  int64_t next_event_ = 0;  // absolute index into the job's event log
};

// Thread-safe.
class JobManager {
 public:
  struct Options {
    runtime::Executor* executor = nullptr;  // not owned; outlives this
    Metrics* metrics = nullptr;             // not owned; optional
    int max_queued_jobs = 1024;
    int max_running_jobs = 16;
    int retain_jobs = 1000;
    absl::Duration retain_for = absl::InfiniteDuration();
    // The time source for timestamps and retention. Default absl::Now.
    std::function<absl::Time()> clock;
  };

  // INVALID_ARGUMENT for missing executor or non-positive bounds. Starts the
  // dispatcher thread.
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(Options options);

  // Cancels every job that has not finished and waits until the executor
  // has reported all of them, then stops the dispatcher.
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Admits a job (see the header comment). Returns the job as admitted, or
  // the original job for a repeated request_id.
  absl::StatusOr<weft::v1::Job> Submit(JobSpec spec) ABSL_LOCKS_EXCLUDED(mu_);

  // NOT_FOUND (naming the id) for unknown or no longer retained jobs.
  absl::StatusOr<weft::v1::Job> Get(absl::string_view id) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Requests cancellation (see the header comment) and returns the job
  // without waiting for a running job to drain; use WaitUntilTerminal.
  absl::StatusOr<weft::v1::Job> Cancel(absl::string_view id)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until the job is terminal or `deadline`; returns the job as it
  // is then.
  absl::StatusOr<weft::v1::Job> WaitUntilTerminal(absl::string_view id,
                                                  absl::Time deadline) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Jobs in submission order, only those in `state` when given. With
  // `limit` > 0, only the `limit` most recently submitted of them.
  std::vector<weft::v1::Job> List(std::optional<JobState> state,
                                  int limit) const ABSL_LOCKS_EXCLUDED(mu_);

  // NOT_FOUND for unknown jobs.
  absl::StatusOr<std::unique_ptr<JobWatch>> Watch(absl::string_view id) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // An output buffer of a SUCCEEDED job. NOT_FOUND for unknown jobs and for
  // names that are not output buffers of the job; FAILED_PRECONDITION when
  // the job has not succeeded.
  absl::StatusOr<OutputBuffer> ReadOutput(absl::string_view id,
                                          absl::string_view buffer) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // From now on Submit answers UNAVAILABLE. Irreversible.
  void StopAccepting() ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels every queued job. Returns how many.
  int CancelQueued(absl::string_view reason) ABSL_LOCKS_EXCLUDED(mu_);

  // Requests cancellation of every running job. Returns how many.
  int CancelRunning(absl::string_view reason) ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until no job is queued or running, or until `deadline`. Returns
  // true when idle. New jobs can only be excluded with StopAccepting.
  bool WaitIdle(absl::Time deadline) const ABSL_LOCKS_EXCLUDED(mu_);

  int64_t queued() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t running() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Queue order: higher priority first, then submission order.
  struct QueueKey {
    int32_t priority;
    uint64_t seq;
    bool operator<(const QueueKey& o) const {
      if (priority != o.priority) return priority > o.priority;
      return seq < o.seq;
    }
  };

  explicit JobManager(Options options);

  absl::Time Now() const { return clock_(); }
  std::string NewJobIdLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<JobRecord> FindLocked(absl::string_view id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::shared_ptr<JobRecord>> Find(absl::string_view id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void UpdateGaugesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves a job that is not in the queue to its terminal state; a no-op if
  // it is terminal already.
  void FinishLocked(const std::shared_ptr<JobRecord>& job, absl::Status status,
                    std::string failed_node, runtime::HostBuffers outputs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(const std::shared_ptr<JobRecord>& job, absl::Status status,
              std::string failed_node, runtime::HostBuffers outputs)
      ABSL_LOCKS_EXCLUDED(mu_);
  bool CancelQueuedLocked(const std::shared_ptr<JobRecord>& job,
                          absl::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void DispatchLoop() ABSL_LOCKS_EXCLUDED(mu_);
  bool CanDispatchLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Plans and starts a job that the dispatcher moved to RUNNING.
  void StartJob(const std::shared_ptr<JobRecord>& job) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  runtime::Executor* const executor_;
  Metrics* const metrics_;
  const int max_queued_jobs_;
  const int max_running_jobs_;
  const int retain_jobs_;
  const absl::Duration retain_for_;
  const std::function<absl::Time()> clock_;

  mutable absl::Mutex mu_;
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  // Every retained job: queued, running and finished.
  absl::flat_hash_map<std::string, std::shared_ptr<JobRecord>> jobs_
      ABSL_GUARDED_BY(mu_);
  // (tenant, request_id) -> job id.
  absl::flat_hash_map<std::string, std::string> request_ids_
      ABSL_GUARDED_BY(mu_);
  std::map<QueueKey, std::shared_ptr<JobRecord>> queue_ ABSL_GUARDED_BY(mu_);
  // Jobs the dispatcher took off the queue that have not finished.
  absl::flat_hash_map<std::string, std::shared_ptr<JobRecord>> running_
      ABSL_GUARDED_BY(mu_);
  // Finished jobs in finishing order, with their end times.
  std::deque<std::pair<absl::Time, std::string>> finished_
      ABSL_GUARDED_BY(mu_);

  std::thread dispatcher_;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_MANAGER_H_
