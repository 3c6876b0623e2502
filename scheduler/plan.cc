#include "scheduler/plan.h"

namespace weft::scheduler {

void Plan::AddNode(const PlannedNode& node, absl::Span<const NodeId> node_deps,
                   absl::Span<const int32_t> node_waits) {
  nodes.push_back(node);
  deps.AppendRow(node_deps);
  waits.AppendRow(node_waits);
}

}  // namespace weft::scheduler
