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
//   - inputs move at the topology's bandwidth (topology.h): when a node
//     reaches the head of its stream with its waits satisfied, every buffer
//     it reads that is not up to date on its device is copied there from
//     the device that wrote it last (the host for initial data; a zero- or
//     fill-initialized buffer is created in place for free), occupying one
//     of the device's copy engines, before the node runs. A write leaves
//     the buffer up to date on the writer's device only;
//   - each device runs at most max_concurrent_kernels COMPUTE or COLLECTIVE
//     nodes at a time and copy_engines_per_device copies (transfers and
//     COPY nodes) at a time; HOST nodes run on the host and are limited only
//     by their streams;
//   - among nodes waiting for the same unit, the one issued first starts
//     first; all completions at one instant are applied before anything
//     new starts;
//   - a copy between devices (a node with a peer stream) is at the head of
//     both of its streams before it starts, and holds both streams and a
//     copy engine on each of the two devices while it runs; its inputs up
//     to date on the peer device need no transfer first (the copy itself
//     reads them there).
//
// So the makespan is never below the critical path (every dependency is
// honoured and transfers only add time) nor below the device work divided
// by the devices' kernel slots: the plan's lower bound
// max(critical path, device work / (devices * max_concurrent_kernels)).
#ifndef WEFT_SCHEDULER_COST_MODEL_H_
#define WEFT_SCHEDULER_COST_MODEL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"
#include "scheduler/topology.h"

namespace weft::scheduler {

// max(critical path, device work / (num_devices * kernels_per_device)).
double LowerBound(const CostLevels& levels, int num_devices,
                  int kernels_per_device = 1);

struct SimulationOptions {
  // Not owned; null: Topology::Default(plan->num_devices).
  const Topology* topology = nullptr;
  int max_concurrent_kernels = 1;
  int copy_engines_per_device = 2;
  // False: data is everywhere at no cost.
  bool model_transfers = true;
};

// A plan in compact form, by issue position: what the simulation reads.
struct Schedule {
  std::vector<NodeId> node;
  std::vector<int32_t> device;
  std::vector<int32_t> stream;
  std::vector<int32_t> signal;  // event recorded after the node, or -1
  Csr waits;                    // events waited on before the node
  // Copies between devices: each node's peer stream and that stream's
  // device (-1: none); both empty when no node has one.
  std::vector<int32_t> peer_stream;
  std::vector<int32_t> peer_device;
  int num_streams = 0;
  int num_events = 0;
  int num_devices = 1;
};

// What the simulation finds, by issue position.
struct ScheduleTimes {
  std::vector<double> start_us;     // the op itself, after its transfers
  std::vector<double> transfer_us;  // bringing its inputs to its device
  double makespan_us = 0;
};

// The simulation itself, on a compact schedule; errors as SimulatePlan.
absl::Status SimulateSchedule(const Graph& graph, const Schedule& schedule,
                              const SimulationOptions& options,
                              ScheduleTimes* times);

// Fills plan->estimates (a NodeEstimate per planned node) and
// plan->estimated_makespan_us. O((V + W + A) log V)
// for W event waits and A buffer arguments. INTERNAL if the plan is
// malformed or cannot run to completion; INVALID_ARGUMENT if the topology
// has fewer devices than the plan.
absl::Status SimulatePlan(const Graph& graph, Plan* plan,
                          const SimulationOptions& options = {});

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_COST_MODEL_H_
