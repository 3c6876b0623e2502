// Plan::reasons: one line per node on why its device and its stream, as
// `weftctl plan` shows them (PlannerOptions::explain).
#ifndef WEFT_SCHEDULER_PLAN_REASONS_H_
#define WEFT_SCHEDULER_PLAN_REASONS_H_

#include <string>

#include "scheduler/device_policy.h"
#include "scheduler/graph.h"
#include "scheduler/passes/stream_context.h"
#include "scheduler/plan.h"
#include "scheduler/planner_options.h"

namespace weft::scheduler {

// Appends "device D (why)" to `out`.
void AppendDeviceReason(const Graph& graph, const PlannedNode& pn,
                        const DeviceChoice& choice,
                        const PlannerOptions& options, std::string* out);

// Appends "[kind ]stream S why" to `out`.
void AppendStreamReason(const Graph& graph, const PlannedNode& pn,
                        const LogicalStream& stream, const StreamChoice& choice,
                        const PlannerOptions& options, std::string* out);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PLAN_REASONS_H_
