// JobRecord: everything the daemon knows about one job, shared by the job
// manager (which moves it through its states) and the job's watches.
// Internal to server/.
//
// Fields above `mu` never change after admission. Lock order:
// JobManager::mu_ before JobRecord::mu. The state moves out of QUEUED only
// while JobManager::mu_ is held as well, so code holding JobManager::mu_ may
// rely on "QUEUED" meaning "in the queue".
#ifndef WEFT_SERVER_JOB_RECORD_H_
#define WEFT_SERVER_JOB_RECORD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/executor.h"
#include "runtime/plan_check.h"
#include "runtime/recorded_trace.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"
#include "scheduler/planner.h"
#include "server/job_event_log.h"
#include "server/job_info.h"
#include "server/job_state.h"

namespace weft::server {

struct JobRecord {
  std::string id;
  std::string graph_name;
  std::string request_id;
  std::string tenant;
  int32_t priority = 0;
  uint64_t seq = 0;
  absl::Time create_time;
  int64_t nodes_total = 0;
  // Bytes the job holds on each device while it runs (JobDeviceBytes).
  std::vector<int64_t> device_bytes;
  std::vector<std::string> output_names;
  scheduler::PlannerOptions planner_options;
  runtime::LaunchMode launch_mode = runtime::LaunchMode::kDefault;
  runtime::ControlMode control_mode = runtime::ControlMode::kAuto;
  // Why the job records no trace; empty when it records one.
  std::string untraced_reason;
  // Node events kept once the job is over and nobody watches it
  // (JobManager::Options::finished_job_events).
  int64_t finished_events = 0;

  mutable absl::Mutex mu;
  // Released once the job is terminal.
  std::shared_ptr<const scheduler::Graph> graph ABSL_GUARDED_BY(mu);
  // Made at admission; released once the job is terminal.
  std::shared_ptr<const scheduler::Plan> plan ABSL_GUARDED_BY(mu);
  // `graph` and `plan` as checked for the executor at admission; reset
  // with them.
  std::optional<runtime::CheckedPlan> checked ABSL_GUARDED_BY(mu);
  JobState state ABSL_GUARDED_BY(mu) = JobState::kQueued;
  absl::Status error ABSL_GUARDED_BY(mu);
  std::string failed_node ABSL_GUARDED_BY(mu);
  int64_t nodes_done ABSL_GUARDED_BY(mu) = 0;
  std::optional<absl::Time> start_time ABSL_GUARDED_BY(mu);
  std::optional<absl::Time> end_time ABSL_GUARDED_BY(mu);
  std::optional<uint64_t> run ABSL_GUARDED_BY(mu);
  bool cancel_requested ABSL_GUARDED_BY(mu) = false;
  std::string cancel_reason ABSL_GUARDED_BY(mu);
  // Bumped on every change a watcher can see (with Changed()).
  int64_t version ABSL_GUARDED_BY(mu) = 0;
  // Node events: the most recent JobManager::Options::max_job_events
  // while the job runs, trimmed to finished_events once it is terminal
  // and nobody watches it.
  JobEventLog events ABSL_GUARDED_BY(mu);
  int watchers ABSL_GUARDED_BY(mu) = 0;
  // The listeners of watches (JobWatch::SetListener), told of every version.
  std::vector<const std::function<void()>*> listeners ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, OutputBuffer> outputs ABSL_GUARDED_BY(mu);
  // The size of `outputs` while they are held; why they were released
  // (empty while held or never produced).
  int64_t output_bytes ABSL_GUARDED_BY(mu) = 0;
  std::string outputs_released ABSL_GUARDED_BY(mu);
  // Delivered by the executor just before the run ends, as recorded (built
  // when asked for); released with the job. Null for untraced jobs and jobs
  // that never reached the devices.
  std::shared_ptr<const runtime::RecordedTrace> trace ABSL_GUARDED_BY(mu);
  // The trace's size while it is held (RecordedTrace::ApproxBytes); why it
  // was released before the job (empty while held or never recorded).
  int64_t trace_bytes ABSL_GUARDED_BY(mu) = 0;
  std::string trace_released ABSL_GUARDED_BY(mu);

  // The job as it is now.
  JobInfo Snapshot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    JobInfo info;
    info.id = id;
    info.graph_name = graph_name;
    info.state = state;
    info.error = error;
    info.failed_node = failed_node;
    info.nodes_done = nodes_done;
    info.nodes_total = nodes_total;
    info.priority = priority;
    info.request_id = request_id;
    info.tenant = tenant;
    info.create_time = create_time;
    info.start_time = start_time;
    info.end_time = end_time;
    info.output_buffers = output_names;
    info.device_memory_bytes = device_bytes;
    return info;
  }

  // Records a change watchers can see and tells their listeners.
  void Changed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ++version;
    for (const std::function<void()>* listener : listeners) (*listener)();
  }

  // Trims the event log of a terminal job nobody watches to its last
  // finished_events.
  void MaybeDropEvents() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!IsTerminal(state) || watchers > 0) return;
    events.Trim(finished_events);
  }
};

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_RECORD_H_
