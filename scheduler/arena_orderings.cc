#include "scheduler/arena_orderings.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "scheduler/memory/lifetimes.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler {

using memory::BufferCopy;
using memory::Lifetimes;

// The orderings that keep `plan`'s arenas on `devices` valid in any plan
// of the graph: for two copies placed over each other, every use of the
// earlier before every use of the later. Along a buffer's uses a writer
// follows every earlier use and precedes every later one, so it is enough
// to order the earlier copy's uses from its last writer on before the
// later copy's uses up to its first writer. As (earlier, later) node ids.
absl::StatusOr<std::vector<std::pair<NodeId, NodeId>>> ArenaOrderings(
    const Graph& graph, const Plan& plan, const std::vector<uint8_t>& devices) {
  WEFT_ASSIGN_OR_RETURN(const Lifetimes lt, Lifetimes::Compute(graph, plan));
  if (plan.buffers.size() != static_cast<size_t>(lt.num_copies())) {
    return absl::InternalError("the plan's buffers are not its copies");
  }
  auto writes = [&](int32_t position, BufferId b) {
    for (const BufferUse& u : graph.Uses(plan.nodes[position].node)) {
      if (u.buffer == b && Writes(u.access)) return true;
    }
    return false;
  };
  // The uses of a copy from its last writer on, and up to its first.
  auto tail = [&](int c) {
    const absl::Span<const int32_t> uses = lt.Uses(c);
    std::vector<int32_t> out;
    for (auto it = uses.rbegin(); it != uses.rend() && *it >= 0; ++it) {
      out.push_back(*it);
      if (writes(*it, lt.copy(c).buffer)) break;
    }
    return out;
  };
  auto head = [&](int c) {
    std::vector<int32_t> out;
    for (const int32_t p : lt.Uses(c)) {
      if (p < 0) continue;
      out.push_back(p);
      if (writes(p, lt.copy(c).buffer)) break;
    }
    return out;
  };
  std::vector<std::pair<NodeId, NodeId>> orderings;
  for (int d = 0; d < static_cast<int>(devices.size()); ++d) {
    if (!devices[d]) continue;
    std::vector<int> copies;
    for (int c = 0; c < lt.num_copies(); ++c) {
      if (lt.copy(c).device == d && lt.copy(c).size_bytes > 0) {
        copies.push_back(c);
      }
    }
    // Copies placed over each other are ordered, so in order of first use
    // each copy follows the latest holders of its range: ordering it after
    // them alone orders it after every earlier holder too (transitively).
    std::sort(copies.begin(), copies.end(), [&](int a, int b) {
      return lt.copy(a).first < lt.copy(b).first;
    });
    std::map<int64_t, std::pair<int64_t, int>> holders;  // begin: end, copy
    std::vector<int> previous;
    for (const int b : copies) {
      const int64_t begin = plan.buffers[b].offset;
      const int64_t end = begin + plan.buffers[b].size_bytes;
      previous.clear();
      auto it = holders.lower_bound(begin);
      if (it != holders.begin() && std::prev(it)->second.first > begin) --it;
      while (it != holders.end() && it->first < end) {
        const auto [held_begin, held] = *it;
        previous.push_back(held.second);
        it = holders.erase(it);
        // What the range leaves of the holder's stays the holder's.
        if (held_begin < begin)
          holders.emplace(held_begin, std::pair(begin, held.second));
        if (held.first > end)
          holders.emplace(end, std::pair(held.first, held.second));
      }
      holders.emplace(begin, std::pair(end, b));
      std::sort(previous.begin(), previous.end());
      previous.erase(std::unique(previous.begin(), previous.end()),
                     previous.end());
      const std::vector<int32_t> later = head(b);
      for (const int a : previous) {
        for (const int32_t u : tail(a)) {
          for (const int32_t v : later) {
            if (u < v) {
              orderings.push_back({plan.nodes[u].node, plan.nodes[v].node});
            }
          }
        }
      }
    }
  }
  std::sort(orderings.begin(), orderings.end());
  orderings.erase(std::unique(orderings.begin(), orderings.end()),
                  orderings.end());
  return orderings;
}

// Gives `plan` the places of `placed` (a plan of the same graph) when it
// has the same copies and every two copies placed over each other there
// are ordered in `plan` too; leaves it otherwise.
void AdoptPlacement(const Graph& graph, const Plan& placed, Plan* plan) {
  absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(graph, *plan);
  if (!lt.ok() ||
      placed.buffers.size() != static_cast<size_t>(lt->num_copies())) {
    return;
  }
  // The same copies, numbered apart: the k-th copy of a buffer on a device
  // in both (its k-th residency there).
  std::map<std::tuple<BufferId, int, int>, int> place_of;
  {
    std::map<std::pair<BufferId, int>, int> seen;
    for (size_t c = 0; c < placed.buffers.size(); ++c) {
      const PlannedBuffer& pb = placed.buffers[c];
      const int k = seen[{pb.buffer, pb.device}]++;
      place_of[{pb.buffer, pb.device, k}] = static_cast<int>(c);
    }
  }
  std::vector<PlannedBuffer> buffers(lt->num_copies());
  std::vector<int> copies(lt->num_copies());
  {
    std::map<std::pair<BufferId, int>, int> seen;
    for (int c = 0; c < lt->num_copies(); ++c) {
      const BufferCopy& copy = lt->copy(c);
      const int k = seen[{copy.buffer, copy.device}]++;
      auto it = place_of.find({copy.buffer, copy.device, k});
      if (it == place_of.end()) return;
      buffers[c] = placed.buffers[it->second];
      copies[c] = c;
    }
  }
  // In order of first use, each copy after the latest holders of its range
  // (which follow every earlier one).
  std::sort(copies.begin(), copies.end(), [&](int a, int b) {
    return lt->copy(a).first < lt->copy(b).first;
  });
  std::vector<std::map<int64_t, std::pair<int64_t, int>>> holders(
      std::max(plan->num_devices, 1));
  for (const int b : copies) {
    const PlannedBuffer& pb = buffers[b];
    if (pb.size_bytes == 0) continue;
    std::map<int64_t, std::pair<int64_t, int>>& held = holders[pb.device];
    const int64_t begin = pb.offset;
    const int64_t end = begin + pb.size_bytes;
    auto it = held.lower_bound(begin);
    if (it != held.begin() && std::prev(it)->second.first > begin) --it;
    while (it != held.end() && it->first < end) {
      const auto [held_begin, holder] = *it;
      if (!lt->Before(holder.second, b)) return;
      it = held.erase(it);
      if (held_begin < begin) {
        held.emplace(held_begin, std::pair(begin, holder.second));
      }
      if (holder.first > end) {
        held.emplace(end, std::pair(holder.first, holder.second));
      }
    }
    held.emplace(begin, std::pair(end, b));
  }
  plan->buffers = std::move(buffers);
  for (DeviceMemory& m : plan->memory) {
    for (const DeviceMemory& p : placed.memory) {
      if (p.device == m.device) m.arena_bytes = p.arena_bytes;
    }
  }
}

// Orderings of `added` that `plan` keeps as direct dependencies between
// nodes sharing no buffer (that no data dependency implies), by the
// device of the later node.
std::vector<int32_t> CountOrderings(
    const Graph& graph, const Plan& plan,
    const std::vector<std::pair<NodeId, NodeId>>& added) {
  std::vector<int32_t> counts(std::max(plan.num_devices, 1), 0);
  std::vector<int32_t> position(graph.num_nodes(), -1);
  for (int i = 0; i < plan.num_nodes(); ++i) position[plan.nodes[i].node] = i;
  for (const auto& [earlier, later] : added) {
    const int32_t p = position[later];
    if (p < 0 || p >= plan.deps.rows()) continue;
    const absl::Span<const NodeId> deps = plan.Deps(p);
    if (!std::binary_search(deps.begin(), deps.end(), earlier)) continue;
    bool shared = false;
    for (const BufferUse& a : graph.Uses(earlier)) {
      for (const BufferUse& b : graph.Uses(later))
        shared |= a.buffer == b.buffer;
    }
    if (!shared) ++counts[plan.nodes[p].device];
  }
  return counts;
}

}  // namespace weft::scheduler
