#include "scheduler/passes/single_stream_pass.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {

absl::Status SingleStreamPass::Run(StreamContext& context) const {
  const Graph& graph = context.graph;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (graph.has_label(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph.nodes[", v, "].stream_label: stream label '",
                       graph.node(v).stream_label,
                       "' is not allowed in SINGLE stream mode"));
    }
  }
  std::vector<int> by_device;
  auto stream_of_device = [&](int device) {
    if (device >= static_cast<int>(by_device.size())) {
      by_device.resize(device + 1, -1);
    }
    if (by_device[device] < 0) {
      by_device[device] = context.NewStream(device, Engine::kCompute,
                                            LogicalStream::Kind::kSingle);
    }
    return by_device[device];
  };
  if (context.has_peers()) {
    context.peer_stream.assign(context.num_nodes(), -1);
  }
  for (NodeId v : context.dag.order) {
    context.stream_of[v] = stream_of_device(context.device[v]);
    context.SetChoice(v, {StreamChoice::Why::kSingle, -1});
    const int peer = context.peer_device_of(v);
    if (peer >= 0) context.peer_stream[v] = stream_of_device(peer);
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
