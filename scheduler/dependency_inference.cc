#include "scheduler/dependency_inference.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/huge_pages.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler {
namespace {

constexpr uint8_t kReadsFlag = 1;
constexpr uint8_t kWritesFlag = 2;

// Describes a cycle among the nodes Kahn's algorithm could not order and
// names an `after` edge on it. Every such node has an unordered predecessor,
// so walking unordered predecessors must revisit a node.
absl::Status CycleError(const Graph& graph, const Csr& preds,
                        const std::vector<int32_t>& indegree) {
  const int n = graph.num_nodes();
  NodeId start = -1;
  for (NodeId v = 0; v < n; ++v) {
    if (indegree[v] > 0) {
      start = v;
      break;
    }
  }
  std::vector<int32_t> seen_at(n, -1);
  std::vector<NodeId> walk;
  NodeId x = start;
  while (seen_at[x] < 0) {
    seen_at[x] = static_cast<int32_t>(walk.size());
    walk.push_back(x);
    NodeId next = -1;
    for (NodeId p : preds.Row(x)) {
      if (indegree[p] > 0) {
        next = p;
        break;
      }
    }
    x = next;
  }
  // walk[seen_at[x]..] is the cycle, each element a predecessor of the one
  // before it; reverse it into dependency order.
  std::vector<NodeId> cycle(walk.begin() + seen_at[x], walk.end());
  std::reverse(cycle.begin(), cycle.end());

  // Name an `after` edge on the cycle; prefer one pointing to a later node,
  // since inferred edges only point forward.
  std::string field;
  const int len = static_cast<int>(cycle.size());
  int closing = 0;  // index of the node whose `after` edge is named
  for (int pass = 0; pass < 2 && field.empty(); ++pass) {
    for (int i = 0; i < len && field.empty(); ++i) {
      const NodeId from = cycle[i];
      const NodeId to = cycle[(i + 1) % len];
      if (pass == 0 && from < to) continue;
      const auto& after = graph.node(to).after;
      for (size_t k = 0; k < after.size(); ++k) {
        if (after[k] == from) {
          field = absl::StrCat("graph.nodes[", to, "].after[", k, "]: '",
                               graph.node(from).name, "'");
          closing = (i + 1) % len;
          break;
        }
      }
    }
  }
  if (field.empty()) field = absl::StrCat("graph.nodes[", cycle[0], "]");
  // Start the listing at that node, so that it ends with the named edge.
  std::rotate(cycle.begin(), cycle.begin() + closing, cycle.end());

  std::vector<std::string> names;
  constexpr int kMaxShown = 12;
  for (int i = 0; i < len && i < kMaxShown; ++i) {
    names.push_back(absl::StrCat("'", graph.node(cycle[i]).name, "'"));
  }
  if (len > kMaxShown) names.push_back("...");
  names.push_back(absl::StrCat("'", graph.node(cycle[0]).name, "'"));
  return absl::InvalidArgumentError(absl::StrCat(
      field, " closes a dependency cycle (explicit `after` edges and edges ",
      "inferred from buffer access): ", absl::StrJoin(names, " -> ")));
}

}  // namespace

Csr CollectDependencies(const Graph& graph) {
  const int n = graph.num_nodes();
  const int num_buffers = graph.num_buffers();
  std::vector<NodeId> last_writer(num_buffers, -1);
  // Readers since the last write, per buffer: singly linked lists in one
  // pool (head index per buffer), so no buffer owns an allocation.
  std::vector<int32_t> reader_head(num_buffers, -1);
  std::vector<NodeId> pool_node;
  std::vector<int32_t> pool_next;
  // Per-node scratch: which buffers this node touches, and how.
  std::vector<NodeId> buffer_stamp(num_buffers, -1);
  std::vector<uint8_t> buffer_flags(num_buffers, 0);
  std::vector<BufferId> touched;
  std::vector<NodeId> pred_stamp(n, -1);

  Csr preds;
  preds.offsets.reserve(n + 1);
  // Room for the common case, every argument and `after` edge distinct.
  size_t room = 0;
  for (NodeId v = 0; v < n; ++v) {
    room += graph.Uses(v).size() + graph.After(v).size();
  }
  ReserveHuge(preds.items, room);
  for (NodeId v = 0; v < n; ++v) {
    touched.clear();
    for (const BufferUse& use : graph.Uses(v)) {
      const BufferId b = use.buffer;
      if (buffer_stamp[b] != v) {
        buffer_stamp[b] = v;
        buffer_flags[b] = 0;
        touched.push_back(b);
      }
      if (Reads(use.access)) buffer_flags[b] |= kReadsFlag;
      if (Writes(use.access)) buffer_flags[b] |= kWritesFlag;
    }
    const size_t row_start = preds.items.size();
    auto add = [&](NodeId p) {
      if (pred_stamp[p] == v) return;
      pred_stamp[p] = v;
      preds.items.push_back(p);
    };
    for (BufferId b : touched) {
      if (last_writer[b] >= 0) add(last_writer[b]);  // RAW, WAW
      if (buffer_flags[b] & kWritesFlag) {
        for (int32_t k = reader_head[b]; k >= 0; k = pool_next[k]) {
          add(pool_node[k]);  // WAR
        }
        reader_head[b] = -1;
        last_writer[b] = v;
      } else {
        pool_node.push_back(v);
        pool_next.push_back(reader_head[b]);
        reader_head[b] = static_cast<int32_t>(pool_node.size()) - 1;
      }
    }
    for (NodeId p : graph.After(v)) add(p);
    if (preds.items.size() - row_start > 1) {
      std::sort(preds.items.begin() + row_start, preds.items.end());
    }
    preds.offsets.push_back(static_cast<int32_t>(preds.items.size()));
  }
  return preds;
}

absl::StatusOr<std::vector<NodeId>> TopologicalOrder(const Graph& graph,
                                                     const Csr& preds) {
  const int n = preds.rows();
  std::vector<NodeId> order;
  order.reserve(n);
  bool forward = true;
  for (NodeId v = 0; v < n && forward; ++v) {
    auto row = preds.Row(v);
    if (!row.empty() && row.back() >= v) forward = false;
  }
  if (forward) {
    for (NodeId v = 0; v < n; ++v) order.push_back(v);
    return order;
  }
  Csr succs = preds.Transpose(n);
  std::vector<int32_t> indegree(n);
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<NodeId>> ready;
  for (NodeId v = 0; v < n; ++v) {
    indegree[v] = static_cast<int32_t>(preds.Row(v).size());
    if (indegree[v] == 0) ready.push(v);
  }
  while (!ready.empty()) {
    const NodeId v = ready.top();
    ready.pop();
    order.push_back(v);
    for (NodeId s : succs.Row(v)) {
      if (--indegree[s] == 0) ready.push(s);
    }
  }
  if (static_cast<int>(order.size()) != n) {
    return CycleError(graph, preds, indegree);
  }
  return order;
}

absl::Status CheckAcyclic(const Graph& graph) {
  return TopologicalOrder(graph, CollectDependencies(graph)).status();
}

absl::StatusOr<Dag> InferDependencies(const Graph& graph) {
  const int n = graph.num_nodes();
  Dag dag;
  dag.raw_preds = CollectDependencies(graph);
  WEFT_ASSIGN_OR_RETURN(dag.order, TopologicalOrder(graph, dag.raw_preds));
  {
    Csr raw_succs = dag.raw_preds.Transpose(n);
    dag.reach = ReachabilityIndex(dag.raw_preds, raw_succs, dag.order);
  }
  const ReachabilityIndex& reach = dag.reach;
  ReachabilityQuery query(reach, dag.raw_preds);

  constexpr int kWindow = ReachabilityIndex::kWindow;
  constexpr size_t kFewPreds = 16;
  std::vector<NodeId> far;  // predecessors beyond the window
  std::vector<std::pair<int32_t, NodeId>> by_post;  // (post(0, p), p)
  std::vector<NodeId> candidates;
  std::vector<uint8_t> redundant;
  dag.preds.offsets.reserve(n + 1);
  ReserveHuge(dag.preds.items, dag.raw_preds.items.size());
  for (NodeId v = 0; v < n; ++v) {
    auto row = dag.raw_preds.Row(v);
    if (row.size() <= 1) {
      dag.preds.items.insert(dag.preds.items.end(), row.begin(), row.end());
      dag.preds.offsets.push_back(static_cast<int32_t>(dag.preds.items.size()));
      continue;
    }
    const int32_t pv = reach.pos(v);
    // Ancestors of v's predecessors within the window, in v's frame: bit
    // d - 1 stands for the node at position pv - d.
    uint64_t ancestors_of_preds = 0;
    far.clear();
    for (NodeId p : row) {
      const int32_t d = pv - reach.pos(p);
      if (d < kWindow) ancestors_of_preds |= reach.window(p) << d;
      if (d > kWindow) far.push_back(p);
    }
    redundant.assign(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      const int32_t d = pv - reach.pos(row[i]);
      if (d <= kWindow) redundant[i] = (ancestors_of_preds >> (d - 1)) & 1;
    }
    if (!far.empty() && row.size() <= kFewPreds) {
      // A far predecessor u is redundant if it reaches another predecessor
      // w; with few predecessors, try each w the labels do not rule out.
      for (NodeId u : far) {
        candidates.clear();
        for (NodeId w : row) {
          if (w != u && reach.MayReach(u, w)) candidates.push_back(w);
        }
        if (!candidates.empty() && query.ReachesAny(u, candidates)) {
          const size_t i =
              std::lower_bound(row.begin(), row.end(), u) - row.begin();
          redundant[i] = 1;
        }
      }
    } else if (!far.empty()) {
      // Many predecessors: such a w has post(0, w) in [low(0, u),
      // post(0, u)), a range of the predecessors sorted by that label. The
      // query applies the other cuts per candidate and searches only what
      // they leave.
      by_post.clear();
      for (NodeId p : row) by_post.emplace_back(reach.post(0, p), p);
      std::sort(by_post.begin(), by_post.end());
      for (NodeId u : far) {
        candidates.clear();
        auto it = std::lower_bound(by_post.begin(), by_post.end(),
                                   std::make_pair(reach.low(0, u), NodeId{-1}));
        for (; it != by_post.end() && it->first < reach.post(0, u); ++it) {
          if (reach.MayReach(u, it->second)) candidates.push_back(it->second);
        }
        if (!candidates.empty() && query.ReachesAny(u, candidates)) {
          const size_t i =
              std::lower_bound(row.begin(), row.end(), u) - row.begin();
          redundant[i] = 1;
        }
      }
    }
    for (size_t i = 0; i < row.size(); ++i) {
      if (!redundant[i]) dag.preds.items.push_back(row[i]);
    }
    dag.preds.offsets.push_back(static_cast<int32_t>(dag.preds.items.size()));
  }
  dag.preds.items.shrink_to_fit();
  dag.succs = dag.preds.Transpose(n);
  return dag;
}

}  // namespace weft::scheduler
