// Wire conversions of planning: weft.v1.ScheduleOptions -> PlannerOptions
// and Plan -> weft.v1.Plan. The only place the planner meets the wire
// format; the server calls them at its edge.
#ifndef WEFT_SCHEDULER_PLAN_PROTO_H_
#define WEFT_SCHEDULER_PLAN_PROTO_H_

#include "absl/status/statusor.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"
#include "scheduler/planner_options.h"
#include "weft/v1/weft.pb.h"

namespace weft::scheduler {

// INVALID_ARGUMENT naming the field for options out of range.
absl::StatusOr<PlannerOptions> PlannerOptionsFromProto(
    const weft::v1::ScheduleOptions& proto, int num_devices,
    int default_max_streams_per_device);

// `plan` of `graph`, with the plans of control nodes' bodies (BodyPlan).
weft::v1::Plan PlanToProto(const Graph& graph, const Plan& plan);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PLAN_PROTO_H_
