#include "runtime/timed_job.h"

#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace weft::runtime {

double RunTimedJob(Executor& executor,
                   std::shared_ptr<const scheduler::Graph> graph,
                   std::shared_ptr<const scheduler::Plan> plan,
                   const JobOptions& options, JobTrace* trace) {
  absl::Notification done;
  absl::Status status;
  absl::Time ended;
  JobCallbacks callbacks;
  // Built once the job has ended, off the executor's scheduling thread.
  std::shared_ptr<const RecordedTrace> recorded;
  if (trace != nullptr) {
    callbacks.on_trace = [&recorded](std::shared_ptr<const RecordedTrace> t) {
      recorded = std::move(t);
    };
  }
  callbacks.on_done = [&](absl::Status s, scheduler::NodeId, HostBuffers) {
    ended = absl::Now();
    status = std::move(s);
    done.Notify();
  };
  // Checked before the clock starts, as weftd checks a job's plan when it
  // admits the job.
  absl::StatusOr<CheckedPlan> checked =
      CheckPlan(std::move(graph), std::move(plan), executor.device_count());
  if (!checked.ok()) {
    std::fprintf(stderr, "bad plan: %s\n", checked.status().ToString().c_str());
    return -1;
  }
  const absl::Time started = absl::Now();
  const absl::StatusOr<uint64_t> job =
      executor.Start(*std::move(checked), std::move(callbacks), options);
  if (!job.ok()) {
    std::fprintf(stderr, "start failed: %s\n", job.status().ToString().c_str());
    return -1;
  }
  done.WaitForNotification();
  if (recorded != nullptr) *trace = recorded->Build();
  if (!status.ok()) {
    std::fprintf(stderr, "job failed: %s\n", status.ToString().c_str());
    return -1;
  }
  return absl::ToDoubleMicroseconds(ended - started);
}

}  // namespace weft::runtime
