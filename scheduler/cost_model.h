// Cost model: critical path, work, lower bound and a simulated makespan.
//
// Costs are NodeSpec::cost_us, each node's estimated time with its engine
// to itself. CostLevels are static: they look at dependencies only.
// SimulatePlan is a deterministic discrete-event simulation of a Plan:
//
//   - every logical stream is a FIFO: a node starts only after the node
//     before it on its stream has finished;
//   - a node starts only after the signalling node of each event it waits
//     on has finished;
//   - each device runs one COMPUTE or COLLECTIVE node at a time and one COPY
//     node at a time (the cost is the node's time with the device's compute
//     units, or its copy engine, to itself); HOST nodes run on the host and
//     are limited only by their streams;
//   - among nodes ready for the same unit, the one issued first starts
//     first.
//
// So the makespan is never below the critical path (every dependency is
// honoured) nor below the device work divided by the number of devices (no
// device overlaps two COMPUTE/COLLECTIVE nodes): the plan's lower bound
// max(critical path, device work / devices).
#ifndef WEFT_SCHEDULER_COST_MODEL_H_
#define WEFT_SCHEDULER_COST_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::scheduler {

struct CostLevels {
  // By NodeId: the longest cost-weighted path from a source to the node's
  // start (its earliest start on unlimited hardware).
  std::vector<double> top_us;
  // By NodeId: the longest cost-weighted path from the node's start to the
  // end of a sink, the node's own cost included (its rank).
  std::vector<double> bottom_us;
  // By NodeId: the longest path to a sink counted in edges (ties in rank).
  std::vector<int32_t> bottom_hops;
  double critical_path_us = 0;
  double total_work_us = 0;   // every node
  double device_work_us = 0;  // COMPUTE and COLLECTIVE nodes
};

// O(V + E). Thread-safe (stateless).
CostLevels ComputeCostLevels(const Graph& graph, const Dag& dag);

// max(critical path, device work / num_devices).
double LowerBound(const CostLevels& levels, int num_devices);

// Fills estimated_start_us / estimated_end_us of every planned node and
// plan->estimated_makespan_us. O((V + W) log V) for W event waits.
// INTERNAL if the plan is malformed or cannot run to completion.
absl::Status SimulatePlan(const Graph& graph, Plan* plan);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_COST_MODEL_H_
