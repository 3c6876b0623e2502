#include "scheduler/memory/body_uses.h"

namespace weft::scheduler::memory {

bool UsesDeviceMemory(const Graph& graph, NodeId v) {
  return graph.engine(v) != Engine::kHost || graph.node(v).control != nullptr;
}

void ForEachBodyUse(const Graph& graph, NodeId v,
                    const std::vector<std::shared_ptr<const Plan>>& bodies,
                    absl::FunctionRef<void(BufferId buffer, int device)> use) {
  const ControlSpec* control = graph.node(v).control.get();
  if (control == nullptr) return;
  int one_device = -1;
  bool spread = false;
  for (const std::shared_ptr<const Plan>& body : bodies) {
    if (body == nullptr) continue;
    for (const PlannedNode& bn : body->nodes) {
      spread = spread || (one_device >= 0 && bn.device != one_device);
      one_device = bn.device;
    }
  }
  if (!spread && one_device >= 0) {
    for (const BufferUse& u : graph.Uses(v)) use(u.buffer, one_device);
  }
  for (size_t k = 0; k < bodies.size() && k < control->bodies.size(); ++k) {
    if (bodies[k] == nullptr || control->bodies[k] == nullptr) continue;
    const Graph& body = *control->bodies[k];
    const Plan& body_plan = *bodies[k];
    for (const PlannedNode& bn : body_plan.nodes) {
      if (bn.node < 0 || bn.node >= body.num_nodes()) continue;
      if (UsesDeviceMemory(body, bn.node)) {
        for (const BufferUse& u : body.Uses(bn.node)) use(u.buffer, bn.device);
      }
      if (body.node(bn.node).control != nullptr &&
          static_cast<size_t>(bn.node) < body_plan.bodies.size()) {
        ForEachBodyUse(body, bn.node, body_plan.bodies[bn.node], use);
      }
    }
  }
}

}  // namespace weft::scheduler::memory
