// One job run to its end on an executor, timed as a daemon times it: from
// Executor::Start to the job's end being reported (on_done). For the
// benchmarks that compare executed jobs with their plans.
//
// Thread-safe as the executor is.
#ifndef WEFT_RUNTIME_TIMED_JOB_H_
#define WEFT_RUNTIME_TIMED_JOB_H_

#include <memory>

#include "runtime/executor.h"
#include "runtime/trace.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::runtime {

// Runs `plan` of `graph` on `executor` and waits for it to end: its wall
// time in microseconds, or -1 if it could not start or failed (said on
// stderr). `trace`, if not null, receives the job's trace.
double RunTimedJob(Executor& executor,
                   std::shared_ptr<const scheduler::Graph> graph,
                   std::shared_ptr<const scheduler::Plan> plan,
                   const JobOptions& options, JobTrace* trace = nullptr);

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_TIMED_JOB_H_
