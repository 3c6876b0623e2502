#include "server/job_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/plan_check.h"
#include "runtime/recorded_trace.h"
#include "runtime/trace.h"
#include "scheduler/memory/memory_plan.h"
#include "scheduler/plan.h"
#include "scheduler/status_macros.h"
#include "server/devices.h"
#include "server/job_record.h"
#include "server/job_run.h"

namespace weft::server {

// ------------------------------------------------------------ JobManager --

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(
    Options options) {
  if (options.executor == nullptr) {
    return absl::InvalidArgumentError("JobManager needs an executor");
  }
  if (options.max_queued_jobs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_queued_jobs must be >= 1, got ", options.max_queued_jobs));
  }
  if (options.max_running_jobs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_running_jobs must be >= 1, got ", options.max_running_jobs));
  }
  if (options.retain_jobs < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("retain_jobs must be >= 0, got ", options.retain_jobs));
  }
  if (options.retain_trace_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "retain_trace_bytes must be >= 0, got ", options.retain_trace_bytes));
  }
  if (options.retain_output_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "retain_output_bytes must be >= 0, got ", options.retain_output_bytes));
  }
  if (options.max_running_per_tenant < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_running_per_tenant must be >= 0, got ",
                     options.max_running_per_tenant));
  }
  if (options.max_queued_per_tenant < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queued_per_tenant must be >= 0, got ",
                     options.max_queued_per_tenant));
  }
  if (options.trace_max_nodes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace_max_nodes must be >= 0, got ", options.trace_max_nodes));
  }
  if (options.max_job_events < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_job_events must be >= 1, got ", options.max_job_events));
  }
  if (options.finished_job_events < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "finished_job_events must be >= 0, got ", options.finished_job_events));
  }
  if (options.retain_for <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("retain_for must be positive");
  }
  if (options.min_retry_delay < absl::ZeroDuration() ||
      options.max_retry_delay < options.min_retry_delay) {
    return absl::InvalidArgumentError(
        "retry delays must satisfy 0 <= min_retry_delay <= max_retry_delay");
  }
  if (!options.clock) options.clock = [] { return absl::Now(); };
  std::unique_ptr<JobManager> manager(new JobManager(std::move(options)));
  manager->dispatcher_ =
      std::thread([m = manager.get()] { m->DispatchLoop(); });
  return manager;
}

JobManager::JobManager(Options options)
    : executor_(options.executor),
      metrics_(options.metrics),
      max_running_jobs_(options.max_running_jobs),
      retain_for_(options.retain_for),
      clock_(std::move(options.clock)),
      trace_jobs_(options.trace_jobs),
      trace_max_nodes_(options.trace_max_nodes),
      max_job_events_(options.max_job_events),
      finished_job_events_(options.finished_job_events),
      plan_memory_(options.plan_memory),
      admission_(AdmissionControl::Limits{
          options.max_queued_jobs, options.max_queued_per_tenant,
          options.min_retry_delay, options.max_retry_delay}),
      queue_(options.max_running_per_tenant > 0
                 ? options.max_running_per_tenant
                 : std::max(1, options.max_running_jobs - 1)),
      reservations_(std::move(options.device_memory_bytes)),
      retention_(JobRetention::Options{options.retain_jobs, options.retain_for,
                                       options.retain_output_bytes,
                                       options.retain_trace_bytes}) {
  absl::MutexLock lock(&mu_);
  UpdateGaugesLocked();
}

JobManager::~JobManager() {
  StopAccepting();
  CancelQueued("weftd is shutting down");
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
  }
  if (dispatcher_.joinable()) dispatcher_.join();
  CancelRunning("weftd is shutting down");
  // The executor reports every run exactly once; its callbacks refer to
  // this object, so wait for all of them.
  absl::MutexLock lock(&mu_);
  auto drained = [this]() {
    mu_.AssertHeld();
    return running_.empty();
  };
  mu_.Await(absl::Condition(&drained));
}

absl::StatusOr<std::shared_ptr<JobRecord>> JobManager::Find(
    absl::string_view id) {
  absl::MutexLock lock(&mu_);
  EvictLocked(Now());
  std::shared_ptr<JobRecord> job = directory_.Find(id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
  }
  return job;
}

void JobManager::UpdateGaugesLocked() {
  metrics_->SetQueueDepth(queue_.size());
  metrics_->SetRetainedOutputBytes(retention_.output_bytes());
  metrics_->SetRetainedTraceBytes(retention_.trace_bytes());
  metrics_->SetJobsRunning(static_cast<int64_t>(running_.size()));
}

void JobManager::EvictLocked(absl::Time now) {
  const std::vector<std::shared_ptr<JobRecord>> expired =
      retention_.Expire(now);
  for (const std::shared_ptr<JobRecord>& job : expired) {
    directory_.Remove(*job);
  }
  if (!expired.empty()) UpdateGaugesLocked();
}

std::optional<JobInfo> JobManager::DuplicateLocked(const JobSpec& spec) const {
  std::shared_ptr<JobRecord> original =
      directory_.FindRequest(spec.tenant, spec.request_id);
  if (original == nullptr) return std::nullopt;
  absl::MutexLock job_lock(&original->mu);
  return original->Snapshot();
}

absl::Status JobManager::CheckAdmissionLocked(const JobSpec& spec) {
  absl::Status rejection = admission_.Check(
      spec.tenant, queue_, static_cast<int64_t>(running_.size()));
  if (!rejection.ok()) {
    metrics_->JobRejected(absl::StatusCodeToString(rejection.code()),
                          spec.tenant);
  }
  return rejection;
}

absl::StatusOr<scheduler::Plan> JobManager::PlanJob(
    const scheduler::Graph& graph,
    const scheduler::PlannerOptions& options) const {
  // The executor places buffers by the memory plan, and spills and fills
  // to fit the devices' memory where it does not fit.
  scheduler::PlannerOptions job_options = options;
  job_options.plan_memory =
      plan_memory_ && graph.num_nodes() <= kMaxMemoryPlanNodes;
  WEFT_ASSIGN_OR_RETURN(scheduler::Plan plan,
                        scheduler::PlanGraph(graph, job_options));
  if (plan.memory.empty()) {
    // Without a memory plan every buffer is allocated by itself for the
    // whole job: refuse now a job that could not run so, rather than let
    // it fail at its first allocation past the device's memory.
    const absl::Status fits = scheduler::memory::CheckBudgetsWithoutReuse(
        graph, plan,
        scheduler::memory::DeviceBudgets(options.memory_budget_bytes,
                                         options.device_memory_bytes,
                                         options.num_devices));
    if (!fits.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          fits.message(), "; weftd ",
          plan_memory_
              ? absl::StrCat("plans memory reuse and spills for graphs of up "
                             "to ",
                             kMaxMemoryPlanNodes, " nodes, and this one has ",
                             graph.num_nodes())
              : "runs with --arena_placement=false, which plans no memory "
                "reuse"));
    }
  }
  return plan;
}

absl::StatusOr<JobInfo> JobManager::Submit(
    JobSpec spec, std::optional<runtime::CheckedPlan>* planned) {
  if (spec.graph == nullptr) {
    return absl::InvalidArgumentError("graph: missing");
  }
  {
    // Cheap answers first, so that an overloaded daemon does not plan
    // graphs it will turn away.
    absl::MutexLock lock(&mu_);
    EvictLocked(Now());
    if (std::optional<JobInfo> original = DuplicateLocked(spec)) {
      return *std::move(original);
    }
    WEFT_RETURN_IF_ERROR(CheckAdmissionLocked(spec));
  }

  spec.planner_options.explain = false;
  spec.planner_options.simulate = false;
  if (!spec.checked.has_value()) {
    // Plan outside the lock, on the caller's thread: bad options are the
    // caller's error, reported before anything is created. Checked here,
    // on the caller's thread, so that starting the job does not check it
    // again (a job's duration starts when it starts).
    spec.planner_options.busy_streams =
        BusyStreams(*executor_, spec.planner_options.num_devices);
    const absl::Time plan_start = absl::Now();
    absl::StatusOr<scheduler::Plan> plan =
        PlanJob(*spec.graph, spec.planner_options);
    metrics_->ObservePlanning(absl::Now() - plan_start);
    if (!plan.ok()) return plan.status();
    // With spills and fills added, the job runs the graph they are part
    // of.
    if (plan->graph != nullptr) spec.graph = plan->graph;
    absl::StatusOr<runtime::CheckedPlan> checked = runtime::CheckPlan(
        spec.graph, std::make_shared<const scheduler::Plan>(*std::move(plan)),
        executor_->device_count());
    if (!checked.ok()) {
      return absl::InternalError(
          absl::StrCat("weftd made a plan its executor refuses: ",
                       checked.status().message()));
    }
    spec.checked = *std::move(checked);
    if (planned != nullptr) *planned = *spec.checked;
  } else if (spec.checked->num_devices() != executor_->device_count()) {
    return absl::InternalError(absl::StrCat(
        "a kept plan was checked for ", spec.checked->num_devices(),
        " devices; the executor has ", executor_->device_count()));
  }
  spec.graph = spec.checked->graph();
  const scheduler::Plan& plan = *spec.checked->plan();

  // The record is built outside the lock: only naming, counting and
  // queueing the job need it.
  auto job = std::make_shared<JobRecord>();
  {
    absl::MutexLock lock(&job->mu);  // not shared yet: never contended
    job->events = JobEventLog(max_job_events_);
  }
  job->finished_events = finished_job_events_;
  job->graph_name = spec.graph->name();
  job->request_id = spec.request_id;
  job->tenant = spec.tenant;
  job->priority = spec.priority;
  job->nodes_total = spec.graph->num_nodes();
  job->device_bytes =
      JobDeviceBytes(*spec.graph, plan, spec.planner_options.num_devices);
  for (const scheduler::BufferSpec& b : spec.graph->buffers()) {
    if (b.output) job->output_names.push_back(b.name);
  }
  job->planner_options = std::move(spec.planner_options);
  job->launch_mode = spec.launch_mode;
  job->control_mode = spec.control_mode;
  if (!trace_jobs_) {
    job->untraced_reason = "weftd runs with --trace_jobs=false";
  } else if (job->nodes_total > trace_max_nodes_) {
    job->untraced_reason = absl::StrCat(
        "it has ", job->nodes_total,
        " nodes, more than --trace_max_nodes=", trace_max_nodes_, " allows");
  }
  {
    absl::MutexLock job_lock(&job->mu);
    job->graph = std::move(spec.graph);
    job->plan = spec.checked->plan();
    job->checked = *std::move(spec.checked);
  }

  JobInfo snapshot;
  std::vector<std::shared_ptr<JobRecord>> start;
  {
    absl::MutexLock lock(&mu_);
    // Everything may have changed while planning.
    if (std::optional<JobInfo> original = DuplicateLocked(spec)) {
      return *std::move(original);
    }
    WEFT_RETURN_IF_ERROR(CheckAdmissionLocked(spec));
    if (absl::Now() >= spec.deadline) {
      metrics_->JobRejected("DEADLINE_EXCEEDED", spec.tenant);
      return absl::DeadlineExceededError(
          "the submission's deadline passed before it was admitted; no job "
          "was created");
    }
    if (spec.cancelled && spec.cancelled()) {
      metrics_->JobRejected("CANCELLED", spec.tenant);
      return absl::CancelledError(
          "the submission was cancelled before it was admitted; no job was "
          "created");
    }
    // Set before the job is published; constant from then on.
    directory_.Name(*job);
    job->create_time = Now();
    {
      absl::MutexLock job_lock(&job->mu);
      snapshot = job->Snapshot();  // as admitted: QUEUED
    }
    directory_.Add(job);
    queue_.Push({job->id, job->tenant, job->priority, job->seq});
    start = TakeStartableLocked();
    UpdateGaugesLocked();
  }
  metrics_->JobSubmitted(job->tenant);
  for (const std::shared_ptr<JobRecord>& next : start) StartJob(next);
  return snapshot;
}

// ----------------------------------------------------------------- queue --

bool JobManager::DequeueLocked(const JobRecord& job) {
  return queue_.Remove(job.tenant, job.priority, job.seq);
}

absl::StatusOr<JobInfo> JobManager::Get(absl::string_view id) {
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<JobRecord> job, Find(id));
  JobInfo info;
  {
    absl::MutexLock lock(&job->mu);
    info = job->Snapshot();
  }
  if (info.state == JobState::kQueued) {
    absl::MutexLock lock(&mu_);
    info.queue_reason = QueueReasonLocked(*job);
  }
  return info;
}

absl::StatusOr<JobInfo> JobManager::Cancel(absl::string_view id) {
  std::optional<uint64_t> run;
  JobInfo snapshot;
  {
    absl::MutexLock lock(&mu_);
    EvictLocked(Now());
    std::shared_ptr<JobRecord> job = directory_.Find(id);
    if (job == nullptr) {
      return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
    }
    bool queued;
    {
      absl::MutexLock job_lock(&job->mu);
      queued = job->state == JobState::kQueued;
    }
    if (queued) CancelQueuedLocked(job, "cancelled by request");
    absl::MutexLock job_lock(&job->mu);
    if (job->state == JobState::kRunning) {
      if (!job->cancel_requested) {
        job->cancel_requested = true;
        job->cancel_reason = "cancelled by request";
      }
      run = job->run;
    } else if (job->state != JobState::kCancelled) {
      absl::Status s = CheckTransition(job->state, JobState::kCancelled);
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job->id, " is ", JobStateName(job->state),
                       " and can no longer be cancelled (", s.message(), ")"));
    }
    snapshot = job->Snapshot();
  }
  // Outside every lock: the executor calls back into this object.
  if (run) executor_->Cancel(*run);
  return snapshot;
}

absl::StatusOr<JobInfo> JobManager::WaitUntilTerminal(absl::string_view id,
                                                      absl::Time deadline) {
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<JobRecord> job, Find(id));
  JobRecord& r = *job;
  absl::MutexLock lock(&r.mu);
  auto terminal = [&r]() {
    r.mu.AssertHeld();
    return IsTerminal(r.state);
  };
  r.mu.AwaitWithDeadline(absl::Condition(&terminal), deadline);
  return r.Snapshot();
}

std::vector<JobInfo> JobManager::List(std::optional<JobState> state,
                                      int limit) {
  std::vector<std::pair<uint64_t, JobInfo>> found;
  {
    absl::MutexLock lock(&mu_);
    EvictLocked(Now());
    for (const auto& [id, job] : directory_.jobs()) {
      absl::MutexLock job_lock(&job->mu);
      if (state && job->state != *state) continue;
      found.emplace_back(job->seq, job->Snapshot());
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t first = 0;
  if (limit > 0 && found.size() > static_cast<size_t>(limit)) {
    first = found.size() - limit;
  }
  std::vector<JobInfo> jobs;
  jobs.reserve(found.size() - first);
  for (size_t i = first; i < found.size(); ++i) {
    jobs.push_back(std::move(found[i].second));
  }
  return jobs;
}

absl::StatusOr<std::unique_ptr<JobWatch>> JobManager::Watch(
    absl::string_view id) {
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<JobRecord> job, Find(id));
  return std::unique_ptr<JobWatch>(new JobWatch(std::move(job)));
}

absl::StatusOr<OutputBuffer> JobManager::ReadOutput(absl::string_view id,
                                                    absl::string_view buffer) {
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<JobRecord> job, Find(id));
  if (std::find(job->output_names.begin(), job->output_names.end(), buffer) ==
      job->output_names.end()) {
    return absl::NotFoundError(absl::StrCat(
        "job ", job->id, " has no output buffer '", buffer, "' (outputs: ",
        job->output_names.empty() ? "none"
                                  : absl::StrJoin(job->output_names, ", "),
        ")"));
  }
  absl::MutexLock lock(&job->mu);
  if (job->state != JobState::kSucceeded) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job->id, " is ", JobStateName(job->state),
                     "; output buffers can be read once it has SUCCEEDED"));
  }
  if (!job->outputs_released.empty()) {
    return absl::NotFoundError(absl::StrCat("job ", job->id, " succeeded but ",
                                            job->outputs_released));
  }
  auto it = job->outputs.find(buffer);
  if (it == job->outputs.end()) {
    return absl::InternalError(
        absl::StrCat("job ", job->id, " lost output buffer '", buffer, "'"));
  }
  return it->second;
}

absl::StatusOr<std::string> JobManager::TraceJson(absl::string_view id) {
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<JobRecord> job, Find(id));
  if (!job->untraced_reason.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job->id, " was not traced: ", job->untraced_reason));
  }
  std::shared_ptr<const runtime::RecordedTrace> trace;
  {
    absl::MutexLock lock(&job->mu);
    if (!IsTerminal(job->state)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job->id, " is ", JobStateName(job->state),
          "; its trace will be available once it has finished (SUCCEEDED, "
          "FAILED or CANCELLED)"));
    }
    trace = job->trace;
    if (trace == nullptr && !job->trace_released.empty()) {
      return absl::NotFoundError(absl::StrCat(
          "job ", job->id, " has no trace: ", job->trace_released));
    }
  }
  // Built and rendered outside the lock, on the caller's thread.
  if (trace == nullptr) {
    runtime::JobTrace empty;  // the job ran no work
    empty.name = job->graph_name;
    return runtime::ToTraceEventJson(empty);
  }
  return runtime::ToTraceEventJson(trace->Build());
}

void JobManager::StopAccepting() {
  absl::MutexLock lock(&mu_);
  admission_.StopAccepting();
}

bool JobManager::CancelQueuedLocked(const std::shared_ptr<JobRecord>& job,
                                    absl::string_view reason) {
  if (!DequeueLocked(*job)) return false;
  {
    absl::MutexLock job_lock(&job->mu);
    job->cancel_requested = true;
    job->cancel_reason = std::string(reason);
  }
  FinishLocked(job, absl::CancelledError(reason), "", {});
  return true;
}

int JobManager::CancelQueued(absl::string_view reason) {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const JobQueue::Entry& entry : queue_.TakeAll()) {
    std::shared_ptr<JobRecord> job = directory_.Find(entry.id);
    {
      absl::MutexLock job_lock(&job->mu);
      job->cancel_requested = true;
      job->cancel_reason = std::string(reason);
    }
    FinishLocked(job, absl::CancelledError(reason), "", {});
    ++n;
  }
  return n;
}

std::vector<std::string> JobManager::CancelRunning(absl::string_view reason) {
  std::vector<uint64_t> runs;
  std::vector<std::string> ids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, job] : running_) {
      absl::MutexLock job_lock(&job->mu);
      if (!job->cancel_requested) {
        job->cancel_requested = true;
        job->cancel_reason = std::string(reason);
      }
      if (job->run) runs.push_back(*job->run);
      ids.push_back(id);
    }
  }
  for (uint64_t run : runs) executor_->Cancel(run);
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool JobManager::WaitIdle(absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() {
    mu_.AssertHeld();
    return queue_.empty() && running_.empty();
  };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

int64_t JobManager::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

int64_t JobManager::retained() const {
  absl::MutexLock lock(&mu_);
  return directory_.size();
}

int64_t JobManager::running() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(running_.size());
}

std::vector<int64_t> JobManager::ReservedBytes() const {
  absl::MutexLock lock(&mu_);
  return reservations_.reserved();
}

}  // namespace weft::server
