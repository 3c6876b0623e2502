#include "scheduler/passes/single_stream_pass.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {

absl::Status SingleStreamPass::Run(StreamContext& context) const {
  const Graph& graph = context.graph;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (graph.has_label(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph.nodes[", v, "].stream_label: stream label '",
          graph.node(v).stream_label,
          "' is not allowed in SINGLE stream mode"));
    }
  }
  std::vector<int> by_device;
  for (NodeId v : context.dag.order) {
    const int device = context.device[v];
    if (device >= static_cast<int>(by_device.size())) {
      by_device.resize(device + 1, -1);
    }
    if (by_device[device] < 0) {
      by_device[device] = context.NewStream(device, Engine::kCompute,
                                            LogicalStream::Kind::kSingle);
    }
    context.stream_of[v] = by_device[device];
    context.choice[v] = {StreamChoice::Why::kSingle, -1};
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
