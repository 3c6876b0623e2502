#include "scheduler/spill_fitting.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/memory/memory_plan.h"
#include "scheduler/planner.h"
#include "scheduler/status_macros.h"
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

// A spill the fitting inserts: after the use at issue position `after`
// (the copy's last before its eviction), before the use at `before` (the
// one that needs its memory).
struct Spill {
  BufferId buffer = -1;
  int device = 0;
  int32_t after = 0;
  int32_t before = 0;
};

// A fill: before the use at `before`; it may start after the use at
// `start` (-1: from the beginning) and after the spills in `after_spills`
// (indices into the spills), once the memory it takes is free.
struct Fill {
  BufferId buffer = -1;
  int device = 0;
  int32_t before = 0;
  int32_t start = -1;
  std::vector<int32_t> after_spills;
};

// Every spill, fill and ordering of one rewrite.
struct Rewrite {
  std::vector<Spill> spills;
  std::vector<Fill> fills;
  // Orderings between issue positions: (earlier, later).
  std::vector<std::pair<int32_t, int32_t>> orders;
  // (spill index, issue position that must follow it).
  std::vector<std::pair<int32_t, int32_t>> spill_before;
};

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

// Whether buffer `b` is written at a position in (from, to).
bool WrittenBetween(const std::vector<int32_t>& writes, int32_t from,
                    int32_t to) {
  auto it = std::upper_bound(writes.begin(), writes.end(), from);
  return it != writes.end() && *it < to;
}

// Belady's rule over the uses of device `device`'s copies in issue order,
// under `target` bytes; appends to `rewrite`.
void FitDevice(const Graph& graph, const Plan& plan, const Lifetimes& lt,
               int device, int64_t target,
               const std::vector<uint8_t>& pinned_buffer,
               const std::vector<std::vector<int32_t>>& writes,
               Rewrite* rewrite) {
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
    while (bytes > target && !candidates.empty()) {
      const auto victim = *candidates.rbegin();
      candidates.erase(std::prev(candidates.end()));
      const int c = victim.second;
      const BufferCopy& copy = lt.copy(c);
      resident[c] = 0;
      bytes -= Aligned(copy.size_bytes);
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

// The rewritten graph's nodes: `graph`'s nodes in `plan`'s issue order,
// pinned to their devices, with the spills and fills of `rewrite` between
// them, and apart from them the orderings that keep each device's live
// bytes at Belady's, as (earlier, later) node ids.
struct RewrittenNodes {
  std::vector<NodeSpec> nodes;
  std::vector<std::pair<NodeId, NodeId>> orderings;
};

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

int64_t ArenaOn(const Plan& plan, int device) {
  for (const DeviceMemory& m : plan.memory) {
    if (m.device == device) return m.arena_bytes;
  }
  return 0;
}

// The first device whose arena exceeds its budget, or -1.
int OverBudget(const Plan& plan, const std::vector<int64_t>& budgets) {
  for (const DeviceMemory& m : plan.memory) {
    if (m.device >= 0 && m.device < static_cast<int>(budgets.size()) &&
        budgets[m.device] > 0 && m.arena_bytes > budgets[m.device]) {
      return m.device;
    }
  }
  return -1;
}

// Bytes by which the arenas exceed their budgets, over all devices.
int64_t Excess(const Plan& plan, const std::vector<int64_t>& budgets) {
  int64_t excess = 0;
  for (const DeviceMemory& m : plan.memory) {
    if (m.device >= 0 && m.device < static_cast<int>(budgets.size()) &&
        budgets[m.device] > 0) {
      excess += std::max<int64_t>(m.arena_bytes - budgets[m.device], 0);
    }
  }
  return excess;
}

}  // namespace

std::vector<int64_t> EffectiveBudgets(const PlannerOptions& options) {
  const std::vector<memory::DeviceBudget> budgets =
      memory::DeviceBudgets(options.memory_budget_bytes,
                            options.device_memory_bytes, options.num_devices);
  std::vector<int64_t> bytes;
  bytes.reserve(budgets.size());
  for (const memory::DeviceBudget& b : budgets) bytes.push_back(b.bytes);
  return bytes;
}

absl::Status FitMemoryBudgets(const Graph& graph, const PlannerOptions& options,
                              Plan* plan, SpillReport* report) {
  SpillReport ignored;
  SpillReport& out = report != nullptr ? *report : ignored;
  out = SpillReport();
  const std::vector<int64_t> budgets = EffectiveBudgets(options);
  if (plan->memory.empty() || OverBudget(*plan, budgets) < 0) {
    return absl::OkStatus();
  }
  if (options.memory_order == MemoryOrderKind::kAuto) {
    // A tight budget: the order that keeps fewer bytes live may fit as it
    // is, or need fewer spills.
    PlannerOptions aware = options;
    aware.memory_order = MemoryOrderKind::kMemoryAware;
    aware.fit_memory = false;
    aware.plan_memory = true;
    absl::StatusOr<Plan> aware_plan = PlanGraph(graph, aware);
    if (aware_plan.ok() &&
        Excess(*aware_plan, budgets) < Excess(*plan, budgets)) {
      *plan = *std::move(aware_plan);
      out.memory_aware_order = true;
      if (OverBudget(*plan, budgets) < 0) return absl::OkStatus();
    }
  }
  // Buffers whose copies the memory plan does not describe stay put.
  std::vector<uint8_t> pinned(graph.num_buffers(), 0);
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (graph.node(v).control == nullptr) continue;
    for (const BufferUse& u : graph.Uses(v)) pinned[u.buffer] = 1;
  }

  // Planned again with the cost model, to compare the relaxed plan.
  PlannerOptions again = options;
  again.memory_order = MemoryOrderKind::kSubmitted;  // the graph's order
  again.fit_memory = false;
  again.plan_memory = true;
  again.simulate = true;
  auto finish = [&](Plan fitted, std::shared_ptr<const Graph> rewritten,
                    const std::vector<std::pair<NodeId, NodeId>>& added) {
    std::vector<int64_t> spilled(budgets.size(), 0);
    for (const PlannedNode& pn : fitted.nodes) {
      if (rewritten->memory_move(pn.node) != MemoryMove::kSpill) continue;
      for (const BufferUse& u : rewritten->Uses(pn.node)) {
        const int64_t bytes =
            static_cast<int64_t>(rewritten->buffer_bytes(u.buffer));
        if (pn.device < static_cast<int>(spilled.size())) {
          spilled[pn.device] += bytes;
        }
        out.spilled_bytes += bytes;
      }
      ++out.spills;
    }
    for (const PlannedNode& pn : fitted.nodes) {
      if (rewritten->memory_move(pn.node) == MemoryMove::kFill) ++out.fills;
    }
    const std::vector<int32_t> orderings =
        CountOrderings(*rewritten, fitted, added);
    for (DeviceMemory& m : fitted.memory) {
      if (m.device < 0 || m.device >= static_cast<int>(spilled.size())) {
        continue;
      }
      m.spilled_bytes = spilled[m.device];
      m.orderings_added = orderings[m.device];
    }
    out.makespan_us = fitted.estimated_makespan_us;
    if (!options.simulate) {
      fitted.estimates.clear();
      fitted.estimated_makespan_us = 0;
      fitted.lower_bound_us = 0;
    }
    fitted.graph = std::move(rewritten);
    *plan = std::move(fitted);
  };

  // Each round fits the latest plan (its own copies, transfers and earlier
  // spills) to the targets, which drop where the offsets fragment.
  RewrittenNodes current;
  current.nodes = graph.nodes();
  std::shared_ptr<const Graph> current_graph;  // null: `graph`
  Plan current_plan = *plan;
  std::vector<int64_t> targets = budgets;
  absl::Status last = absl::OkStatus();
  for (int round = 0; round < kFitRounds; ++round) {
    const Graph& g = current_graph != nullptr ? *current_graph : graph;
    WEFT_ASSIGN_OR_RETURN(const Lifetimes lt,
                          Lifetimes::Compute(g, current_plan));
    const std::vector<std::vector<int32_t>> writes =
        WritePositions(g, current_plan);
    Rewrite rewrite;
    for (int d = 0; d < static_cast<int>(budgets.size()); ++d) {
      if (budgets[d] <= 0 || ArenaOn(current_plan, d) <= budgets[d]) continue;
      FitDevice(g, current_plan, lt, d, targets[d], pinned, writes, &rewrite);
    }
    RewrittenNodes built =
        BuildNodes(g, current, current_plan, rewrite, options);
    std::shared_ptr<const Graph> ordered =
        MakeGraph(graph, built.nodes, built.orderings);
    WEFT_ASSIGN_OR_RETURN(Plan ordered_plan, PlanGraph(*ordered, again));
    ++out.rounds;
    const int over = OverBudget(ordered_plan, budgets);
    if (over < 0) {
      out.ordered_makespan_us = ordered_plan.estimated_makespan_us;
      // Only the orderings the arenas need, then planned once more.
      std::vector<uint8_t> devices(budgets.size(), 0);
      for (int d = 0; d < static_cast<int>(budgets.size()); ++d) {
        devices[d] = budgets[d] > 0;
      }
      absl::StatusOr<std::vector<std::pair<NodeId, NodeId>>> needed =
          ArenaOrderings(*ordered, ordered_plan, devices);
      if (needed.ok()) {
        std::shared_ptr<const Graph> relaxed =
            MakeGraph(graph, built.nodes, *needed);
        absl::StatusOr<Plan> relaxed_plan = PlanGraph(*relaxed, again);
        ++out.rounds;
        // Where its own arenas fragment past the budget, the ordered
        // plan's places may still hold for it.
        if (relaxed_plan.ok() && OverBudget(*relaxed_plan, budgets) >= 0) {
          AdoptPlacement(*relaxed, ordered_plan, &*relaxed_plan);
        }
        if (relaxed_plan.ok() && OverBudget(*relaxed_plan, budgets) < 0 &&
            relaxed_plan->estimated_makespan_us <=
                ordered_plan.estimated_makespan_us) {
          out.relaxed = true;
          finish(*std::move(relaxed_plan), std::move(relaxed), *needed);
          return absl::OkStatus();
        }
      }
      finish(std::move(ordered_plan), std::move(ordered), built.orderings);
      return absl::OkStatus();
    }
    const int64_t arena = ArenaOn(ordered_plan, over);
    last = absl::ResourceExhaustedError(absl::StrCat(
        "device ", over, ": the memory plan needs an arena of ", arena,
        " bytes after spilling, above the memory budget of ", budgets[over],
        " bytes"));
    // Where the live bytes fit but the offsets fragment, aim lower.
    for (const DeviceMemory& m : ordered_plan.memory) {
      const int d = m.device;
      if (d < 0 || d >= static_cast<int>(budgets.size()) || budgets[d] <= 0 ||
          m.arena_bytes <= budgets[d] || m.peak_live_bytes > budgets[d]) {
        continue;
      }
      targets[d] = std::max<int64_t>(
          kAlignment, static_cast<int64_t>(static_cast<double>(targets[d]) *
                                           budgets[d] / m.arena_bytes * 0.97));
    }
    current = std::move(built);
    current_graph = std::move(ordered);
    current_plan = std::move(ordered_plan);
  }
  return last;
}

}  // namespace weft::scheduler
