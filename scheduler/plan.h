// A Plan: the planner's complete answer for one graph.
//
// For every node: its device, its logical stream (and, for a copy between
// devices, a peer stream on the source device), its direct predecessors
// (after transitive reduction), the events its stream waits on before it
// runs and the event it signals. Nodes are listed in issue order, a
// topological order: an executor that issues them in this order, honouring
// stream FIFO order and event waits, respects every dependency of the graph.
// Logical streams and events have dense ids from 0. Plans are plain values.
#ifndef WEFT_SCHEDULER_PLAN_H_
#define WEFT_SCHEDULER_PLAN_H_

#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "scheduler/graph.h"

namespace weft::scheduler {

struct PlannedStream {
  int id = 0;
  int device = 0;
  std::string label;
  Engine engine = Engine::kCompute;
};

// Most nodes have a few direct predecessors and at most one wait, so both
// lists keep up to four entries inline (no allocation; each list is the
// size of a std::vector).
struct PlannedNode {
  NodeId node = -1;
  int device = 0;
  int stream = 0;
  // Direct predecessors, transitively reduced.
  absl::InlinedVector<NodeId, 4> deps;
  // Waited on by `stream` before the node.
  absl::InlinedVector<int, 4> wait_events;
  int signal_event = -1;         // recorded after the node; -1 if unused
  // A COPY node moving data between devices also holds this copy stream on
  // the device its input comes from (-1: none). The node starts once both
  // its streams reach it, and both continue after it.
  int peer_stream = -1;
  double estimated_start_us = 0;  // the op itself, after any transfers
  double estimated_end_us = 0;
  // Time spent before the start bringing inputs up to date on the device.
  double estimated_transfer_us = 0;
};

struct Plan {
  std::vector<PlannedNode> nodes;  // issue order
  // By issue position, one line per node on why its device and its
  // stream; empty unless planned with PlannerOptions::explain. Kept apart
  // from the nodes, which plans made to be executed keep smaller.
  std::vector<std::string> reasons;
  std::vector<PlannedStream> streams;
  int num_events = 0;
  int num_devices = 0;
  double estimated_makespan_us = 0;
  double critical_path_us = 0;
  // max(critical path, device work / (devices * kernels per device)).
  double lower_bound_us = 0;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PLAN_H_
