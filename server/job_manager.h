// The job manager: admission, ordering, dispatch, cancellation and retention
// of jobs.
//
// A job is one submitted graph; its states are job_state.h's, and every
// accepted job reaches exactly one terminal state. A submission that is
// rejected never becomes a job. The manager answers with plain values
// (job_info.h); the service converts them to the wire (job_proto.h).
//
// Admission (Submit): the caller hands in a built, validated
// scheduler::Graph. Submit plans it right away (scheduler::PlanGraph, on the
// caller's thread, against the executor's current stream load), so options
// the graph cannot satisfy (e.g. a stream label in SINGLE mode) are
// INVALID_ARGUMENT at submission and never make a FAILED job. Then, in this
// order: a repeated non-empty request_id of the same tenant returns the
// original job while it is retained (AIP-155; concurrent duplicates create
// exactly one job); UNAVAILABLE after StopAccepting; RESOURCE_EXHAUSTED
// when max_queued_jobs jobs are queued, or when the tenant already has
// max_queued_per_tenant queued, with a google.rpc.RetryInfo payload
// (common/retry_info.h) estimating when a slot frees; DEADLINE_EXCEEDED or
// CANCELLED, creating no job, when the submission's deadline has passed or
// its caller has gone away by the time it would be admitted.
//
// Dispatch: queued jobs start whenever fewer than max_running_jobs are
// running and the next one's buffers fit in the devices' memory beside
// those of the running jobs (device_reservations.h; a job that fits only
// alone waits, ahead of later jobs, until nothing runs), in JobQueue's
// order: fairness between
// tenants first (the tenant with the fewest jobs running, then the one
// served longest ago), then priority among that tenant's jobs, then FIFO.
// So a tenant flooding the queue at any priority delays another tenant's
// first job by at most one running job's end. A tenant runs at most
// max_running_per_tenant jobs at once (by default all slots but one), so
// one holding long jobs never takes every slot. The plan made at admission
// is used, except that the load-aware STREAM_AWARE policy is planned again
// against the load at dispatch. A job admitted while a slot is free is
// started (handed to the executor) by its submitter's thread, sparing a
// hand-off. A queued job whose slot a run's end frees is started by the
// executor's thread that reports that end, when starting it is little work
// (at most kMaxStartedOnRunEndNodes nodes, no planning again); otherwise
// one dispatcher thread starts queued jobs as slots free. Device work never
// runs on any of them.
//
// Cancellation: a queued job is cancelled at once; a running job is asked to
// stop (runtime::Executor::Cancel: no more work is issued, its streams and
// memory are released once the work in flight has drained) and becomes
// CANCELLED when the executor reports the run over (or SUCCEEDED/FAILED if it
// ended first). Cancelling a CANCELLED job is a no-op that returns it;
// cancelling a SUCCEEDED or FAILED job is FAILED_PRECONDITION (AIP-151).
//
// Retention: finished jobs keep their output buffers and stay visible (Get,
// List, ReadBuffer, idempotency) until more than retain_jobs jobs have
// finished after them or retain_for has passed since they finished,
// whichever comes first; then they and their outputs are released. The
// outputs held by finished jobs are also bounded in bytes
// (retain_output_bytes): beyond it the oldest jobs' outputs go first, the
// jobs themselves stay visible, and reading such an output is NOT_FOUND
// saying why.
//
// Watching: Watch returns a JobWatch that yields the job, then its node
// events and state changes, until the job is terminal.
//
// Tracing: with Options::trace_jobs, every job of at most trace_max_nodes
// nodes records a trace of where and when its work ran (runtime/trace.h).
// The trace is kept with the finished job and released with it; TraceJson
// renders it as Chrome/Perfetto trace-event JSON. A job that never reached
// the devices (cancelled while queued) has an empty trace.
#ifndef WEFT_SERVER_JOB_MANAGER_H_
#define WEFT_SERVER_JOB_MANAGER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/registry.h"
#include "runtime/executor.h"
#include "scheduler/graph.h"
#include "scheduler/planner.h"
#include "server/device_reservations.h"
#include "server/job_admission.h"
#include "server/job_directory.h"
#include "server/job_event_log.h"
#include "server/job_info.h"
#include "server/job_queue.h"
#include "server/job_retention.h"
#include "server/job_state.h"
#include "server/job_watch.h"
#include "server/metrics.h"

namespace weft::server {

// Queued jobs of at most this many nodes may be started on the executor's
// thread (see JobManager).
inline constexpr int64_t kMaxStartedOnRunEndNodes = 4096;

// A job as submitted: a validated graph and how to plan it.
struct JobSpec {
  std::shared_ptr<const scheduler::Graph> graph;  // required
  // num_devices must be set; busy_streams is filled in by Submit, which
  // also turns off `explain` and `simulate`: a job's plan is executed and
  // never shown, so it needs neither reasons nor estimated times (planning
  // a large graph takes well under half the time without them).
  scheduler::PlannerOptions planner_options;
  // How the executor issues the job's device work.
  runtime::LaunchMode launch_mode = runtime::LaunchMode::kDefault;
  // Where its loops evaluate their conditions.
  runtime::ControlMode control_mode = runtime::ControlMode::kAuto;
  std::string request_id;  // idempotency key; empty: none
  int32_t priority = 0;    // higher runs first
  std::string tenant;      // who submitted; scopes request_id
  // The submitter's deadline (real time, as gRPC deadlines are): a
  // submission not admitted by then creates no job.
  absl::Time deadline = absl::InfiniteFuture();
  // Asked right before admission; true (the caller went away) creates no
  // job. Optional.
  std::function<bool()> cancelled;
  // The graph's plan for these options, made and checked for an earlier
  // submission (PlanCache): Submit neither plans nor checks again, and the
  // job runs checked->graph() (spills and fills included). Optional.
  std::optional<runtime::CheckedPlan> checked;
};

struct JobRecord;  // job_record.h

// Thread-safe.
class JobManager {
 public:
  struct Options {
    runtime::Executor* executor = nullptr;  // not owned; outlives this
    // Not owned. Optional: without it the manager counts into a registry
    // of its own that nobody exports.
    Metrics* metrics = nullptr;
    int max_queued_jobs = 1024;
    // Queued jobs of one tenant; 0 means max_queued_jobs (no separate bound).
    int max_queued_per_tenant = 0;
    int max_running_jobs = 64;
    // Jobs of one tenant running at once; 0 means max_running_jobs - 1 (at
    // least 1), so that one slot is always left to the other tenants.
    int max_running_per_tenant = 0;
    // Each device's memory (bytes, by device index): a queued job starts
    // only where its buffers fit beside the running jobs'
    // (device_reservations.h). Empty: no bound.
    std::vector<int64_t> device_memory_bytes;
    int retain_jobs = 1000;
    absl::Duration retain_for = absl::InfiniteDuration();
    // Bytes of output buffers finished jobs may hold together; beyond it
    // the oldest jobs' outputs are released first (the jobs stay visible).
    int64_t retain_output_bytes = int64_t{1} << 62;
    // Bytes of traces finished jobs may hold together; beyond it the
    // oldest jobs' traces are released first (the jobs stay visible).
    int64_t retain_trace_bytes = int64_t{1} << 62;
    // Bounds of the retry delay suggested with RESOURCE_EXHAUSTED.
    absl::Duration min_retry_delay = absl::Milliseconds(10);
    absl::Duration max_retry_delay = absl::Seconds(30);
    // The time source for timestamps and retention. Default absl::Now.
    std::function<absl::Time()> clock;
    // Record a trace of every job (a few events per node while it runs; the
    // trace is kept as long as the job). Jobs of more than trace_max_nodes
    // nodes are not traced. Error messages name these as the weftd flags
    // --trace_jobs and --trace_max_nodes.
    bool trace_jobs = true;
    int64_t trace_max_nodes = 200000;
    // Node events each job keeps for its watches (JobEventLog): the most
    // recent max_job_events (at least 1) while it runs, and the last
    // finished_job_events (at least 0) once it is over and nobody watches
    // it. Error messages name these as the weftd flags of the same names.
    int64_t max_job_events = JobEventLog::kDefaultCapacity;
    int64_t finished_job_events = 256;
    // Give job plans a memory plan (scheduler/memory/memory_plan.h), by
    // which the executor places each job's buffers in one arena per device
    // (runtime::Executor::Options::place_buffers) and admission reserves
    // the arenas, not every buffer's bytes. The planner plans the memory
    // of simulated plans only, and job plans are not simulated. Graphs of
    // up to kMaxMemoryPlanNodes nodes get one, fitted with spills where a
    // device's arena exceeds its memory (at 65,536 nodes that takes 1-34x
    // the plan without memory where reuse fits, up to about 5 s where it
    // must spill: memory_bench --jobs); larger ones go without, their
    // buffers allocated one by one. A larger graph over a device's memory
    // without reuse, or any such graph without plan_memory, is refused at
    // Submit (RESOURCE_EXHAUSTED naming the device and the bytes) instead
    // of failing at run time.
    bool plan_memory = true;
  };
  static constexpr int kMaxMemoryPlanNodes = 65536;

  // INVALID_ARGUMENT for missing executor or non-positive bounds. Starts the
  // dispatcher thread.
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(Options options);

  // Cancels every job that has not finished and waits until the executor
  // has reported all of them, then stops the dispatcher.
  ~JobManager();
  JobManager(const JobManager&) = delete;
  JobManager& operator=(const JobManager&) = delete;

  // Admits a job (see the header comment). Returns the job as admitted, or
  // the original job for a repeated request_id. When it planned the job,
  // the checked plan goes to `*planned` (if not null) for later
  // submissions of the graph (JobSpec::checked).
  absl::StatusOr<JobInfo> Submit(
      JobSpec spec, std::optional<runtime::CheckedPlan>* planned = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // NOT_FOUND (naming the id) for unknown or no longer retained jobs.
  absl::StatusOr<JobInfo> Get(absl::string_view id) ABSL_LOCKS_EXCLUDED(mu_);

  // Requests cancellation (see the header comment) and returns the job
  // without waiting for a running job to drain; use WaitUntilTerminal.
  absl::StatusOr<JobInfo> Cancel(absl::string_view id) ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until the job is terminal or `deadline`; returns the job as it
  // is then.
  absl::StatusOr<JobInfo> WaitUntilTerminal(absl::string_view id,
                                            absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Jobs in submission order, only those in `state` when given. With
  // `limit` > 0, only the `limit` most recently submitted of them.
  std::vector<JobInfo> List(std::optional<JobState> state, int limit)
      ABSL_LOCKS_EXCLUDED(mu_);

  // NOT_FOUND for unknown jobs.
  absl::StatusOr<std::unique_ptr<JobWatch>> Watch(absl::string_view id)
      ABSL_LOCKS_EXCLUDED(mu_);

  // An output buffer of a SUCCEEDED job. NOT_FOUND for unknown jobs and for
  // names that are not output buffers of the job; FAILED_PRECONDITION when
  // the job has not succeeded.
  absl::StatusOr<OutputBuffer> ReadOutput(absl::string_view id,
                                          absl::string_view buffer)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The job's trace as trace-event JSON. NOT_FOUND for unknown jobs;
  // FAILED_PRECONDITION while the job has not finished, and for jobs that
  // were not traced (saying why and which flag decides it).
  absl::StatusOr<std::string> TraceJson(absl::string_view id)
      ABSL_LOCKS_EXCLUDED(mu_);

  // From now on Submit answers UNAVAILABLE. Irreversible.
  void StopAccepting() ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels every queued job. Returns how many.
  int CancelQueued(absl::string_view reason) ABSL_LOCKS_EXCLUDED(mu_);

  // Requests cancellation of every running job. Returns their ids.
  std::vector<std::string> CancelRunning(absl::string_view reason)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until no job is queued or running, or until `deadline`. Returns
  // true when idle. New jobs can only be excluded with StopAccepting.
  bool WaitIdle(absl::Time deadline) const ABSL_LOCKS_EXCLUDED(mu_);

  int64_t queued() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t running() const ABSL_LOCKS_EXCLUDED(mu_);
  // By device: the memory running jobs were started against
  // (device_reservations.h); empty without Options::device_memory_bytes.
  std::vector<int64_t> ReservedBytes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Jobs known, in any state (finished ones until retention releases them).
  int64_t retained() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The graph's plan, with a memory plan (Options::plan_memory).
  absl::StatusOr<scheduler::Plan> PlanJob(
      const scheduler::Graph& graph,
      const scheduler::PlannerOptions& options) const;
  explicit JobManager(Options options);

  absl::Time Now() const { return clock_(); }
  absl::StatusOr<std::shared_ptr<JobRecord>> Find(absl::string_view id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The original job of a retained (tenant, request_id), if any.
  std::optional<JobInfo> DuplicateLocked(const JobSpec& spec) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK when a job of `spec` may be queued now; otherwise the rejection
  // (UNAVAILABLE, RESOURCE_EXHAUSTED with a retry hint), counted in metrics.
  absl::Status CheckAdmissionLocked(const JobSpec& spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateGaugesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the jobs past their retention.
  void EvictLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Removes `job` from the queue; false when it is not queued.
  bool DequeueLocked(const JobRecord& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Moves a job that is not in the queue to its terminal state; a no-op if
  // it is terminal already.
  void FinishLocked(const std::shared_ptr<JobRecord>& job, absl::Status status,
                    std::string failed_node, runtime::HostBuffers outputs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(const std::shared_ptr<JobRecord>& job, absl::Status status,
              std::string failed_node, runtime::HostBuffers outputs)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The executor reports `job`'s run over (on its thread): Finish, then
  // start the queued jobs that are little work to start.
  void RunEnded(const std::shared_ptr<JobRecord>& job, absl::Status status,
                std::string failed_node, runtime::HostBuffers outputs)
      ABSL_LOCKS_EXCLUDED(mu_);
  bool CancelQueuedLocked(const std::shared_ptr<JobRecord>& job,
                          absl::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void DispatchLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the queue's next job may start now.
  bool CanDispatchLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // While the next job waits for device memory with jobs running: the
  // next job of another tenant that may start beside it without delaying
  // it (DeviceReservations::FitsBeside, a running slot left for it), in
  // the order the tenants' turns come; else null. Remembered until the
  // queue, the reservations or the running jobs change: the dispatcher
  // waits on it, and every release of mu_ asks again.
  std::shared_ptr<JobRecord> BesideWaitingLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // CanDispatchLocked, or a job may start beside the next.
  bool CanStartAnyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the jobs that may start now to RUNNING, in dispatch order, for
  // the caller to StartJob. With `quick_only`, stops before the first job
  // that is much work to start (see the header comment).
  std::vector<std::shared_ptr<JobRecord>> TakeStartableLocked(
      bool quick_only = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why `job`, QUEUED, has not started (JobInfo::queue_reason); empty
  // when it is no longer queued.
  std::string QueueReasonLocked(const JobRecord& job) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts a job that TakeStartableLocked moved to RUNNING.
  void StartJob(const std::shared_ptr<JobRecord>& job) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  runtime::Executor* const executor_;
  const MetricsOrOwn metrics_;
  const int max_running_jobs_;
  const absl::Duration retain_for_;
  const std::function<absl::Time()> clock_;
  const bool trace_jobs_;
  const int64_t trace_max_nodes_;
  const int64_t max_job_events_;
  const int64_t finished_job_events_;
  const bool plan_memory_;

  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // Queue limits, retry hints and StopAccepting (job_admission.h).
  AdmissionControl admission_ ABSL_GUARDED_BY(mu_);
  // Every retained job: queued, running and finished (job_directory.h).
  JobDirectory directory_ ABSL_GUARDED_BY(mu_);
  // Queued jobs in start order (job_queue.h).
  JobQueue queue_ ABSL_GUARDED_BY(mu_);
  // Jobs taken off the queue that have not finished.
  absl::flat_hash_map<std::string, std::shared_ptr<JobRecord>> running_
      ABSL_GUARDED_BY(mu_);
  // Device memory the running jobs hold (device_reservations.h).
  DeviceReservations reservations_ ABSL_GUARDED_BY(mu_);
  // BesideWaitingLocked's last answer and what it was found from.
  struct BesideAnswer {
    uint64_t queue_version = 0;
    uint64_t reservations_version = 0;
    size_t running = 0;
    bool valid = false;
    std::shared_ptr<JobRecord> job;
  };
  mutable BesideAnswer beside_ ABSL_GUARDED_BY(mu_);
  // Finished jobs and how long they stay (job_retention.h).
  JobRetention retention_ ABSL_GUARDED_BY(mu_);

  std::thread dispatcher_;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_MANAGER_H_
