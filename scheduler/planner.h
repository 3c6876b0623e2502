// The planner: Graph -> Plan.
//
// Pipeline: dependency inference (dependency_inference.h) -> device
// selection (device_policy.h, over a Topology and a data-location model)
// -> stream passes and event planning (passes/stream_pipeline.h) -> a
// discrete-event simulation of the plan (cost_model.h) and memory planning
// (memory/memory_plan.h: an arena per device), unless options.simulate is
// false (options.plan_memory plans memory anyway), then spills and fills
// where an arena exceeds its budget (spill_fitting.h: Plan::graph). With
// options.memory_order kMemoryAware the nodes are issued in a memory-aware
// order (memory/memory_order.h). With the default device
// policy (LOOKAHEAD_FINISH_TIME) and the submitted order, a graph of at
// most 65536 nodes with more than one topological order is also placed in
// HEFT's rank order and issued by the placement's estimated starts, and the
// plan keeps whichever of the two issue orders the cost model finishes
// first (both are simulated, job plans too). Pure computation:
// no threads, no devices, no I/O. No V x V structure: time and memory grow
// linearly with the graph, times the number of streams for the vector
// clocks of event planning; plan_benchmark.cc measures it.
#ifndef WEFT_SCHEDULER_PLANNER_H_
#define WEFT_SCHEDULER_PLANNER_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"
#include "scheduler/planner_options.h"  // IWYU pragma: export

namespace weft::scheduler {

// Thread-safe (stateless). Errors: INVALID_ARGUMENT for options a graph
// cannot satisfy (e.g. a stream label in SINGLE mode, a pin at or beyond
// num_devices) or that are invalid themselves (fewer than one device or
// more than 63, fewer than one stream per device, busy_streams not one entry
// per device, a topology with fewer devices, a data threshold outside
// [0, 1], max_nodes_per_stream of 1 or 2, fewer than one kernel slot or
// copy engine), naming the field. Plans list nodes in issue order; with
// options.explain plan.reasons says why each node has its device and stream,
// and with options.simulate each node has its estimated times.
absl::StatusOr<Plan> PlanGraph(const Graph& graph,
                               const PlannerOptions& options);

// The plan of a control node's body (ControlSpec::bodies) whose control
// node is planned on `device`: on that device alone when
// options.bodies_on_one_device and the body pins no node, otherwise as a
// graph of its own. PlanGraph plans every body this way (Plan::bodies).
absl::StatusOr<Plan> PlanBody(const Graph& body, const PlannerOptions& options,
                              int device);

// Seconds of the calling thread's CPU time spent in each stage of one
// PlanGraph call.
struct PlanProfile {
  double dependencies_s = 0;  // inference, reduction, cost levels
  double devices_s = 0;
  double streams_s = 0;  // stream passes and events
  std::vector<std::pair<std::string, double>> passes_s;  // each pass
  double simulation_s = 0;
  double bound_s = 0;    // the lower bound, where the search stops at it
  double explain_s = 0;  // writing the Plan out, with reasons if asked
  double memory_s = 0;   // lifetimes and arenas (scheduler/memory)
  // Orders the search placed after the first plan (an order it had placed
  // already from the same plan is not placed again).
  int orders_placed = 0;
};

// PlanGraph that also reports where the time went. `profile` may be null;
// then no clock is read.
absl::StatusOr<Plan> PlanGraph(const Graph& graph,
                               const PlannerOptions& options,
                               PlanProfile* profile);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PLANNER_H_
