#include "server/job_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/timestamp.pb.h"
#include "scheduler/plan.h"
#include "runtime/trace.h"
#include "scheduler/status_macros.h"
#include "server/retry_hint.h"

namespace weft::server {

// Everything known about one job. Fields above `mu` never change after
// Submit. Lock order: JobManager::mu_ before JobRecord::mu. The state moves
// out of QUEUED only while JobManager::mu_ is held as well, so code holding
// JobManager::mu_ may rely on "QUEUED" meaning "in the queue".
struct JobRecord {
  std::string id;
  std::string graph_name;
  std::string request_id;
  std::string tenant;
  int32_t priority = 0;
  uint64_t seq = 0;
  absl::Time create_time;
  int64_t nodes_total = 0;
  std::vector<std::string> output_names;
  scheduler::PlannerOptions planner_options;
  runtime::LaunchMode launch_mode = runtime::LaunchMode::kDefault;
  // Why the job records no trace; empty when it records one.
  std::string untraced_reason;

  mutable absl::Mutex mu;
  // Released once the job is terminal.
  std::shared_ptr<const scheduler::Graph> graph ABSL_GUARDED_BY(mu);
  // Made at admission; released once the job is terminal.
  std::shared_ptr<const scheduler::Plan> plan ABSL_GUARDED_BY(mu);
  JobState state ABSL_GUARDED_BY(mu) = JobState::kQueued;
  absl::Status error ABSL_GUARDED_BY(mu);
  std::string failed_node ABSL_GUARDED_BY(mu);
  int64_t nodes_done ABSL_GUARDED_BY(mu) = 0;
  std::optional<absl::Time> start_time ABSL_GUARDED_BY(mu);
  std::optional<absl::Time> end_time ABSL_GUARDED_BY(mu);
  std::optional<uint64_t> run ABSL_GUARDED_BY(mu);
  bool cancel_requested ABSL_GUARDED_BY(mu) = false;
  std::string cancel_reason ABSL_GUARDED_BY(mu);
  // Bumped on every change a watcher can see.
  int64_t version ABSL_GUARDED_BY(mu) = 0;
  // Node events; events[i] has absolute index events_base + i. Dropped once
  // the job is terminal and nobody watches it.
  std::vector<weft::v1::NodeEvent> events ABSL_GUARDED_BY(mu);
  int64_t events_base ABSL_GUARDED_BY(mu) = 0;
  int watchers ABSL_GUARDED_BY(mu) = 0;
  // The listeners of watches (JobWatch::SetListener), told of every version.
  std::vector<const std::function<void()>*> listeners ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, OutputBuffer> outputs ABSL_GUARDED_BY(mu);
  // The size of `outputs` while they are held; why they were released
  // (empty while held or never produced).
  int64_t output_bytes ABSL_GUARDED_BY(mu) = 0;
  std::string outputs_released ABSL_GUARDED_BY(mu);
  // Delivered by the executor just before the run ends; released with the
  // job. Null for untraced jobs and jobs that never reached the devices.
  std::shared_ptr<const runtime::JobTrace> trace ABSL_GUARDED_BY(mu);
};

namespace {

// What the executor callbacks of one run need to describe nodes.
struct RunContext {
  std::shared_ptr<const scheduler::Graph> graph;
  std::shared_ptr<const scheduler::Plan> plan;
  std::vector<int> device;  // by node id
  std::vector<int> stream;  // by node id
};

void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t nanos = absl::ToUnixNanos(t);
  int64_t seconds = nanos / 1'000'000'000;
  int64_t rest = nanos % 1'000'000'000;
  if (rest < 0) {
    rest += 1'000'000'000;
    --seconds;
  }
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(rest));
}

weft::v1::Job Snapshot(const JobRecord& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r.mu) {
  weft::v1::Job job;
  job.set_id(r.id);
  job.set_graph_name(r.graph_name);
  job.set_state(JobStateToProto(r.state));
  if (!r.error.ok()) {
    job.mutable_error()->set_code(static_cast<int32_t>(r.error.code()));
    job.mutable_error()->set_message(std::string(r.error.message()));
    job.mutable_error()->set_node(r.failed_node);
  }
  job.set_nodes_done(r.nodes_done);
  job.set_nodes_total(r.nodes_total);
  job.set_priority(r.priority);
  job.set_request_id(r.request_id);
  job.set_tenant(r.tenant);
  SetTimestamp(r.create_time, job.mutable_create_time());
  if (r.start_time) SetTimestamp(*r.start_time, job.mutable_start_time());
  if (r.end_time) SetTimestamp(*r.end_time, job.mutable_end_time());
  for (const std::string& name : r.output_names) job.add_output_buffers(name);
  return job;
}

int64_t EventsEnd(const JobRecord& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r.mu) {
  return r.events_base + static_cast<int64_t>(r.events.size());
}

// Tells the watch listeners that `r.version` moved.
void NotifyListeners(const JobRecord& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r.mu) {
  for (const std::function<void()>* listener : r.listeners) (*listener)();
}

// Drops the event log of a terminal job nobody watches.
void MaybeDropEvents(JobRecord& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r.mu) {
  if (!IsTerminal(r.state) || r.watchers > 0) return;
  r.events_base = EventsEnd(r);
  r.events.clear();
  r.events.shrink_to_fit();
}

std::string RequestKey(absl::string_view tenant, absl::string_view request_id) {
  return absl::StrCat(tenant, "\x1f", request_id);
}

absl::string_view OutcomeLabel(JobState s) {
  switch (s) {
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    default:
      return "cancelled";
  }
}

weft::v1::NodeEventKind EventKindToProto(runtime::NodeEventKind kind) {
  switch (kind) {
    case runtime::NodeEventKind::kStarted:
      return weft::v1::NODE_STARTED;
    case runtime::NodeEventKind::kFinished:
      return weft::v1::NODE_FINISHED;
    case runtime::NodeEventKind::kFailed:
      return weft::v1::NODE_FAILED;
  }
  return weft::v1::NODE_EVENT_KIND_UNSPECIFIED;
}

}  // namespace

// ------------------------------------------------------------ job states --

absl::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "QUEUED";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kCancelled:
      return "CANCELLED";
  }
  return "UNKNOWN";
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

weft::v1::JobState JobStateToProto(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return weft::v1::QUEUED;
    case JobState::kRunning:
      return weft::v1::RUNNING;
    case JobState::kSucceeded:
      return weft::v1::SUCCEEDED;
    case JobState::kFailed:
      return weft::v1::FAILED;
    case JobState::kCancelled:
      return weft::v1::CANCELLED;
  }
  return weft::v1::JOB_STATE_UNSPECIFIED;
}

absl::StatusOr<JobState> JobStateFromProto(weft::v1::JobState state) {
  switch (state) {
    case weft::v1::QUEUED:
      return JobState::kQueued;
    case weft::v1::RUNNING:
      return JobState::kRunning;
    case weft::v1::SUCCEEDED:
      return JobState::kSucceeded;
    case weft::v1::FAILED:
      return JobState::kFailed;
    case weft::v1::CANCELLED:
      return JobState::kCancelled;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("state: not a job state: ", static_cast<int>(state)));
  }
}

absl::Status CheckTransition(JobState from, JobState to) {
  bool legal = false;
  switch (from) {
    case JobState::kQueued:
      legal = to == JobState::kRunning || to == JobState::kCancelled ||
              to == JobState::kFailed;
      break;
    case JobState::kRunning:
      legal = IsTerminal(to);
      break;
    default:
      legal = false;  // terminal states are final
  }
  if (legal) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "illegal job state transition ", JobStateName(from), " -> ",
      JobStateName(to)));
}

// -------------------------------------------------------------- JobWatch --

JobWatch::JobWatch(std::shared_ptr<JobRecord> job) : job_(std::move(job)) {
  absl::MutexLock lock(&job_->mu);
  ++job_->watchers;
  // A job that is over is reported as it ended, without its history.
  next_event_ = IsTerminal(job_->state) ? EventsEnd(*job_) : job_->events_base;
}

JobWatch::~JobWatch() {
  ClearListener();
  absl::MutexLock lock(&job_->mu);
  --job_->watchers;
  MaybeDropEvents(*job_);
}

void JobWatch::SetListener(std::function<void()> on_change) {
  absl::MutexLock lock(&job_->mu);
  if (!listener_) job_->listeners.push_back(&listener_);
  listener_ = std::move(on_change);
}

void JobWatch::ClearListener() {
  absl::MutexLock lock(&job_->mu);
  if (!listener_) return;
  std::vector<const std::function<void()>*>& all = job_->listeners;
  all.erase(std::find(all.begin(), all.end(), &listener_));
  listener_ = nullptr;
}

WatchUpdate JobWatch::Next(absl::Time deadline, int max_events) {
  WatchUpdate update;
  JobRecord& job = *job_;
  absl::MutexLock lock(&job.mu);
  if (first_) {
    first_ = false;
    seen_version_ = job.version;
    update.job = Snapshot(job);
    update.changed = true;
    update.done = IsTerminal(job.state) && next_event_ >= EventsEnd(job);
    return update;
  }
  auto ready = [this, &job]() {
    job.mu.AssertHeld();
    return job.version > seen_version_ || next_event_ < EventsEnd(job);
  };
  job.mu.AwaitWithDeadline(absl::Condition(&ready), deadline);
  update.job = Snapshot(job);
  if (!ready()) {
    update.done = IsTerminal(job.state) && next_event_ >= EventsEnd(job);
    return update;
  }
  next_event_ = std::max(next_event_, job.events_base);
  const int64_t end =
      std::min(EventsEnd(job), next_event_ + std::max(max_events, 1));
  for (int64_t i = next_event_; i < end; ++i) {
    update.events.push_back(job.events[i - job.events_base]);
  }
  next_event_ = end;
  seen_version_ = job.version;
  update.changed = true;
  update.done = IsTerminal(job.state) && next_event_ >= EventsEnd(job);
  return update;
}

// ------------------------------------------------------------ JobManager --

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(
    Options options) {
  if (options.executor == nullptr) {
    return absl::InvalidArgumentError("JobManager needs an executor");
  }
  if (options.max_queued_jobs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queued_jobs must be >= 1, got ",
                     options.max_queued_jobs));
  }
  if (options.max_running_jobs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_running_jobs must be >= 1, got ",
                     options.max_running_jobs));
  }
  if (options.retain_jobs < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "retain_jobs must be >= 0, got ", options.retain_jobs));
  }
  if (options.retain_output_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "retain_output_bytes must be >= 0, got ", options.retain_output_bytes));
  }
  if (options.max_running_per_tenant < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_running_per_tenant must be >= 0, got ",
        options.max_running_per_tenant));
  }
  if (options.max_queued_per_tenant < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_queued_per_tenant must be >= 0, got ",
        options.max_queued_per_tenant));
  }
  if (options.trace_max_nodes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace_max_nodes must be >= 0, got ", options.trace_max_nodes));
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
  manager->dispatcher_ = std::thread([m = manager.get()] { m->DispatchLoop(); });
  return manager;
}

JobManager::JobManager(Options options)
    : executor_(options.executor),
      metrics_(options.metrics),
      max_queued_jobs_(options.max_queued_jobs),
      max_queued_per_tenant_(options.max_queued_per_tenant == 0
                                 ? options.max_queued_jobs
                                 : options.max_queued_per_tenant),
      max_running_jobs_(options.max_running_jobs),
      retain_jobs_(options.retain_jobs),
      retain_output_bytes_(options.retain_output_bytes),
      retain_for_(options.retain_for),
      min_retry_delay_(options.min_retry_delay),
      max_retry_delay_(options.max_retry_delay),
      clock_(std::move(options.clock)),
      trace_jobs_(options.trace_jobs),
      trace_max_nodes_(options.trace_max_nodes),
      queue_(options.max_running_per_tenant > 0
                 ? options.max_running_per_tenant
                 : std::max(1, options.max_running_jobs - 1)) {
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

std::string JobManager::NewJobIdLocked() {
  while (true) {
    std::string id = absl::StrFormat(
        "j-%016x", absl::Uniform<uint64_t>(bitgen_));
    if (!jobs_.contains(id)) return id;
  }
}

std::shared_ptr<JobRecord> JobManager::FindLocked(absl::string_view id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second;
}

absl::StatusOr<std::shared_ptr<JobRecord>> JobManager::Find(
    absl::string_view id) {
  absl::MutexLock lock(&mu_);
  EvictLocked(Now());
  std::shared_ptr<JobRecord> job = FindLocked(id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
  }
  return job;
}

void JobManager::UpdateGaugesLocked() {
  if (metrics_ == nullptr) return;
  metrics_->SetQueueDepth(queue_.size());
  metrics_->SetRetainedOutputBytes(retained_output_bytes_);
  metrics_->SetJobsRunning(static_cast<int64_t>(running_.size()));
}

void JobManager::EvictLocked(absl::Time now) {
  bool evicted = false;
  while (!finished_.empty() &&
         (static_cast<int64_t>(finished_.size()) > retain_jobs_ ||
          finished_.front().first + retain_for_ <= now)) {
    const std::string id = std::move(finished_.front().second);
    finished_.pop_front();
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    JobRecord& job = *it->second;
    {
      // A watcher or a reader may still hold the record; the trace and
      // the outputs go now (a reader keeps what it is streaming).
      absl::MutexLock job_lock(&job.mu);
      job.trace.reset();
      retained_output_bytes_ -= job.output_bytes;
      job.output_bytes = 0;
      job.outputs.clear();
    }
    if (!job.request_id.empty()) {
      auto rit = request_ids_.find(RequestKey(job.tenant, job.request_id));
      if (rit != request_ids_.end() && rit->second == id) {
        request_ids_.erase(rit);
      }
    }
    jobs_.erase(it);
    evicted = true;
  }
  if (evicted) UpdateGaugesLocked();
}

void JobManager::ReleaseOutputsLocked() {
  while (retained_output_bytes_ > retain_output_bytes_ &&
         !holding_outputs_.empty()) {
    const std::string id = std::move(holding_outputs_.front());
    holding_outputs_.pop_front();
    std::shared_ptr<JobRecord> job = FindLocked(id);
    if (job == nullptr) continue;  // evicted, bytes already returned
    absl::MutexLock job_lock(&job->mu);
    if (job->output_bytes == 0) continue;
    retained_output_bytes_ -= job->output_bytes;
    job->output_bytes = 0;
    job->outputs.clear();
    job->outputs_released = absl::StrCat(
        "its outputs were released to keep the outputs of finished jobs "
        "within ",
        retain_output_bytes_, " bytes (weftd --retain_output_bytes)");
  }
  UpdateGaugesLocked();
}

std::optional<weft::v1::Job> JobManager::DuplicateLocked(
    const JobSpec& spec) const {
  if (spec.request_id.empty()) return std::nullopt;
  auto it = request_ids_.find(RequestKey(spec.tenant, spec.request_id));
  if (it == request_ids_.end()) return std::nullopt;
  std::shared_ptr<JobRecord> original = FindLocked(it->second);
  if (original == nullptr) return std::nullopt;
  absl::MutexLock job_lock(&original->mu);
  return Snapshot(*original);
}

absl::Duration JobManager::RetryDelayLocked(int turns) const {
  // A queue slot frees when a running job ends: with R jobs running for T
  // each on average, about every T / R.
  absl::Duration delay = absl::Milliseconds(100);
  if (mean_run_time_ > absl::ZeroDuration()) {
    delay = mean_run_time_ /
            std::max<int64_t>(1, static_cast<int64_t>(running_.size()));
  }
  delay *= std::max(1, turns);
  return std::clamp(delay, min_retry_delay_, max_retry_delay_);
}

absl::Status JobManager::CheckAdmissionLocked(const JobSpec& spec) {
  absl::Status rejection;
  if (!accepting_) {
    rejection =
        absl::UnavailableError("weftd is shutting down and accepts no new jobs");
  } else if (queue_.size() >= max_queued_jobs_) {
    rejection = WithRetryDelay(
        absl::ResourceExhaustedError(absl::StrFormat(
            "admission queue is full (%d jobs queued, %d running); retry "
            "later",
            queue_.size(), running_.size())),
        RetryDelayLocked(1));
  } else {
    const int64_t mine = queue_.queued(spec.tenant);
    if (mine >= max_queued_per_tenant_) {
      rejection = WithRetryDelay(
          absl::ResourceExhaustedError(absl::StrFormat(
              "tenant '%s' has %d jobs queued, the most one tenant may "
              "queue; retry later",
              spec.tenant, mine)),
          RetryDelayLocked(queue_.tenants_waiting()));
    }
  }
  if (!rejection.ok() && metrics_ != nullptr) {
    metrics_->JobRejected(absl::StatusCodeToString(rejection.code()),
                          spec.tenant);
  }
  return rejection;
}

std::vector<int> JobManager::BusyStreams(int num_devices) const {
  std::vector<int> busy;
  for (const runtime::DeviceLoad& load : executor_->Load()) {
    busy.push_back(load.streams_busy);
  }
  if (static_cast<int>(busy.size()) != num_devices) busy.clear();
  return busy;
}

absl::StatusOr<weft::v1::Job> JobManager::Submit(JobSpec spec) {
  if (spec.graph == nullptr) {
    return absl::InvalidArgumentError("graph: missing");
  }
  {
    // Cheap answers first, so that an overloaded daemon does not plan
    // graphs it will turn away.
    absl::MutexLock lock(&mu_);
    EvictLocked(Now());
    if (std::optional<weft::v1::Job> original = DuplicateLocked(spec)) {
      return *std::move(original);
    }
    WEFT_RETURN_IF_ERROR(CheckAdmissionLocked(spec));
  }

  // Plan outside the lock, on the caller's thread: bad options are the
  // caller's error, reported before anything is created.
  spec.planner_options.busy_streams =
      BusyStreams(spec.planner_options.num_devices);
  spec.planner_options.explain = false;
  spec.planner_options.simulate = false;
  const absl::Time plan_start = absl::Now();
  absl::StatusOr<scheduler::Plan> plan =
      scheduler::PlanGraph(*spec.graph, spec.planner_options);
  if (metrics_ != nullptr) metrics_->ObservePlanning(absl::Now() - plan_start);
  if (!plan.ok()) return plan.status();

  const absl::Time now = Now();
  absl::MutexLock lock(&mu_);
  // Everything may have changed while planning.
  if (std::optional<weft::v1::Job> original = DuplicateLocked(spec)) {
    return *std::move(original);
  }
  WEFT_RETURN_IF_ERROR(CheckAdmissionLocked(spec));
  if (absl::Now() >= spec.deadline) {
    if (metrics_ != nullptr) {
      metrics_->JobRejected("DEADLINE_EXCEEDED", spec.tenant);
    }
    return absl::DeadlineExceededError(
        "the submission's deadline passed before it was admitted; no job was "
        "created");
  }
  if (spec.cancelled && spec.cancelled()) {
    if (metrics_ != nullptr) metrics_->JobRejected("CANCELLED", spec.tenant);
    return absl::CancelledError(
        "the submission was cancelled before it was admitted; no job was "
        "created");
  }

  auto job = std::make_shared<JobRecord>();
  job->id = NewJobIdLocked();
  job->graph_name = spec.graph->name();
  job->request_id = std::move(spec.request_id);
  job->tenant = std::move(spec.tenant);
  job->priority = spec.priority;
  job->seq = next_seq_++;
  job->create_time = now;
  job->nodes_total = spec.graph->num_nodes();
  for (const scheduler::BufferSpec& b : spec.graph->buffers()) {
    if (b.output) job->output_names.push_back(b.name);
  }
  job->planner_options = std::move(spec.planner_options);
  job->launch_mode = spec.launch_mode;
  if (!trace_jobs_) {
    job->untraced_reason = "weftd runs with --trace_jobs=false";
  } else if (job->nodes_total > trace_max_nodes_) {
    job->untraced_reason = absl::StrCat(
        "it has ", job->nodes_total, " nodes, more than --trace_max_nodes=",
        trace_max_nodes_, " allows");
  }
  weft::v1::Job snapshot;
  {
    absl::MutexLock job_lock(&job->mu);
    job->graph = std::move(spec.graph);
    job->plan = std::make_shared<const scheduler::Plan>(*std::move(plan));
    snapshot = Snapshot(*job);
  }
  jobs_[job->id] = job;
  if (!job->request_id.empty()) {
    request_ids_[RequestKey(job->tenant, job->request_id)] = job->id;
  }
  EnqueueLocked(job);
  if (metrics_ != nullptr) metrics_->JobSubmitted(job->tenant);
  UpdateGaugesLocked();
  return snapshot;
}

// ----------------------------------------------------------------- queue --

void JobManager::EnqueueLocked(const std::shared_ptr<JobRecord>& job) {
  queue_.Push({job->id, job->tenant, job->priority, job->seq});
}

bool JobManager::DequeueLocked(const JobRecord& job) {
  return queue_.Remove(job.tenant, job.priority, job.seq);
}

std::shared_ptr<JobRecord> JobManager::PopNextLocked() {
  std::optional<JobQueue::Entry> next = queue_.Pop();
  return FindLocked(next->id);
}

absl::StatusOr<weft::v1::Job> JobManager::Get(absl::string_view id) {
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<JobRecord> job, Find(id));
  absl::MutexLock lock(&job->mu);
  return Snapshot(*job);
}

absl::StatusOr<weft::v1::Job> JobManager::Cancel(absl::string_view id) {
  std::optional<uint64_t> run;
  weft::v1::Job snapshot;
  {
    absl::MutexLock lock(&mu_);
    EvictLocked(Now());
    std::shared_ptr<JobRecord> job = FindLocked(id);
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
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job->id, " is ", JobStateName(job->state),
          " and can no longer be cancelled (", s.message(), ")"));
    }
    snapshot = Snapshot(*job);
  }
  // Outside every lock: the executor calls back into this object.
  if (run) executor_->Cancel(*run);
  return snapshot;
}

absl::StatusOr<weft::v1::Job> JobManager::WaitUntilTerminal(
    absl::string_view id, absl::Time deadline) {
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<JobRecord> job, Find(id));
  JobRecord& r = *job;
  absl::MutexLock lock(&r.mu);
  auto terminal = [&r]() {
    r.mu.AssertHeld();
    return IsTerminal(r.state);
  };
  r.mu.AwaitWithDeadline(absl::Condition(&terminal), deadline);
  return Snapshot(r);
}

std::vector<weft::v1::Job> JobManager::List(std::optional<JobState> state,
                                            int limit) {
  std::vector<std::pair<uint64_t, weft::v1::Job>> found;
  {
    absl::MutexLock lock(&mu_);
    EvictLocked(Now());
    for (const auto& [id, job] : jobs_) {
      absl::MutexLock job_lock(&job->mu);
      if (state && job->state != *state) continue;
      found.emplace_back(job->seq, Snapshot(*job));
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t first = 0;
  if (limit > 0 && found.size() > static_cast<size_t>(limit)) {
    first = found.size() - limit;
  }
  std::vector<weft::v1::Job> jobs;
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

absl::StatusOr<OutputBuffer> JobManager::ReadOutput(
    absl::string_view id, absl::string_view buffer) {
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
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job->id, " is ", JobStateName(job->state),
        "; output buffers can be read once it has SUCCEEDED"));
  }
  if (!job->outputs_released.empty()) {
    return absl::NotFoundError(absl::StrCat("job ", job->id, " succeeded but ",
                                            job->outputs_released));
  }
  auto it = job->outputs.find(buffer);
  if (it == job->outputs.end()) {
    return absl::InternalError(absl::StrCat(
        "job ", job->id, " lost output buffer '", buffer, "'"));
  }
  return it->second;
}

absl::StatusOr<std::string> JobManager::TraceJson(absl::string_view id) {
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<JobRecord> job, Find(id));
  if (!job->untraced_reason.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job->id, " was not traced: ", job->untraced_reason));
  }
  std::shared_ptr<const runtime::JobTrace> trace;
  {
    absl::MutexLock lock(&job->mu);
    if (!IsTerminal(job->state)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job->id, " is ", JobStateName(job->state),
          "; its trace will be available once it has finished (SUCCEEDED, "
          "FAILED or CANCELLED)"));
    }
    trace = job->trace;
  }
  // Rendered outside the lock, on the caller's thread.
  if (trace == nullptr) {
    runtime::JobTrace empty;  // the job ran no work
    empty.name = job->graph_name;
    return runtime::ToTraceEventJson(empty);
  }
  return runtime::ToTraceEventJson(*trace);
}

void JobManager::StopAccepting() {
  absl::MutexLock lock(&mu_);
  accepting_ = false;
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
    std::shared_ptr<JobRecord> job = FindLocked(entry.id);
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
  return static_cast<int64_t>(jobs_.size());
}

int64_t JobManager::running() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(running_.size());
}

void JobManager::Finish(const std::shared_ptr<JobRecord>& job,
                        absl::Status status, std::string failed_node,
                        runtime::HostBuffers outputs) {
  absl::MutexLock lock(&mu_);
  FinishLocked(job, std::move(status), std::move(failed_node),
               std::move(outputs));
}

void JobManager::FinishLocked(const std::shared_ptr<JobRecord>& job,
                              absl::Status status, std::string failed_node,
                              runtime::HostBuffers outputs) {
  const absl::Time now = Now();
  JobState to;
  absl::Duration run_time;
  bool started = false;
  {
    absl::MutexLock job_lock(&job->mu);
    if (IsTerminal(job->state)) return;
    if (status.ok()) {
      // Every output must have come back; anything else is a runtime bug.
      for (const std::string& name : job->output_names) {
        if (!outputs.contains(name)) {
          status = absl::InternalError(absl::StrCat(
              "the executor returned no data for output buffer '", name, "'"));
          break;
        }
      }
    }
    if (status.ok()) {
      to = JobState::kSucceeded;
    } else if (job->cancel_requested ||
               status.code() == absl::StatusCode::kCancelled) {
      to = JobState::kCancelled;
      if (!job->cancel_reason.empty()) {
        status = absl::CancelledError(job->cancel_reason);
      }
    } else {
      to = JobState::kFailed;
    }
    absl::Status legal = CheckTransition(job->state, to);
    if (!legal.ok()) {
      // QUEUED -> SUCCEEDED cannot be produced above; keep the job honest
      // anyway rather than skipping a state.
      to = JobState::kFailed;
      status = absl::InternalError(legal.message());
    }
    if (to == JobState::kSucceeded) {
      for (const std::string& name : job->output_names) {
        OutputBuffer out;
        scheduler::BufferId b = job->graph->FindBuffer(name);
        if (b >= 0) out.dtype = job->graph->buffer(b).dtype;
        out.data = std::make_shared<const std::string>(
            std::move(outputs.find(name)->second));
        job->output_bytes += static_cast<int64_t>(out.data->size());
        job->outputs.emplace(name, std::move(out));
      }
      retained_output_bytes_ += job->output_bytes;
    }
    started = job->start_time.has_value();
    run_time = started ? now - *job->start_time : absl::ZeroDuration();
    // Counted before the state is published, so that whoever sees the job
    // end also sees it counted.
    if (metrics_ != nullptr) {
      metrics_->JobFinished(OutcomeLabel(to), job->tenant, run_time);
    }
    job->state = to;
    job->error = status;
    job->failed_node = std::move(failed_node);
    job->end_time = now;
    job->graph.reset();
    job->plan.reset();
    ++job->version;
    NotifyListeners(*job);
    MaybeDropEvents(*job);
  }
  if (started) {
    mean_run_time_ = mean_run_time_ == absl::ZeroDuration()
                         ? run_time
                         : (mean_run_time_ * 7 + run_time) / 8;
  }
  if (running_.erase(job->id) > 0) queue_.Finished(job->tenant);
  finished_.emplace_back(now, job->id);
  holding_outputs_.push_back(job->id);
  EvictLocked(now);
  ReleaseOutputsLocked();
  UpdateGaugesLocked();
}

bool JobManager::CanDispatchLocked() const {
  return shutdown_ ||
         (queue_.startable() &&
          static_cast<int64_t>(running_.size()) < max_running_jobs_);
}

absl::Duration JobManager::UntilNextEvictionLocked(absl::Time now) const {
  if (finished_.empty() || retain_for_ == absl::InfiniteDuration()) {
    return absl::InfiniteDuration();
  }
  return std::max(absl::ZeroDuration(),
                  finished_.front().first + retain_for_ - now);
}

void JobManager::DispatchLoop() {
  while (true) {
    std::shared_ptr<JobRecord> job;
    {
      absl::MutexLock lock(&mu_);
      while (!CanDispatchLocked()) {
        if (retain_for_ == absl::InfiniteDuration()) {
          mu_.Await(absl::Condition(this, &JobManager::CanDispatchLocked));
          continue;
        }
        // Finished jobs expire even when nobody calls in. The wait is capped
        // because the clock may not be the real one.
        const absl::Duration until =
            std::min(UntilNextEvictionLocked(Now()), absl::Seconds(1));
        if (!mu_.AwaitWithTimeout(
                absl::Condition(this, &JobManager::CanDispatchLocked),
                until + absl::Milliseconds(1))) {
          EvictLocked(Now());
        }
      }
      if (shutdown_) return;
      job = PopNextLocked();
      running_[job->id] = job;
      const absl::Time now = Now();
      {
        absl::MutexLock job_lock(&job->mu);
        job->state = JobState::kRunning;
        job->start_time = now;
        ++job->version;
        NotifyListeners(*job);
      }
      if (metrics_ != nullptr) metrics_->ObserveQueueWait(now - job->create_time);
      UpdateGaugesLocked();
    }
    StartJob(job);
  }
}

void JobManager::StartJob(const std::shared_ptr<JobRecord>& job) {
  std::shared_ptr<const scheduler::Graph> graph;
  std::shared_ptr<const scheduler::Plan> plan;
  {
    absl::MutexLock lock(&job->mu);
    graph = job->graph;
    plan = job->plan;
  }
  if (graph == nullptr || plan == nullptr) return;  // finished already

  if (job->planner_options.device_policy ==
      scheduler::DevicePolicyKind::kStreamAware) {
    // The one load-aware policy: plan again against the load of now.
    scheduler::PlannerOptions options = job->planner_options;
    options.busy_streams = BusyStreams(options.num_devices);
    if (options.busy_streams != job->planner_options.busy_streams) {
      const absl::Time plan_start = absl::Now();
      absl::StatusOr<scheduler::Plan> replanned =
          scheduler::PlanGraph(*graph, options);
      if (metrics_ != nullptr) {
        metrics_->ObservePlanning(absl::Now() - plan_start);
      }
      if (!replanned.ok()) {
        Finish(job, replanned.status(), "", {});
        return;
      }
      plan = std::make_shared<const scheduler::Plan>(*std::move(replanned));
    }
  }

  auto ctx = std::make_shared<RunContext>();
  ctx->graph = graph;
  ctx->plan = std::move(plan);
  ctx->device.assign(graph->num_nodes(), -1);
  ctx->stream.assign(graph->num_nodes(), -1);
  for (const scheduler::PlannedNode& n : ctx->plan->nodes) {
    if (n.node >= 0 && n.node < graph->num_nodes()) {
      ctx->device[n.node] = n.device;
      ctx->stream[n.node] = n.stream;
    }
  }

  runtime::JobCallbacks callbacks;
  callbacks.on_node = [this, job, ctx](scheduler::NodeId node,
                                       runtime::NodeEventKind kind,
                                       const absl::Status& status) {
    if (node < 0 || node >= ctx->graph->num_nodes()) return;
    const scheduler::NodeSpec& spec = ctx->graph->node(node);
    weft::v1::NodeEvent event;
    event.set_node(spec.name);
    event.set_kind(EventKindToProto(kind));
    event.set_device(ctx->device[node]);
    event.set_stream(ctx->stream[node]);
    SetTimestamp(Now(), event.mutable_time());
    if (!status.ok()) event.set_message(status.ToString());
    {
      absl::MutexLock lock(&job->mu);
      if (IsTerminal(job->state)) return;
      if (kind == runtime::NodeEventKind::kFinished) ++job->nodes_done;
      job->events.push_back(std::move(event));
      ++job->version;
      NotifyListeners(*job);
    }
    if (metrics_ != nullptr && kind == runtime::NodeEventKind::kFinished) {
      metrics_->NodeExecuted(spec.op, ctx->device[node]);
    }
  };
  callbacks.on_done = [this, job, ctx](absl::Status status,
                                       scheduler::NodeId failed_node,
                                       runtime::HostBuffers outputs) {
    std::string failed;
    if (failed_node >= 0 && failed_node < ctx->graph->num_nodes()) {
      failed = ctx->graph->node(failed_node).name;
    }
    Finish(job, std::move(status), std::move(failed), std::move(outputs));
  };

  if (job->untraced_reason.empty()) {
    callbacks.on_trace = [job](runtime::JobTrace trace) {
      auto kept = std::make_shared<const runtime::JobTrace>(std::move(trace));
      absl::MutexLock lock(&job->mu);
      job->trace = std::move(kept);
    };
  }

  std::optional<std::string> cancelled;
  {
    absl::MutexLock lock(&job->mu);
    if (job->cancel_requested) cancelled = job->cancel_reason;
  }
  if (cancelled) {
    Finish(job, absl::CancelledError(*cancelled), "", {});
    return;
  }
  absl::StatusOr<uint64_t> run =
      executor_->Start(graph, ctx->plan, std::move(callbacks),
                       runtime::JobOptions{job->launch_mode});
  if (!run.ok()) {
    Finish(job, run.status(), "", {});
    return;
  }
  bool cancel;
  {
    absl::MutexLock lock(&job->mu);
    job->run = *run;
    cancel = job->cancel_requested && !IsTerminal(job->state);
  }
  if (cancel) executor_->Cancel(*run);
}

}  // namespace weft::server
