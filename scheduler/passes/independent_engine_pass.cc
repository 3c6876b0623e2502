#include "scheduler/passes/independent_engine_pass.h"

#include <vector>

namespace weft::scheduler {

absl::Status IndependentEnginePass::Run(StreamContext& context) const {
  std::vector<int> by_device;
  for (NodeId v : context.dag.order) {
    if (context.stream_of[v] >= 0 ||
        context.graph.engine(v) != Engine::kCollective) {
      continue;
    }
    const int device = context.device[v];
    if (device >= static_cast<int>(by_device.size())) {
      by_device.resize(device + 1, -1);
    }
    if (by_device[device] < 0) {
      by_device[device] = context.NewStream(device, Engine::kCollective,
                                            LogicalStream::Kind::kIndependent);
    }
    context.stream_of[v] = by_device[device];
    context.SetChoice(v, {StreamChoice::Why::kIndependent, -1});
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
