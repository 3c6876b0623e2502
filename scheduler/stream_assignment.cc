#include "scheduler/stream_assignment.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/data_location.h"
#include "scheduler/passes/stream_pipeline.h"

namespace weft::scheduler {

absl::StatusOr<std::vector<StreamChoice>> AssignStreams(
    const Graph& graph, const Dag& dag, const CostLevels& levels,
    const StreamOptions& options, Plan* plan, StreamNotes* notes) {
  const int n = graph.num_nodes();
  if (static_cast<int>(plan->nodes.size()) != n || dag.num_nodes() != n) {
    return absl::InternalError("plan and graph disagree on the node count");
  }
  std::vector<int> device(n, 0);
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan->nodes[i];
    if (pn.node != dag.order[i]) {
      return absl::InternalError("plan nodes are not in the DAG's order");
    }
    device[pn.node] = pn.device;
  }
  std::vector<int> copy_sources = CopySourceDevices(graph, dag.order, device);
  // The choices are this function's result.
  StreamOptions recording = options;
  recording.record_choices = true;
  StreamContext context(graph, dag, levels, std::move(device), recording);
  context.peer_device = std::move(copy_sources);
  absl::Status status = RunStreamPipeline(context);
  if (!status.ok()) return status;

  plan->streams.clear();
  plan->streams.reserve(context.streams.size());
  for (size_t s = 0; s < context.streams.size(); ++s) {
    const LogicalStream& ls = context.streams[s];
    PlannedStream ps;
    ps.id = static_cast<int>(s);
    ps.device = ls.device;
    ps.label = ls.label;
    ps.engine = ls.engine;
    plan->streams.push_back(std::move(ps));
  }
  for (int i = 0; i < n; ++i) {
    PlannedNode& pn = plan->nodes[i];
    pn.stream = context.stream_of[pn.node];
    pn.signal_event = context.signal[pn.node];
    pn.peer_stream = context.peer_of(pn.node);
  }
  plan->waits = std::move(context.waits);
  plan->num_events = context.num_events;
  if (notes != nullptr) {
    notes->split_from.resize(context.streams.size());
    for (size_t s = 0; s < context.streams.size(); ++s) {
      notes->split_from[s] = context.streams[s].split_from;
    }
    notes->added_orderings = std::move(context.added_orderings);
  }
  return std::move(context.choice);
}

}  // namespace weft::scheduler
