// How large a plan's wire form (weft.v1.Plan, PlanToProto) is at least,
// known before planning: so that a service can refuse a plan it could not
// send without spending the CPU and memory to make it.
//
// The count is a lower bound on the encoded size: per node, the
// PlannedNode's framing and its name, its signal_event (every node but at
// most one has a nonzero one), with `explain` a reason of at least
// kMinReasonBytes, and with `simulate` an end time for every node of
// positive cost. Linear in the number of nodes; no allocation.
#ifndef WEFT_SCHEDULER_PLAN_SIZE_H_
#define WEFT_SCHEDULER_PLAN_SIZE_H_

#include <cstdint>

#include "scheduler/graph.h"
#include "scheduler/planner_options.h"
#include "weft/v1/weft.pb.h"

namespace weft::scheduler {

inline constexpr int64_t kMinReasonBytes = 16;

int64_t PlanProtoBytesAtLeast(const Graph& graph,
                              const PlannerOptions& options);
// The same from the graph's wire form, before it is built (and so before
// it is validated: a graph that is refused later may be counted).
int64_t PlanProtoBytesAtLeast(const weft::v1::Graph& graph,
                              const PlannerOptions& options);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PLAN_SIZE_H_
