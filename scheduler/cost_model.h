// Cost model: critical path, work, lower bound and a simulated makespan.
//
// Costs are NodeSpec::cost_us, each node's estimated time with its engine
// to itself. CostLevels are static: they look at dependencies only.
// SimulatePlan runs a Plan on a model of the machine, issuing its nodes in
// plan order exactly as the executor (runtime/job.h) issues them to a
// backend, and booking each piece of work as the simulated backend
// (runtime/sim) books it, so that a plan's estimate is what a simulated
// device runs:
//
//   - every logical stream is a FIFO: work is ready once the work before
//     it on its stream and the events it waits on have finished (a wait on
//     an event whose node is issued later is an error);
//   - before the first node, every buffer with initial data whose first use
//     in issue order is on a device is uploaded to that device, in that
//     order, on one upload stream per device; its users wait for it;
//   - before a node runs, each buffer it uses (in argument order, each
//     once) is made current in its memory (its device, or the host for a
//     HOST node) on the node's stream: a buffer that exists nowhere yet is
//     created there (an upload from the host for initial data; zero- and
//     fill-initialized buffers are free, and so is another copy of one that
//     nothing has written yet), one current there already is waited for if
//     another stream readied it, and otherwise it is copied from the memory
//     of its latest writer, taking bytes / bandwidth from
//     the topology (topology.h). A write leaves the buffer current only
//     where it was written;
//   - each device has one kernel capacity (occupancy.h): COMPUTE and
//     COLLECTIVE nodes share it by occupancy, at most
//     max_concurrent_kernels at a time; and three copy engines, each
//     running copy_engines_per_device copies at a time: host-to-device
//     (uploads into the device), device-to-host (downloads from it) and
//     device-to-device (copies into it from another device, and COPY nodes
//     on it). HOST nodes run on the host, limited only by their streams;
//   - an eager copy (Plan::copies) is issued just before its reader: on
//     its COPY stream, after that stream's earlier work and its writer's
//     event, it moves the buffer from its latest version's device to its
//     own on that device's device-to-device engine, and readers on other
//     streams wait for it;
//   - a copy between devices (a node with a peer stream) starts after the
//     work issued before it on its peer stream, and work issued later there
//     runs after it;
//   - every kernel and copy is booked in issue order, at the earliest time
//     at or after it is ready at which its unit has room for its whole
//     duration, filling gaps left by earlier bookings;
//   - once every node is issued, each output buffer last written on a
//     device is downloaded to the host (in buffer order), after the work of
//     the stream that wrote it. The makespan ends with the last of them.
//
// So the makespan is never below the plan's lower bound (lower_bound.h).
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

struct SimulationOptions {
  // Not owned; null: Topology::Default(plan->num_devices).
  const Topology* topology = nullptr;
  // Kernels one device runs at once (its hardware work queues), however
  // small their occupancy.
  int max_concurrent_kernels = 32;
  // Copies each copy engine of a device runs at once.
  int copy_engines_per_device = 1;
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
  // Eager copies between devices, by ascending `before` (plan.h).
  std::vector<PlannedCopy> copies;
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
// plan->estimated_makespan_us. O(V + W + A) bookings for W event waits
// and A buffer arguments, each a search of its unit's timeline. INTERNAL if the
// plan is malformed or cannot run to completion; INVALID_ARGUMENT if the
// topology has fewer devices than the plan.
absl::Status SimulatePlan(const Graph& graph, Plan* plan,
                          const SimulationOptions& options = {});

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_COST_MODEL_H_
