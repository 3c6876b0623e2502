// Brute-force checks of the invariants every Plan must hold. For tests:
// O(V^2) time and bits, independent of the planner's own algorithms.
//
//   - the plan lists every node once, in a topological order of its deps;
//   - deps are exactly the transitive reduction of the graph's dependencies
//     (pairwise buffer conflicts in node order, plus `after`);
//   - stream ids and event ids are dense from 0; every stream is used and
//     lies on its nodes' device; a peer stream (COPY nodes only) lies on
//     another device; every event is signalled once, by a node issued
//     before its waiters, on none of their streams, and waited on;
//   - every dependency is implied by the order of either stream of the
//     node or an event wait (happens-before), and no wait is implied by
//     the streams' history and the node's other waits;
//   - the critical path is the longest cost-weighted path;
//   - where the plan was simulated (it has estimates; a job's plan has
//     none), estimated times honour every dependency and stream order; the
//     makespan is at least the last node's end (outputs then go to the
//     host), and the lower bound is at least the critical path and the
//     occupancy-weighted kernel work over the devices, and at most the
//     makespan.
#ifndef WEFT_SCHEDULER_PLAN_VERIFIER_H_
#define WEFT_SCHEDULER_PLAN_VERIFIER_H_

#include <vector>

#include "absl/status/status.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::scheduler {

// Transitively reduced dependencies of every node, by brute force; each
// list sorted by NodeId.
std::vector<std::vector<NodeId>> ReferenceDependencies(const Graph& graph);

// OK, or FAILED_PRECONDITION describing the first broken invariant.
absl::Status VerifyPlan(const Graph& graph, const Plan& plan);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PLAN_VERIFIER_H_
