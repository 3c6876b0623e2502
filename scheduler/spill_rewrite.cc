#include "scheduler/spill_rewrite.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/topology.h"

namespace weft::scheduler {
namespace {

using memory::BufferCopy;
using memory::Lifetimes;

constexpr uint64_t kAlignment = 256;

int64_t Aligned(uint64_t bytes) {
  return static_cast<int64_t>((bytes + kAlignment - 1) / kAlignment *
                              kAlignment);
}

// Whether buffer `b` is written at a position in (from, to).
bool WrittenBetween(const std::vector<int32_t>& writes, int32_t from,
                    int32_t to) {
  auto it = std::upper_bound(writes.begin(), writes.end(), from);
  return it != writes.end() && *it < to;
}

}  // namespace

// Issue positions where each buffer is written (ascending), to tell
// whether a copy about to be evicted holds a version nothing else has.
std::vector<std::vector<int32_t>> WritePositions(const Graph& graph,
                                                 const Plan& plan) {
  std::vector<std::vector<int32_t>> writes(graph.num_buffers());
  for (int i = 0; i < plan.num_nodes(); ++i) {
    const NodeId v = plan.nodes[i].node;
    if (graph.memory_move(v) != MemoryMove::kNone) continue;
    for (const BufferUse& u : graph.Uses(v)) {
      if (Writes(u.access)) writes[u.buffer].push_back(i);
    }
  }
  return writes;
}

// Belady's rule over the uses of device `device`'s copies in issue order,
// under `target` bytes; appends to `rewrite`.
void ChooseSpills(const Graph& graph, const Plan& plan, const Lifetimes& lt,
                  int device, int64_t target,
                  const std::vector<uint8_t>& pinned_buffer,
                  const std::vector<std::vector<int32_t>>& writes,
                  EvictionRule rule, Rewrite* rewrite) {
  // The device's steps: issue positions using one of its copies.
  std::vector<std::pair<int32_t, int32_t>> events;  // (position, copy)
  for (int c = 0; c < lt.num_copies(); ++c) {
    if (lt.copy(c).device != device) continue;
    for (const int32_t p : lt.Uses(c)) {
      if (p >= 0) events.push_back({p, c});
    }
  }
  if (events.empty()) return;
  std::sort(events.begin(), events.end());
  std::vector<int32_t> steps;
  for (const auto& [p, c] : events) {
    if (steps.empty() || steps.back() != p) steps.push_back(p);
  }
  for (size_t k = 1; k < steps.size(); ++k) {
    rewrite->orders.push_back({steps[k - 1], steps[k]});
  }

  const int num_copies = lt.num_copies();
  std::vector<int32_t> next(num_copies, 0);  // index into Uses(c)
  std::vector<uint8_t> resident(num_copies, 0);
  std::vector<uint8_t> seen(num_copies, 0);
  std::vector<int32_t> last_use(num_copies, -1);
  std::vector<int32_t> evicted_at(num_copies, -1);           // step index
  std::vector<int32_t> last_spill(graph.num_buffers(), -1);  // its `after`
  auto next_use = [&](int c) {
    const absl::Span<const int32_t> uses = lt.Uses(c);
    while (next[c] < static_cast<int32_t>(uses.size()) && uses[next[c]] < 0) {
      ++next[c];
    }
    return next[c] < static_cast<int32_t>(uses.size()) ? uses[next[c]]
                                                       : INT32_MAX;
  };
  // An output whose last use has passed is spilled to host memory, where
  // the job's end reads it.
  auto evictable = [&](int c) { return !pinned_buffer[lt.copy(c).buffer]; };
  std::set<std::pair<int32_t, int32_t>> candidates;  // (next use, copy)
  std::vector<int64_t> bytes_at(steps.size(), 0);
  // Fills waiting to be hoisted: (fill index, step of its use, evicted at).
  struct Pending {
    int32_t fill;
    int32_t step;
    int32_t evicted;
    int64_t size;
  };
  std::vector<Pending> pending;
  std::vector<std::vector<int32_t>> spills_at(steps.size());
  std::vector<std::pair<int32_t, int32_t>> victims;  // (next use, copy)
  int64_t bytes = 0;
  size_t e = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    const int32_t p = steps[k];
    const size_t first = e;
    while (e < events.size() && events[e].first == p) ++e;
    for (size_t j = first; j < e; ++j) {
      const int c = events[j].second;
      if (resident[c] && evictable(c)) candidates.erase({next_use(c), c});
    }
    for (size_t j = first; j < e; ++j) {
      const int c = events[j].second;
      if (resident[c]) continue;
      const BufferCopy& copy = lt.copy(c);
      if (seen[c] || copy.uploaded) {
        Fill fill;
        fill.buffer = copy.buffer;
        fill.device = device;
        fill.before = p;
        pending.push_back({static_cast<int32_t>(rewrite->fills.size()),
                           static_cast<int32_t>(k), evicted_at[c],
                           Aligned(copy.size_bytes)});
        rewrite->fills.push_back(std::move(fill));
      }
      seen[c] = 1;
      resident[c] = 1;
      bytes += Aligned(copy.size_bytes);
    }
    victims.clear();
    while (bytes > target && !candidates.empty()) {
      auto victim = std::prev(candidates.end());
      if (rule == EvictionRule::kTighter && victim != candidates.begin()) {
        const auto second = std::prev(victim);
        const int64_t size = Aligned(lt.copy(second->second).size_bytes);
        if (size >= bytes - target &&
            size < Aligned(lt.copy(victim->second).size_bytes)) {
          victim = second;
        }
      }
      victims.push_back(*victim);
      candidates.erase(victim);
      bytes -= Aligned(lt.copy(victims.back().second).size_bytes);
    }
    // The last victim may free more than was missing: those taken before
    // it stay where they still fit, nearest next use first.
    for (int j = static_cast<int>(victims.size()) - 2; j >= 0; --j) {
      const int64_t size = Aligned(lt.copy(victims[j].second).size_bytes);
      if (bytes + size <= target) {
        bytes += size;
        candidates.insert(victims[j]);
        victims[j].second = -1;
      }
    }
    for (const auto& [victim_next, c] : victims) {
      if (c < 0) continue;
      const BufferCopy& copy = lt.copy(c);
      resident[c] = 0;
      evicted_at[c] = static_cast<int32_t>(k);
      const std::vector<int32_t>& w = writes[copy.buffer];
      const bool written = !w.empty() && w.front() < p;
      const bool on_host = last_spill[copy.buffer] >= 0 &&
                           !WrittenBetween(w, last_spill[copy.buffer], p);
      // An output is spilled even unwritten: the host then serves its
      // download, and no device copy need live to the end.
      if ((written || copy.live_to_end) && !on_host) {
        spills_at[k].push_back(static_cast<int32_t>(rewrite->spills.size()));
        rewrite->spill_before.push_back(
            {static_cast<int32_t>(rewrite->spills.size()), p});
        rewrite->spills.push_back({copy.buffer, device, last_use[c], p});
        last_spill[copy.buffer] = last_use[c];
      }
    }
    bytes_at[k] = bytes;
    for (size_t j = first; j < e; ++j) {
      const int c = events[j].second;
      if (last_use[c] == p) continue;  // listed twice at one position
      last_use[c] = p;
      ++next[c];
      const int32_t n = next_use(c);
      if (n == INT32_MAX && !lt.copy(c).live_to_end) {
        resident[c] = 0;
        bytes -= Aligned(lt.copy(c).size_bytes);
      } else if (evictable(c)) {
        candidates.insert({n, c});
      }
    }
  }
  // Fills start as early as their memory is free (within kFillLead steps,
  // after their eviction).
  for (const Pending& f : pending) {
    int32_t s = f.step;
    const int32_t floor = std::max(f.evicted + 1, f.step - kFillLead);
    while (s - 1 >= std::max(floor, 0) && bytes_at[s - 1] + f.size <= target) {
      --s;
    }
    for (int32_t k = s; k < f.step; ++k) bytes_at[k] += f.size;
    Fill& fill = rewrite->fills[f.fill];
    fill.start = s > 0 ? steps[s - 1] : -1;
    fill.after_spills = spills_at[s];
  }
}

int64_t TrafficBytes(const Graph& graph, const Rewrite& rewrite) {
  int64_t bytes = 0;
  for (const Spill& spill : rewrite.spills) {
    bytes += static_cast<int64_t>(graph.buffer_bytes(spill.buffer));
  }
  for (const Fill& fill : rewrite.fills) {
    bytes += static_cast<int64_t>(graph.buffer_bytes(fill.buffer));
  }
  return bytes;
}

RewrittenNodes BuildNodes(const Graph& graph, const RewrittenNodes& current,
                          const Plan& plan, const Rewrite& rewrite,
                          const PlannerOptions& options) {
  const int n = plan.num_nodes();
  std::vector<std::vector<int32_t>> fills_before(n), spills_after(n);
  for (size_t k = 0; k < rewrite.fills.size(); ++k) {
    fills_before[rewrite.fills[k].before].push_back(static_cast<int32_t>(k));
  }
  for (size_t k = 0; k < rewrite.spills.size(); ++k) {
    spills_after[rewrite.spills[k].after].push_back(static_cast<int32_t>(k));
  }
  std::vector<NodeId> id_of_position(n), fill_id(rewrite.fills.size()),
      spill_id(rewrite.spills.size());
  NodeId next = 0;
  for (int i = 0; i < n; ++i) {
    for (const int32_t k : fills_before[i]) fill_id[k] = next++;
    id_of_position[i] = next++;
    for (const int32_t k : spills_after[i]) spill_id[k] = next++;
  }
  std::vector<NodeId> id_of_node(graph.num_nodes(), -1);
  for (int i = 0; i < n; ++i)
    id_of_node[plan.nodes[i].node] = id_of_position[i];

  RewrittenNodes out;
  std::vector<NodeSpec>& nodes = out.nodes;
  nodes.resize(next);
  // k-th spill and k-th fill of each buffer, from 1, after those the
  // graph holds already.
  std::vector<int> spills_of(graph.num_buffers(), 0);
  std::vector<int> fills_of(graph.num_buffers(), 0);
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    const MemoryMove kind = graph.memory_move(v);
    if (kind == MemoryMove::kNone) continue;
    for (const BufferUse& u : graph.Uses(v)) {
      ++(kind == MemoryMove::kSpill ? spills_of : fills_of)[u.buffer];
    }
  }
  const Topology topology = options.topology.has_value()
                                ? *options.topology
                                : Topology::Default(options.num_devices);
  auto move = [&](MemoryMove kind, BufferId b, int device) {
    NodeSpec node;
    const std::string& name = graph.buffer(b).name;
    const int k = kind == MemoryMove::kSpill ? ++spills_of[b] : ++fills_of[b];
    node.name = absl::StrCat(
        kind == MemoryMove::kSpill ? "spill:" : "fill:", name, ":", k);
    while (graph.FindNode(node.name) >= 0) absl::StrAppend(&node.name, "'");
    node.op = std::string(kind == MemoryMove::kSpill ? kSpillOp : kFillOp);
    node.args.push_back(BufferUse{b, Access::kReadWrite});
    node.engine = Engine::kCopy;
    node.device = device;
    node.cost_us = kind == MemoryMove::kSpill
                       ? topology.TransferUs(graph.buffer_bytes(b), device,
                                             Topology::kHost)
                       : topology.TransferUs(graph.buffer_bytes(b),
                                             Topology::kHost, device);
    return node;
  };
  std::vector<std::pair<NodeId, NodeId>>& orderings = out.orderings;
  // In program order, so that the spill and fill counts follow it.
  for (int i = 0; i < n; ++i) {
    for (const int32_t k : fills_before[i]) {
      const Fill& f = rewrite.fills[k];
      nodes[fill_id[k]] = move(MemoryMove::kFill, f.buffer, f.device);
      if (f.start >= 0)
        orderings.push_back({id_of_position[f.start], fill_id[k]});
      for (const int32_t s : f.after_spills) {
        orderings.push_back({spill_id[s], fill_id[k]});
      }
    }
    const PlannedNode& pn = plan.nodes[i];
    NodeSpec& node = nodes[id_of_position[i]];
    node = current.nodes[pn.node];
    node.device = pn.device;
    for (NodeId& a : node.after) a = id_of_node[a];
    for (const int32_t k : spills_after[i]) {
      const Spill& s = rewrite.spills[k];
      nodes[spill_id[k]] = move(MemoryMove::kSpill, s.buffer, s.device);
    }
  }
  for (const auto& [earlier, later] : current.orderings) {
    orderings.push_back({id_of_node[earlier], id_of_node[later]});
  }
  for (const auto& [earlier, later] : rewrite.orders) {
    orderings.push_back({id_of_position[earlier], id_of_position[later]});
  }
  for (const auto& [spill, later] : rewrite.spill_before) {
    orderings.push_back({spill_id[spill], id_of_position[later]});
  }
  return out;
}

// A graph of `nodes` with `orderings` added as `after` edges.
std::shared_ptr<const Graph> MakeGraph(
    const Graph& graph, std::vector<NodeSpec> nodes,
    const std::vector<std::pair<NodeId, NodeId>>& orderings) {
  for (const auto& [earlier, later] : orderings) {
    nodes[later].after.push_back(earlier);
  }
  for (NodeSpec& node : nodes) {
    std::sort(node.after.begin(), node.after.end());
    node.after.erase(std::unique(node.after.begin(), node.after.end()),
                     node.after.end());
  }
  std::vector<BufferSpec> buffers = graph.buffers();
  std::vector<ModuleSpec> modules = graph.modules();
  return std::make_shared<const Graph>(graph.name(), std::move(buffers),
                                       std::move(nodes), std::move(modules));
}

}  // namespace weft::scheduler
