// Stream assignment and event planning: the stream pass pipeline
// (passes/stream_pipeline.h) applied to a plan whose devices are chosen.
//
// Puts every node on a logical stream and plans the events that order work
// across streams. In MULTI mode, strongest rule first: stream labels (same
// label, device and engine: one stream used by nothing else), independent
// engines (one collective stream per device), dependencies (NNC's static
// schedule with a cost-weighted rank, recycling streams whose last node is
// an ancestor, a soft cap per device and engine), then streams that could
// never overlap are merged. SINGLE mode puts each device's nodes on one
// stream (a stream label is INVALID_ARGUMENT naming
// graph.nodes[i].stream_label). Stream ids are then made dense in order of
// first use; events are planned with vector clocks so that every cross-stream
// dependency is implied by a wait and no wait is redundant; event ids are
// made dense in issue order of their signalling nodes; finally streams over
// max_nodes_per_stream tasks are split, the parts appended as new streams.
// A COPY node moving data between devices (data_location.h's
// CopySourceDevices) also gets a peer stream on its source device.
#ifndef WEFT_SCHEDULER_STREAM_ASSIGNMENT_H_
#define WEFT_SCHEDULER_STREAM_ASSIGNMENT_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/cost_model.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/passes/stream_context.h"
#include "scheduler/plan.h"
#include "scheduler/planner_options.h"

namespace weft::scheduler {

// What the passes decided beyond the plan itself, for explanations.
struct StreamNotes {
  // By final stream id: the stream a physically split stream continues,
  // or -1.
  std::vector<int> split_from;
  // Orderings the soft cap added (node before, node after).
  std::vector<std::pair<NodeId, NodeId>> added_orderings;
};

// REQUIRES: plan->nodes lists dag.order (nodes[i].node == dag.order[i]) with
// devices set. Fills each node's stream, peer_stream and signal_event, and
// plan->waits, plan->streams and plan->num_events. Returns the choices
// by NodeId and,
// if `notes` is not null, fills it. Thread-safe (stateless).
absl::StatusOr<std::vector<StreamChoice>> AssignStreams(
    const Graph& graph, const Dag& dag, const CostLevels& levels,
    const StreamOptions& options, Plan* plan, StreamNotes* notes = nullptr);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_STREAM_ASSIGNMENT_H_
