#include "scheduler/memory/memory_order.h"

#include <algorithm>
#include <queue>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "scheduler/csr.h"

namespace weft::scheduler::memory {
namespace {

// Each node's distinct buffers, each buffer's distinct users, and what the
// model needs of each buffer.
struct UseModel {
  Csr node_buffers;  // by NodeId
  Csr users;         // by BufferId
  std::vector<int64_t> size;
  std::vector<uint8_t> output;
  std::vector<uint8_t> prefetched;  // live from the start

  UseModel(const Graph& graph, const MemoryOrderOptions& options) {
    const int n = graph.num_nodes();
    const int num_buffers = graph.num_buffers();
    std::vector<int32_t> seen(num_buffers, -1);
    node_buffers.items.reserve(graph.num_uses());
    node_buffers.offsets.reserve(n + 1);
    std::vector<int32_t> count(num_buffers, 0);
    for (NodeId v = 0; v < n; ++v) {
      for (const BufferUse& u : graph.Uses(v)) {
        if (seen[u.buffer] == v) continue;
        seen[u.buffer] = v;
        node_buffers.items.push_back(u.buffer);
        ++count[u.buffer];
      }
      node_buffers.offsets.push_back(
          static_cast<int32_t>(node_buffers.items.size()));
    }
    users = node_buffers.Transpose(num_buffers);
    size.resize(num_buffers);
    output.resize(num_buffers);
    prefetched.resize(num_buffers);
    for (BufferId b = 0; b < num_buffers; ++b) {
      size[b] = static_cast<int64_t>(graph.buffer_bytes(b));
      output[b] = graph.buffer(b).output;
      prefetched[b] = options.prefetched_inputs && count[b] > 0 &&
                      graph.has_initial_data(b);
    }
  }
};

// Live bytes at each step of `order`, and after it.
void Simulate(const UseModel& model, absl::Span<const NodeId> order,
              std::vector<int64_t>* step, std::vector<int64_t>* after) {
  const int n = static_cast<int>(order.size());
  const int num_buffers = static_cast<int>(model.size.size());
  std::vector<int32_t> first(num_buffers, -1), last(num_buffers, -1);
  for (int k = 0; k < n; ++k) {
    for (const int32_t b : model.node_buffers.Row(order[k])) {
      if (first[b] < 0) first[b] = k;
      last[b] = k;
    }
  }
  std::vector<int64_t> starts(n + 1, 0), ends(n + 1, 0);
  for (BufferId b = 0; b < num_buffers; ++b) {
    if (first[b] < 0) continue;
    starts[model.prefetched[b] ? 0 : first[b]] += model.size[b];
    if (!model.output[b]) ends[last[b]] += model.size[b];
  }
  step->assign(n, 0);
  after->assign(n, 0);
  int64_t live = 0;
  for (int k = 0; k < n; ++k) {
    live += starts[k];
    (*step)[k] = live;
    live -= ends[k];
    (*after)[k] = live;
  }
}

// The dynamic programme over the downsets of `nodes` (at most 32, listed
// in a topological order), run after `before` (by buffer: users already
// run) with `live` bytes live. Fills `best` with the order of least peak;
// returns that peak, or -1 if a level had more than `max_states` states
// and `exact` is asked for.
int64_t WindowProgramme(const UseModel& model, const Dag& dag,
                        absl::Span<const NodeId> nodes,
                        const absl::flat_hash_map<BufferId, int32_t>& before,
                        int64_t live, int max_states, bool exact,
                        std::vector<NodeId>* best) {
  const int m = static_cast<int>(nodes.size());
  absl::flat_hash_map<NodeId, int> local;
  for (int i = 0; i < m; ++i) local[nodes[i]] = i;
  std::vector<uint32_t> pred_mask(m, 0);
  absl::flat_hash_map<BufferId, uint32_t> window_users;
  for (int i = 0; i < m; ++i) {
    for (const NodeId p : dag.Preds(nodes[i])) {
      auto it = local.find(p);
      if (it != local.end()) pred_mask[i] |= uint32_t{1} << it->second;
    }
    for (const int32_t b : model.node_buffers.Row(nodes[i])) {
      window_users[b] |= uint32_t{1} << i;
    }
  }
  struct State {
    int64_t peak;
    int64_t live;
    uint32_t parent;
    int8_t last;
  };
  // The state kept of two that reach one set of nodes: the lower peak,
  // ties broken by everything else, so that which is kept never depends
  // on the order the hash maps are walked in (which follows their
  // addresses).
  auto Better = [](const State& a, const State& b) {
    return std::tie(a.peak, a.live, a.parent, a.last) <
           std::tie(b.peak, b.live, b.parent, b.last);
  };
  std::vector<absl::flat_hash_map<uint32_t, State>> levels(m + 1);
  levels[0][0] = {0, live, 0, -1};
  std::vector<std::pair<int64_t, uint32_t>> ranked;
  for (int l = 0; l < m; ++l) {
    absl::flat_hash_map<uint32_t, State>& next = levels[l + 1];
    for (const auto& [mask, state] : levels[l]) {
      for (int i = 0; i < m; ++i) {
        const uint32_t bit = uint32_t{1} << i;
        if ((mask & bit) || (pred_mask[i] & ~mask)) continue;
        int64_t alloc = 0, freed = 0;
        for (const int32_t b : model.node_buffers.Row(nodes[i])) {
          auto bi = before.find(b);
          const int32_t done = (bi == before.end() ? 0 : bi->second) +
                               __builtin_popcount(window_users.at(b) & mask);
          if (done == 0 && !model.prefetched[b]) alloc += model.size[b];
          const int32_t users = static_cast<int32_t>(model.users.Row(b).size());
          if (done + 1 == users && !model.output[b]) freed += model.size[b];
        }
        const State candidate{std::max(state.peak, state.live + alloc),
                              state.live + alloc - freed, mask,
                              static_cast<int8_t>(i)};
        auto [it, inserted] = next.try_emplace(mask | bit, candidate);
        if (!inserted && Better(candidate, it->second)) it->second = candidate;
      }
    }
    if (static_cast<int>(next.size()) > max_states) {
      if (exact) return -1;
      ranked.clear();
      for (const auto& [mask, state] : next)
        ranked.emplace_back(state.peak, mask);
      std::nth_element(ranked.begin(), ranked.begin() + max_states,
                       ranked.end());
      absl::flat_hash_map<uint32_t, State> kept;
      for (int k = 0; k < max_states; ++k) {
        kept.emplace(ranked[k].second, next.at(ranked[k].second));
      }
      next.swap(kept);
    }
  }
  const uint32_t full = m == 32 ? ~uint32_t{0} : (uint32_t{1} << m) - 1;
  auto it = levels[m].find(full);
  if (it == levels[m].end()) return -1;
  const int64_t peak = it->second.peak;
  best->assign(m, -1);
  uint32_t mask = full;
  for (int l = m; l > 0; --l) {
    const State& s = levels[l].at(mask);
    (*best)[l - 1] = nodes[s.last];
    mask = s.parent;
  }
  return peak;
}

// Users of each buffer of `nodes` that come before position `lo` of
// `order` (pos: position by NodeId).
absl::flat_hash_map<BufferId, int32_t> UsersBefore(
    const UseModel& model, absl::Span<const NodeId> nodes,
    absl::Span<const int32_t> pos, int lo) {
  absl::flat_hash_map<BufferId, int32_t> before;
  for (const NodeId v : nodes) {
    for (const int32_t b : model.node_buffers.Row(v)) {
      if (before.contains(b)) continue;
      int32_t count = 0;
      for (const int32_t w : model.users.Row(b)) count += pos[w] < lo;
      before[b] = count;
    }
  }
  return before;
}

// Depth-first from each sink in ascending NodeId, each node after its
// predecessors (visited in ascending NodeId): XLA's post-order
// scheduler, which finishes one branch before it starts the next.
std::vector<NodeId> PostOrder(const Dag& dag) {
  const int n = dag.num_nodes();
  std::vector<NodeId> order;
  order.reserve(n);
  std::vector<uint8_t> state(n, 0);  // 1: entered, 2: emitted
  std::vector<std::pair<NodeId, int>> stack;
  for (NodeId root = 0; root < n; ++root) {
    if (!dag.Succs(root).empty() || state[root]) continue;
    stack.emplace_back(root, 0);
    state[root] = 1;
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      const absl::Span<const NodeId> preds = dag.Preds(v);
      if (next < static_cast<int>(preds.size())) {
        const NodeId p = preds[next++];
        if (state[p] == 0) {
          state[p] = 1;
          stack.emplace_back(p, 0);
        }
        continue;
      }
      state[v] = 2;
      order.push_back(v);
      stack.pop_back();
    }
  }
  return order;
}

MemoryOrder Greedy(const Graph& graph, const Dag& dag, const UseModel& model) {
  const int n = graph.num_nodes();
  const int num_buffers = graph.num_buffers();
  std::vector<int32_t> remaining(num_buffers);
  std::vector<uint8_t> allocated(num_buffers);
  int64_t live = 0;
  for (BufferId b = 0; b < num_buffers; ++b) {
    remaining[b] = static_cast<int32_t>(model.users.Row(b).size());
    allocated[b] = model.prefetched[b];
    if (allocated[b]) live += model.size[b];
  }
  std::vector<int64_t> alloc(n, 0), freed(n, 0);
  std::vector<int32_t> indegree(n);
  for (NodeId v = 0; v < n; ++v) {
    indegree[v] = static_cast<int32_t>(dag.Preds(v).size());
    for (const int32_t b : model.node_buffers.Row(v)) {
      if (!allocated[b]) alloc[v] += model.size[b];
      if (remaining[b] == 1 && !model.output[b]) freed[v] += model.size[b];
    }
  }
  using Key = std::tuple<int64_t, int64_t, NodeId>;
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
  auto push = [&](NodeId v) {
    ready.emplace(alloc[v] - freed[v], alloc[v], v);
  };
  for (NodeId v = 0; v < n; ++v) {
    if (indegree[v] == 0) push(v);
  }
  std::vector<uint8_t> done(n, 0);
  MemoryOrder result;
  result.order.reserve(n);
  while (!ready.empty()) {
    const auto [delta, a, v] = ready.top();
    ready.pop();
    if (done[v] || delta != alloc[v] - freed[v] || a != alloc[v]) continue;
    done[v] = 1;
    result.order.push_back(v);
    result.peak_bytes = std::max(result.peak_bytes, live + alloc[v]);
    live += alloc[v] - freed[v];
    for (const int32_t b : model.node_buffers.Row(v)) {
      const int64_t size = model.size[b];
      if (!allocated[b]) {
        allocated[b] = 1;
        for (const int32_t w : model.users.Row(b)) {
          if (done[w]) continue;
          alloc[w] -= size;
          if (indegree[w] == 0) push(w);
        }
      }
      if (--remaining[b] == 1 && !model.output[b]) {
        for (const int32_t w : model.users.Row(b)) {
          if (done[w]) continue;
          freed[w] += size;
          if (indegree[w] == 0) push(w);
          break;
        }
      }
    }
    for (const NodeId s : dag.Succs(v)) {
      if (--indegree[s] == 0) push(s);
    }
  }
  return result;
}

}  // namespace

int64_t PeakLiveBytes(const Graph& graph, absl::Span<const NodeId> order,
                      const MemoryOrderOptions& options) {
  const UseModel model(graph, options);
  std::vector<int64_t> step, after;
  Simulate(model, order, &step, &after);
  int64_t peak = 0;
  for (const int64_t s : step) peak = std::max(peak, s);
  return peak;
}

MemoryOrder MemoryAwareOrder(const Graph& graph, const Dag& dag,
                             const MemoryOrderOptions& options) {
  const UseModel model(graph, options);
  // The best start of the greedy list schedule, a depth-first post-order
  // (finish what feeds one sink before starting on the next) and the
  // submitted order.
  MemoryOrder result = Greedy(graph, dag, model);
  std::vector<int64_t> step, after;
  auto peak_of = [&](absl::Span<const NodeId> order) {
    Simulate(model, order, &step, &after);
    return order.empty() ? 0 : *std::max_element(step.begin(), step.end());
  };
  result.peak_bytes = peak_of(result.order);
  std::vector<std::vector<NodeId>> candidates;
  candidates.push_back(PostOrder(dag));
  candidates.push_back(dag.order);
  for (std::vector<NodeId>& candidate : candidates) {
    const int64_t peak = peak_of(candidate);
    if (peak < result.peak_bytes) {
      result.order = std::move(candidate);
      result.peak_bytes = peak;
    }
  }
  const int n = static_cast<int>(result.order.size());
  const int width = std::min({options.window, 32, n});
  if (width < 2) return result;
  std::vector<int32_t> pos(n);
  absl::flat_hash_set<int> stuck;  // window starts that did not improve
  std::vector<NodeId> best;
  for (int tries = 0; tries < options.max_windows; ++tries) {
    Simulate(model, result.order, &step, &after);
    const int64_t peak = *std::max_element(step.begin(), step.end());
    result.peak_bytes = peak;
    int lo = -1;
    for (int k = 0; k < n && lo < 0; ++k) {
      if (step[k] != peak) continue;
      const int start = std::clamp(k - width / 2, 0, n - width);
      if (!stuck.contains(start)) lo = start;
    }
    if (lo < 0) break;
    for (int k = 0; k < n; ++k) pos[result.order[k]] = k;
    const absl::Span<const NodeId> nodes(result.order.data() + lo, width);
    const int64_t live = lo == 0 ? 0 : after[lo - 1];
    int64_t prefetched_live = 0;
    if (lo == 0) {
      for (BufferId b = 0; b < graph.num_buffers(); ++b) {
        if (model.prefetched[b]) prefetched_live += model.size[b];
      }
    }
    const int64_t window_peak = WindowProgramme(
        model, dag, nodes, UsersBefore(model, nodes, pos, lo),
        live + prefetched_live, options.max_states, /*exact=*/false, &best);
    if (window_peak >= 0 && window_peak < peak) {
      std::copy(best.begin(), best.end(), result.order.begin() + lo);
      stuck.clear();
    } else {
      stuck.insert(lo);
    }
  }
  Simulate(model, result.order, &step, &after);
  result.peak_bytes = n == 0 ? 0 : *std::max_element(step.begin(), step.end());
  return result;
}

std::optional<MemoryOrder> OptimalOrder(const Graph& graph, const Dag& dag,
                                        int max_states,
                                        const MemoryOrderOptions& options) {
  const int n = graph.num_nodes();
  if (n > 32) return std::nullopt;
  const UseModel model(graph, options);
  int64_t live = 0;
  for (BufferId b = 0; b < graph.num_buffers(); ++b) {
    if (model.prefetched[b]) live += model.size[b];
  }
  MemoryOrder result;
  if (n == 0) return result;
  const int64_t peak =
      WindowProgramme(model, dag, dag.order, {}, live, max_states,
                      /*exact=*/true, &result.order);
  if (peak < 0) return std::nullopt;
  result.peak_bytes = peak;
  return result;
}

void IssueInMemoryOrder(const Graph& graph, Dag* dag,
                        const MemoryOrderOptions& options) {
  MemoryOrder order = MemoryAwareOrder(graph, *dag, options);
  const int n = dag->num_nodes();
  if (static_cast<int>(order.order.size()) != n) return;
  dag->order = std::move(order.order);
  IntervalLabels intervals = dag->reach.intervals();
  dag->reach = ReachabilityIndex(n);
  for (int32_t i = 0; i < n; ++i) {
    dag->reach.Label(dag->order[i], i, dag->Preds(dag->order[i]));
  }
  if (!intervals.empty()) dag->reach.set_intervals(std::move(intervals));
}

}  // namespace weft::scheduler::memory
