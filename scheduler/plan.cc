#include "scheduler/plan.h"

#include <algorithm>

namespace weft::scheduler {

void Plan::AddNode(const PlannedNode& node, absl::Span<const NodeId> node_deps,
                   absl::Span<const int32_t> node_waits) {
  nodes.push_back(node);
  deps.AppendRow(node_deps);
  waits.AppendRow(node_waits);
}

absl::Span<const PlannedCopy> Plan::CopiesBefore(int i) const {
  if (copies.empty()) return {};
  const auto by_before = [](const PlannedCopy& c, int32_t position) {
    return c.before < position;
  };
  const auto first =
      std::lower_bound(copies.begin(), copies.end(), i, by_before);
  auto last = first;
  while (last != copies.end() && last->before == i) ++last;
  return absl::Span<const PlannedCopy>(copies.data() + (first - copies.begin()),
                                       last - first);
}

int64_t Plan::LargestArenaBytes() const {
  int64_t bytes = 0;
  for (const DeviceMemory& m : memory) bytes = std::max(bytes, m.arena_bytes);
  return bytes;
}

}  // namespace weft::scheduler
