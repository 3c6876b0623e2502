// JobManager's run ends and dispatch (job_manager.h): finishing jobs,
// and the dispatch thread that starts queued jobs as running ones end.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/plan_check.h"
#include "runtime/trace.h"
#include "scheduler/memory/memory_plan.h"
#include "scheduler/plan.h"
#include "scheduler/status_macros.h"
#include "server/devices.h"
#include "server/job_manager.h"
#include "server/job_record.h"
#include "server/job_run.h"

namespace weft::server {

namespace {

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

}  // namespace

// ----------------------------------------------------- finish and dispatch --

void JobManager::Finish(const std::shared_ptr<JobRecord>& job,
                        absl::Status status, std::string failed_node,
                        runtime::HostBuffers outputs) {
  absl::MutexLock lock(&mu_);
  FinishLocked(job, std::move(status), std::move(failed_node),
               std::move(outputs));
}

void JobManager::RunEnded(const std::shared_ptr<JobRecord>& job,
                          absl::Status status, std::string failed_node,
                          runtime::HostBuffers outputs) {
  std::vector<std::shared_ptr<JobRecord>> start;
  {
    absl::MutexLock lock(&mu_);
    FinishLocked(job, std::move(status), std::move(failed_node),
                 std::move(outputs));
    start = TakeStartableLocked(/*quick_only=*/true);
    if (!start.empty()) UpdateGaugesLocked();
  }
  for (const std::shared_ptr<JobRecord>& next : start) StartJob(next);
}

void JobManager::FinishLocked(const std::shared_ptr<JobRecord>& job,
                              absl::Status status, std::string failed_node,
                              runtime::HostBuffers outputs) {
  const absl::Time now = Now();
  JobState to;
  int64_t kept_bytes = 0;
  int64_t kept_trace_bytes = 0;
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
        out.data = std::make_shared<const runtime::HostBuffer>(
            std::move(outputs.find(name)->second));
        // What the job holds: its outputs' stored bytes.
        job->output_bytes += static_cast<int64_t>(out.data->stored_bytes());
        job->outputs.emplace(name, std::move(out));
      }
    }
    kept_bytes = job->output_bytes;
    kept_trace_bytes = job->trace_bytes;
    started = job->start_time.has_value();
    run_time = started ? now - *job->start_time : absl::ZeroDuration();
    // Counted before the state is published, so that whoever sees the job
    // end also sees it counted.
    metrics_->JobFinished(OutcomeLabel(to), job->tenant, run_time);
    job->state = to;
    job->error = status;
    job->failed_node = std::move(failed_node);
    job->end_time = now;
    job->graph.reset();
    job->plan.reset();
    job->checked.reset();
    job->Changed();
    job->MaybeDropEvents();
  }
  if (started) admission_.RecordRunTime(run_time);
  if (running_.erase(job->id) > 0) {
    queue_.Finished(job->tenant);
    reservations_.Release(job->device_bytes);
  }
  retention_.Add(job, now, kept_bytes, kept_trace_bytes);
  EvictLocked(now);
  UpdateGaugesLocked();
}

bool JobManager::CanDispatchLocked() const {
  if (shutdown_) return true;
  if (!queue_.startable() ||
      static_cast<int64_t>(running_.size()) >= max_running_jobs_) {
    return false;
  }
  // The next job waits for memory unless it fits or would run alone.
  return running_.empty() ||
         reservations_.Fits(directory_.Find(*queue_.PeekId())->device_bytes);
}

std::shared_ptr<JobRecord> JobManager::BesideWaitingLocked() const {
  if (shutdown_ || running_.empty() ||
      static_cast<int64_t>(running_.size()) + 1 >= max_running_jobs_) {
    return nullptr;
  }
  if (beside_.valid && beside_.queue_version == queue_.version() &&
      beside_.reservations_version == reservations_.version() &&
      beside_.running == running_.size()) {
    return beside_.job;
  }
  beside_.valid = true;
  beside_.queue_version = queue_.version();
  beside_.reservations_version = reservations_.version();
  beside_.running = running_.size();
  beside_.job = nullptr;
  const std::string* next = queue_.PeekId();
  if (next == nullptr) return nullptr;
  const std::shared_ptr<JobRecord> waiting = directory_.Find(*next);
  if (waiting == nullptr || reservations_.Fits(waiting->device_bytes)) {
    return nullptr;
  }
  for (const std::string* id : queue_.OtherTenantsNext()) {
    std::shared_ptr<JobRecord> job = directory_.Find(*id);
    if (job != nullptr &&
        reservations_.FitsBeside(waiting->device_bytes, job->device_bytes)) {
      beside_.job = job;
      return job;
    }
  }
  return nullptr;
}

bool JobManager::CanStartAnyLocked() const {
  return CanDispatchLocked() || BesideWaitingLocked() != nullptr;
}

std::vector<std::shared_ptr<JobRecord>> JobManager::TakeStartableLocked(
    bool quick_only) {
  std::vector<std::shared_ptr<JobRecord>> taken;
  if (shutdown_) return taken;
  const absl::Time now = Now();
  while (true) {
    std::shared_ptr<JobRecord> job;
    if (CanDispatchLocked()) {
      job = directory_.Find(*queue_.PeekId());
    } else {
      job = BesideWaitingLocked();
      if (job == nullptr) break;
    }
    if (quick_only && (job->nodes_total > kMaxStartedOnRunEndNodes ||
                       job->planner_options.device_policy ==
                           scheduler::DevicePolicyKind::kStreamAware)) {
      break;
    }
    queue_.PopTenant(job->tenant);
    running_[job->id] = job;
    reservations_.Reserve(job->device_bytes);
    {
      absl::MutexLock job_lock(&job->mu);
      job->state = JobState::kRunning;
      job->start_time = now;
      job->Changed();
    }
    metrics_->ObserveQueueWait(now - job->create_time);
    taken.push_back(std::move(job));
  }
  return taken;
}

std::string JobManager::QueueReasonLocked(const JobRecord& job) const {
  {
    absl::MutexLock job_lock(&job.mu);
    if (job.state != JobState::kQueued) return "";
  }
  if (shutdown_) return "weftd is shutting down";
  const int64_t running = static_cast<int64_t>(running_.size());
  if (running >= max_running_jobs_) {
    return absl::StrCat("waiting for a running slot: ", running, " of ",
                        max_running_jobs_, " jobs run");
  }
  const std::string* next = queue_.PeekId();
  if (next == nullptr || *next != job.id) {
    const int64_t limit = queue_.max_running_per_tenant();
    const int64_t own = queue_.running(job.tenant);
    if (limit > 0 && own >= limit) {
      return absl::StrCat("waiting for its tenant's jobs: the tenant runs ",
                          own, " jobs, as many as one tenant may");
    }
    if (next == nullptr) return "waiting for its turn";
    const std::shared_ptr<JobRecord> head = directory_.Find(*next);
    if (head != nullptr && !running_.empty() &&
        !reservations_.Fits(head->device_bytes)) {
      return absl::StrCat("behind job ", *next,
                          ", which waits for device memory");
    }
    return absl::StrCat("behind job ", *next, ", which starts next");
  }
  const int d = reservations_.FirstShort(job.device_bytes);
  if (d >= 0 && !running_.empty()) {
    return absl::StrCat("waiting for device memory: it needs ",
                        job.device_bytes[d], " bytes on device ", d,
                        ", where running jobs hold ", reservations_.reserved(d),
                        " of ", reservations_.capacity(d));
  }
  return "starting";
}

void JobManager::DispatchLoop() {
  while (true) {
    std::vector<std::shared_ptr<JobRecord>> start;
    {
      absl::MutexLock lock(&mu_);
      while (!CanStartAnyLocked()) {
        if (retain_for_ == absl::InfiniteDuration()) {
          mu_.Await(absl::Condition(this, &JobManager::CanStartAnyLocked));
          continue;
        }
        // Finished jobs expire even when nobody calls in. The wait is capped
        // because the clock may not be the real one.
        const absl::Duration until =
            std::min(retention_.UntilNextExpiry(Now()), absl::Seconds(1));
        if (!mu_.AwaitWithTimeout(
                absl::Condition(this, &JobManager::CanStartAnyLocked),
                until + absl::Milliseconds(1))) {
          EvictLocked(Now());
        }
      }
      if (shutdown_) return;
      start = TakeStartableLocked();
      UpdateGaugesLocked();
    }
    for (const std::shared_ptr<JobRecord>& job : start) StartJob(job);
  }
}

void JobManager::StartJob(const std::shared_ptr<JobRecord>& job) {
  std::shared_ptr<const scheduler::Graph> graph;
  std::shared_ptr<const scheduler::Plan> plan;
  std::optional<runtime::CheckedPlan> checked;
  {
    absl::MutexLock lock(&job->mu);
    graph = job->graph;
    plan = job->plan;
    checked = job->checked;
  }
  if (graph == nullptr || plan == nullptr) return;  // finished already

  if (job->planner_options.device_policy ==
      scheduler::DevicePolicyKind::kStreamAware) {
    // The one load-aware policy: plan again against the load of now.
    scheduler::PlannerOptions options = job->planner_options;
    options.busy_streams = BusyStreams(*executor_, options.num_devices);
    if (options.busy_streams != job->planner_options.busy_streams) {
      const absl::Time plan_start = absl::Now();
      absl::StatusOr<scheduler::Plan> replanned = PlanJob(*graph, options);
      metrics_->ObservePlanning(absl::Now() - plan_start);
      if (!replanned.ok()) {
        Finish(job, replanned.status(), "", {});
        return;
      }
      if (replanned->graph != nullptr && replanned->graph != graph) {
        graph = replanned->graph;
        absl::MutexLock lock(&job->mu);
        job->graph = graph;
      }
      plan = std::make_shared<const scheduler::Plan>(*std::move(replanned));
      checked.reset();  // checked by Start
    }
  }

  runtime::JobCallbacks callbacks =
      MakeRunCallbacks(job, graph, plan, metrics_.get(), clock_,
                       [this, job](absl::Status status, std::string failed_node,
                                   runtime::HostBuffers outputs) {
                         RunEnded(job, std::move(status),
                                  std::move(failed_node), std::move(outputs));
                       });

  std::optional<std::string> cancelled;
  {
    absl::MutexLock lock(&job->mu);
    if (job->cancel_requested) cancelled = job->cancel_reason;
  }
  if (cancelled) {
    Finish(job, absl::CancelledError(*cancelled), "", {});
    return;
  }
  const runtime::JobOptions options{job->launch_mode, job->control_mode};
  absl::StatusOr<uint64_t> run =
      checked.has_value()
          ? executor_->Start(*std::move(checked), std::move(callbacks), options)
          : executor_->Start(graph, plan, std::move(callbacks), options);
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
