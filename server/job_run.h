// The executor callbacks of one job's run (runtime::JobCallbacks): node
// events go into the job's record (with the node's device and stream from
// the plan) and to the metrics, the trace is kept with the job unless it
// is untraced, and the run's end goes to `finish` with the failed node's
// name. Events after the job is terminal are dropped.
#ifndef WEFT_SERVER_JOB_RUN_H_
#define WEFT_SERVER_JOB_RUN_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/executor.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"
#include "server/job_record.h"
#include "server/metrics.h"

namespace weft::server {

using RunFinishFn = std::function<void(
    absl::Status status, std::string failed_node, runtime::HostBuffers)>;

// `metrics` is not null; `clock` stamps the events.
runtime::JobCallbacks MakeRunCallbacks(
    std::shared_ptr<JobRecord> job,
    std::shared_ptr<const scheduler::Graph> graph,
    std::shared_ptr<const scheduler::Plan> plan, Metrics* metrics,
    std::function<absl::Time()> clock, RunFinishFn finish);

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_RUN_H_
