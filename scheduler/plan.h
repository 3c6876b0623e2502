// A Plan: the planner's complete answer for one graph.
//
// For every node: its device, its logical stream (and, for a copy between
// devices, a peer stream on the source device), its direct predecessors
// (after transitive reduction), the events its stream waits on before it
// runs and the event it signals. Nodes are listed in issue order, a
// topological order: an executor that issues them in this order, honouring
// stream FIFO order and event waits, respects every dependency of the graph.
// Logical streams and events have dense ids from 0. Plans are plain values.
//
// Layout: the per-node lists (predecessors, waits) are two compressed row
// lists indexed by issue position, and the simulated times and the reasons
// are kept apart, present only when asked for; a plan made to be executed
// holds 20 bytes per node plus its lists.
#ifndef WEFT_SCHEDULER_PLAN_H_
#define WEFT_SCHEDULER_PLAN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/csr.h"
#include "scheduler/graph.h"

namespace weft::scheduler {

struct PlannedStream {
  int id = 0;
  int device = 0;
  std::string label;
  Engine engine = Engine::kCompute;
};

// One node's placement. Its lists are in Plan::deps and Plan::waits.
struct PlannedNode {
  NodeId node = -1;
  int device = 0;
  int stream = 0;
  int signal_event = -1;  // recorded after the node; -1 if unused
  // A COPY node moving data between devices also holds this copy stream on
  // the device its input comes from (-1: none). The node starts once both
  // its streams reach it, and both continue after it.
  int peer_stream = -1;
};

// One node's times in the cost model's simulation of the plan.
struct NodeEstimate {
  double start_us = 0;  // the op itself, after any transfers
  double end_us = 0;
  // Time spent before the start bringing inputs up to date on the device.
  double transfer_us = 0;
};

// One device's arena (scheduler/memory/arena_planner.h).
struct DeviceMemory {
  int device = 0;
  int64_t arena_bytes = 0;
  int64_t peak_live_bytes = 0;    // along issue order
  int64_t lower_bound_bytes = 0;  // no arena for this plan is smaller
  int64_t budget_bytes = 0;       // 0: none
  int64_t spilled_bytes = 0;
  int32_t orderings_added = 0;
  bool budget_clamped = false;  // budget_bytes is the device's memory
};

// An eager copy between devices: the node at issue position `after` wrote
// `buffer` on its own device and records `event`; the node at `before`
// reads it on `device`. Issued just before that reader, on `stream`, one
// of `device`'s COPY streams, the copy waits on `event` alone, and the
// reader waits for the copy: the bytes cross as soon as they are written,
// while the reader's other inputs are still being made
// (scheduler/eager_copies.h).
struct PlannedCopy {
  int32_t after = 0;
  int32_t before = 0;
  BufferId buffer = -1;
  int device = 0;
  int stream = 0;
  int event = 0;
  friend bool operator==(const PlannedCopy& a, const PlannedCopy& b) {
    return a.after == b.after && a.before == b.before && a.buffer == b.buffer &&
           a.device == b.device && a.stream == b.stream && a.event == b.event;
  }
};

// Where the copy of a buffer on a device lies in the device's arena.
struct PlannedBuffer {
  BufferId buffer = -1;
  int device = 0;
  int64_t offset = 0;
  int64_t size_bytes = 0;
};

struct Plan {
  std::vector<PlannedNode> nodes;  // issue order
  // Rows by issue position: the node's direct predecessors (NodeIds),
  // transitively reduced, ascending.
  Csr deps;
  // Rows by issue position: the events the node's stream waits on before
  // it, ascending.
  Csr waits;
  // By issue position; empty unless the plan was simulated
  // (PlannerOptions::simulate, SimulatePlan).
  std::vector<NodeEstimate> estimates;
  // By issue position, one line per node on why its device and its
  // stream; empty unless planned with PlannerOptions::explain.
  std::vector<std::string> reasons;
  std::vector<PlannedStream> streams;
  int num_events = 0;
  int num_devices = 0;
  double estimated_makespan_us = 0;
  double critical_path_us = 0;
  // max(critical path, device work / (devices * kernels per device)).
  double lower_bound_us = 0;
  // Eager copies between devices, by ascending `before`; their streams are
  // in `streams` and their events count in `num_events`.
  std::vector<PlannedCopy> copies;
  // By device, and every buffer copy's place; empty unless the plan was
  // simulated (PlannerOptions::simulate).
  std::vector<DeviceMemory> memory;
  std::vector<PlannedBuffer> buffers;
  // By NodeId: the plans of a control node's bodies (ControlSpec::bodies,
  // in order), planned once with the same options and reused every
  // iteration; empty for other nodes, and empty as a whole when the graph
  // has no control node.
  std::vector<std::vector<std::shared_ptr<const Plan>>> bodies;
  // Set when the planner added spills and fills to fit memory budgets
  // (scheduler/spill_fitting.h): the graph this is a plan of, which holds
  // the submitted buffers and nodes (in issue order, renumbered) and the
  // spill and fill nodes. Null: the plan is of the graph it was made for.
  std::shared_ptr<const Graph> graph;

  int num_nodes() const { return static_cast<int>(nodes.size()); }
  // The lists of the node at issue position i.
  absl::Span<const NodeId> Deps(int i) const { return deps.Row(i); }
  absl::Span<const int32_t> Waits(int i) const { return waits.Row(i); }
  // The simulated times of the node at issue position i; all 0 when the
  // plan was not simulated.
  NodeEstimate Estimate(int i) const {
    return static_cast<size_t>(i) < estimates.size() ? estimates[i]
                                                     : NodeEstimate();
  }
  // The eager copies issued just before the node at issue position i.
  absl::Span<const PlannedCopy> CopiesBefore(int i) const;
  // The largest arena of any device (0 without a memory plan).
  int64_t LargestArenaBytes() const;
  // Appends a node in issue order with its lists (how plans are built by
  // hand, e.g. in tests).
  void AddNode(const PlannedNode& node, absl::Span<const NodeId> node_deps,
               absl::Span<const int32_t> node_waits);
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PLAN_H_
