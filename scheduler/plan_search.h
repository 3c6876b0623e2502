// The issue orders a plan is made in, and the default policy's search
// among them (docs/scheduling.md, "Device policies").
//
// An IssuePlan is one issue order of a graph, placed, with its streams,
// events and eager copies, and simulated on the cost model when asked.
// PlanSearch improves the plan LOOKAHEAD_FINISH_TIME makes of a graph in
// its submitted order: it also places the nodes by rank; on graphs of at
// most kMaxSearchedNodes nodes it then places them by earliest start
// (uploads queued in that order, EarliestStartOrder), searches perturbed
// orders
// (SearchOrders) and moves of nodes between devices (ImproveByMoves),
// stopping within kGoodEnough of the lower bound; and it reissues the plan
// it keeps in the order its simulation starts the nodes
// (IssueBySimulatedStart). Every choice is by the cost model's makespan and
// the same on every run.
#ifndef WEFT_SCHEDULER_PLAN_SEARCH_H_
#define WEFT_SCHEDULER_PLAN_SEARCH_H_

#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "common/thread_time.h"
#include "scheduler/cost_model.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/device_policy.h"
#include "scheduler/eager_copies.h"
#include "scheduler/graph.h"
#include "scheduler/passes/stream_context.h"
#include "scheduler/planner.h"
#include "scheduler/planner_options.h"
#include "scheduler/topology.h"

namespace weft::scheduler {

// The thread CPU clock of PlanProfile, read only when a profile is asked
// for: each read is a system call, and a job's plan of a few nodes takes
// less time than the thirty reads of a profiled plan.
class StageClock {
 public:
  explicit StageClock(PlanProfile* profile) : profile_(profile) {}
  double Now() const { return profile_ != nullptr ? ThreadSeconds() : 0; }
  // Where the stages' times go; null when nobody asked.
  PlanProfile* profile() const { return profile_; }

 private:
  PlanProfile* const profile_;
};

// One issue order of a graph, placed, with its streams and events, and
// simulated on the cost model when asked. Not thread-safe.
struct IssuePlan {
  // Places `dag_in`'s nodes (in context.walk_order, if set), reissues them
  // by estimated start if `issue_by_start`, and plans the streams.
  absl::Status Make(const Graph& graph, Dag dag_in, const CostLevels& levels,
                    const DevicePolicy& policy, const DeviceContext& context,
                    const PlannerOptions& options, const Topology& topology,
                    bool simulate, PlanProfile& profile,
                    const StageClock& clock, bool issue_by_start = false);
  // Fills `times` from the cost model.
  absl::Status Simulate(const Graph& graph, const Topology& topology,
                        const PlannerOptions& options);

  // Heap-held: the stream context refers to the dag.
  std::unique_ptr<Dag> dag;
  DeviceAssignment devices;  // its devices moved into `streams`
  std::unique_ptr<StreamContext> streams;
  std::vector<PlannedCopy> copies;  // eager copies, by ascending `before`
  ScheduleTimes times;
};

// The default policy's search for a plan that finishes earlier. Holds
// references only; not thread-safe.
class PlanSearch {
 public:
  PlanSearch(const Graph& graph, const CostLevels& levels,
             const DevicePolicy& policy, const DeviceContext& context,
             const PlannerOptions& options, const Topology& topology,
             PlanProfile& profile, const StageClock& clock);

  // Whether the search runs on `dag` (an IssuePlan's) under `options`:
  // LOOKAHEAD_FINISH_TIME without a memory-aware order, on a graph small
  // enough to place again that has more than one order.
  static bool Applies(const PlannerOptions& options, const Dag& dag);

  // Replaces `chosen` (placed in the submitted order) by the plan the cost
  // model finishes first among those tried. `lower_bound_us` gives the
  // graph's lower bound (it does not depend on the issue order); it is
  // called only on graphs the search places more than twice.
  absl::Status Run(absl::FunctionRef<double()> lower_bound_us,
                   IssuePlan& chosen);

 private:
  // Places `dag` into `out` as `context` says, simulated.
  absl::Status Place(Dag dag, const DeviceContext& context, bool issue_by_start,
                     IssuePlan& out) const;
  // These place nodes as `base` says (eager copies or not), varying
  // their order or devices.
  absl::Status SearchOrders(const DeviceContext& base, double good_enough,
                            double close_enough, int budget_share,
                            IssuePlan& chosen) const;
  absl::Status ImproveByMoves(const DeviceContext& base, double good_enough,
                              IssuePlan& chosen) const;
  absl::Status IssueBySimulatedStart(const DeviceContext& base,
                                     IssuePlan& chosen) const;

  const Graph& graph_;
  const CostLevels& levels_;
  const DevicePolicy& policy_;
  const DeviceContext& context_;
  const PlannerOptions& options_;
  const Topology& topology_;
  PlanProfile& profile_;
  const StageClock& clock_;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PLAN_SEARCH_H_
