#include "scheduler/data_location.h"

#include <algorithm>
#include <array>

namespace weft::scheduler {

std::vector<int> CopySourceDevices(const Graph& graph,
                                   absl::Span<const NodeId> order,
                                   absl::Span<const int> device) {
  bool any_copy = false;
  int num_devices = 0;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    any_copy = any_copy || graph.engine(v) == Engine::kCopy;
    num_devices = std::max(num_devices, device[v] + 1);
  }
  std::vector<int> source;
  if (!any_copy || num_devices < 2) return source;
  DataLocations locations(graph.num_buffers());
  std::array<uint64_t, DataLocations::kMaxDevices> bytes;
  for (NodeId v : order) {
    const int d = device[v];
    if (graph.engine(v) == Engine::kCopy) {
      bytes.fill(0);
      DataLocations::Mask held = 0;
      for (const BufferUse& use : graph.Uses(v)) {
        if (!Reads(use.access) || locations.OnDevice(use.buffer, d)) continue;
        DataLocations::Mask m =
            locations.mask(use.buffer) & ~DataLocations::kHostBit;
        held |= m;
        for (; m != 0; m &= m - 1) {
          bytes[__builtin_ctzll(m)] += graph.buffer_bytes(use.buffer);
        }
      }
      if (held != 0) {
        int best = -1;
        for (DataLocations::Mask m = held; m != 0; m &= m - 1) {
          const int s = __builtin_ctzll(m);
          if (best < 0 || bytes[s] > bytes[best]) best = s;
        }
        if (source.empty()) source.assign(graph.num_nodes(), -1);
        source[v] = best;
      }
    }
    locations.Apply(graph.Uses(v), d);
  }
  return source;
}

}  // namespace weft::scheduler
