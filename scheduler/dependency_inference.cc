#include "scheduler/dependency_inference.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/huge_pages.h"
#include "scheduler/status_macros.h"
#include "scheduler/transitive_reducer.h"

namespace weft::scheduler {
namespace {

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

// Finds each node's direct predecessors, one node after another in NodeId
// order (the GrCUDA rule of the file comment). Not thread-safe.
//
// A node's uses are applied one at a time, each as if by a node of its
// own, skipping edges to the node itself. That gives the rule's edges for
// the node's combined access to each buffer: reading and then writing a
// buffer adds the readers before the write (the node's own read among
// them, skipped); writing and then reading it leaves the node listed as a
// reader as well as the last writer, which only repeats edges to the node
// that later nodes get anyway (rows are deduplicated).
class Collector {
 public:
  explicit Collector(const Graph& graph) : graph_(graph) {
    ReserveHuge(buffers_, graph.num_buffers());
    buffers_.resize(graph.num_buffers());
    // One entry per read at most.
    ReserveHuge(readers_, static_cast<size_t>(graph.num_uses()));
  }

  // Appends the distinct predecessors of `v`, sorted, to `csr` as its next
  // row, and returns that row. REQUIRES: called for v = 0, 1, 2, ... in
  // turn.
  absl::Span<const NodeId> Next(NodeId v, Csr& csr) {
    std::vector<NodeId>& items = csr.items;
    const size_t start = items.size();
    for (const BufferUse& use : graph_.Uses(v)) {
      BufferState& s = buffers_[use.buffer];
      if (s.last_writer >= 0 && s.last_writer != v) {
        items.push_back(s.last_writer);  // RAW, WAW
      }
      if (Writes(use.access)) {
        for (int32_t k = s.readers; k >= 0; k = readers_[k].next) {
          if (readers_[k].node != v) items.push_back(readers_[k].node);  // WAR
        }
        s.readers = -1;
        s.last_writer = v;
      } else {
        readers_.push_back({v, s.readers});
        s.readers = static_cast<int32_t>(readers_.size()) - 1;
      }
    }
    for (NodeId p : graph_.After(v)) items.push_back(p);
    items.resize(start +
                 SortUnique(items.data() + start, items.size() - start));
    csr.offsets.push_back(static_cast<int32_t>(items.size()));
    return absl::Span<const NodeId>(items.data() + start, items.size() - start);
  }

 private:
  struct BufferState {
    NodeId last_writer = -1;
    int32_t readers = -1;  // head of the list of readers since that write
  };
  // Readers since the last write, per buffer: singly linked lists in one
  // pool, so no buffer owns an allocation.
  struct Reader {
    NodeId node;
    int32_t next;
  };

  // Sorts row[0, size) and drops repeats; returns how many are left.
  static size_t SortUnique(NodeId* row, size_t size) {
    if (size <= 1) return size;
    if (size <= 16) {
      for (size_t i = 1; i < size; ++i) {
        const NodeId x = row[i];
        size_t j = i;
        for (; j > 0 && row[j - 1] > x; --j) row[j] = row[j - 1];
        row[j] = x;
      }
    } else {
      std::sort(row, row + size);
    }
    return std::unique(row, row + size) - row;
  }

  const Graph& graph_;
  std::vector<BufferState> buffers_;
  std::vector<Reader> readers_;
};

// Room for the common case, every argument and `after` edge distinct.
size_t EdgeRoom(const Graph& graph) {
  return static_cast<size_t>(graph.num_uses() + graph.num_after_edges());
}

void AppendKept(absl::Span<const NodeId> row, const std::vector<uint8_t>& keep,
                Csr& out) {
  for (size_t i = 0; i < row.size(); ++i) {
    if (keep[i]) out.items.push_back(row[i]);
  }
  out.offsets.push_back(static_cast<int32_t>(out.items.size()));
}

// Adds node v's cost to the level totals; `top` is its top level.
void AddNodeLevels(const Graph& graph, NodeId v, double top,
                   CostLevels& levels) {
  levels.top_us[v] = top;
  const double cost = graph.cost_us(v);
  levels.critical_path_us = std::max(levels.critical_path_us, top + cost);
  levels.total_work_us += cost;
  const Engine engine = graph.engine(v);
  if (engine == Engine::kCompute || engine == Engine::kCollective) {
    levels.device_work_us += cost;
  }
}

double TopLevel(const Graph& graph, absl::Span<const NodeId> preds,
                const std::vector<double>& top_us) {
  double top = 0;
  for (NodeId p : preds) top = std::max(top, top_us[p] + graph.cost_us(p));
  return top;
}

// When node order is the topological order: builds dag.succs from
// dag.preds and, with `levels`, the bottom levels, in one backward pass.
// Successor rows are filled from their ends, by descending NodeId, so
// they come out sorted; a node's successors are all done before it, so
// its bottom level is final when the pass reaches it (pushed maxima equal
// the pulled ones).
void BuildSuccsInNodeOrder(const Graph& graph, Dag& dag, CostLevels* levels) {
  const int n = dag.num_nodes();
  Csr& succs = dag.succs;
  // offsets[p] first holds the end of p's row, and moves down to its start
  // as the row fills.
  ReserveHuge(succs.offsets, n + 1);
  succs.offsets.assign(n + 1, 0);
  for (NodeId p : dag.preds.items) ++succs.offsets[p];
  for (int i = 1; i < n; ++i) succs.offsets[i] += succs.offsets[i - 1];
  succs.offsets[n] = static_cast<int32_t>(dag.preds.items.size());
  ReserveHuge(succs.items, dag.preds.items.size());
  succs.items.resize(dag.preds.items.size());
  if (levels == nullptr) {
    for (NodeId v = n - 1; v >= 0; --v) {
      for (NodeId p : dag.preds.Row(v)) succs.items[--succs.offsets[p]] = v;
    }
    return;
  }
  // bottom_us[v] holds the largest bottom level among v's successors until
  // v is reached.
  std::vector<double>& bottom = levels->bottom_us;
  std::vector<int32_t>& hops = levels->bottom_hops;
  for (NodeId v = n - 1; v >= 0; --v) {
    bottom[v] += graph.cost_us(v);
    const double b = bottom[v];
    const int32_t h = hops[v] + 1;
    for (NodeId p : dag.preds.Row(v)) {
      succs.items[--succs.offsets[p]] = v;
      bottom[p] = std::max(bottom[p], b);
      hops[p] = std::max(hops[p], h);
    }
  }
}

// Room for n nodes' levels, all 0.
void InitLevels(int n, CostLevels& levels) {
  levels = CostLevels();
  ReserveHuge(levels.top_us, n);
  ReserveHuge(levels.bottom_us, n);
  ReserveHuge(levels.bottom_hops, n);
  levels.top_us.assign(n, 0);
  levels.bottom_us.assign(n, 0);
  levels.bottom_hops.assign(n, 0);
}

}  // namespace

Csr CollectDependencies(const Graph& graph) {
  const int n = graph.num_nodes();
  Collector collector(graph);
  Csr preds;
  ReserveHuge(preds.offsets, n + 1);
  ReserveHuge(preds.items, EdgeRoom(graph));
  for (NodeId v = 0; v < n; ++v) collector.Next(v, preds);
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

CostLevels ComputeCostLevels(const Graph& graph, const Dag& dag) {
  const int n = dag.num_nodes();
  CostLevels levels;
  InitLevels(n, levels);
  for (NodeId v : dag.order) {
    AddNodeLevels(graph, v, TopLevel(graph, dag.Preds(v), levels.top_us),
                  levels);
  }
  for (auto it = dag.order.rbegin(); it != dag.order.rend(); ++it) {
    const NodeId v = *it;
    double below = 0;
    int32_t hops = 0;
    for (NodeId s : dag.Succs(v)) {
      below = std::max(below, levels.bottom_us[s]);
      hops = std::max(hops, levels.bottom_hops[s] + 1);
    }
    levels.bottom_us[v] = below + graph.cost_us(v);
    levels.bottom_hops[v] = hops;
  }
  return levels;
}

absl::StatusOr<Dag> InferDependencies(const Graph& graph, CostLevels* levels) {
  const int n = graph.num_nodes();
  if (levels != nullptr) InitLevels(n, *levels);
  Dag dag;
  ReserveHuge(dag.preds.offsets, n + 1);
  ReserveHuge(dag.preds.items, EdgeRoom(graph));
  dag.reach = ReachabilityIndex(n);
  ReserveHuge(dag.order, n);
  std::vector<NodeId> pending;  // nodes whose rows Reduce left undecided
  std::vector<uint8_t> keep;

  // One pass in node order finds each node's predecessors and, as long as
  // node order is topological (every edge points back), labels and
  // reduces the node right away: its row is collected at the end of
  // dag.preds and the redundant edges are squeezed out of it in place.
  // Searches run over the rows before it, already final (a pending row
  // keeps all its edges, so every row has the DAG's reachability).
  {
    TransitiveReducer reducer(dag.reach, dag.preds, n);
    Collector collector(graph);
    for (NodeId v = 0; v < n; ++v) {
      const size_t start = dag.preds.items.size();
      const absl::Span<const NodeId> row = collector.Next(v, dag.preds);
      if (!row.empty() && row.back() >= v) {
        // An `after` edge points forward: start over, below.
        dag.order.clear();
        break;
      }
      const uint64_t inherited = dag.reach.Label(v, v, row);
      const std::optional<uint32_t> redundant =
          reducer.Reduce(v, row, inherited);
      // A pending row keeps every edge for now (its levels too are
      // redone).
      if (!redundant.has_value()) pending.push_back(v);
      const uint32_t drop = redundant.value_or(0);
      NodeId* out = dag.preds.items.data() + start;
      double top = 0;
      for (size_t i = 0; i < row.size(); ++i) {
        // drop is 0 beyond TransitiveReducer::kFewPreds predecessors.
        if (drop != 0 && ((drop >> i) & 1)) continue;
        const NodeId p = row[i];
        *out++ = p;  // never ahead of row[i]
        if (levels != nullptr) {
          top = std::max(top, levels->top_us[p] + graph.cost_us(p));
        }
      }
      dag.preds.items.resize(out - dag.preds.items.data());
      dag.preds.offsets.back() = static_cast<int32_t>(dag.preds.items.size());
      if (levels != nullptr) AddNodeLevels(graph, v, top, *levels);
      dag.order.push_back(v);
    }
  }
  const bool forward = static_cast<int>(dag.order.size()) == n;

  // Without node order: the unreduced rows, in a topological order.
  Csr raw;
  if (!forward) {
    // Order first, then label and reduce in that order, and gather the
    // rows by NodeId.
    raw = CollectDependencies(graph);
    WEFT_ASSIGN_OR_RETURN(dag.order, TopologicalOrder(graph, raw));
    pending.clear();
    TransitiveReducer reducer(dag.reach, raw, n);
    std::vector<uint8_t> kept(raw.items.size(), 1);
    for (int32_t i = 0; i < n; ++i) {
      const NodeId v = dag.order[i];
      auto raw_row = raw.Row(v);
      const std::optional<uint32_t> redundant =
          reducer.Reduce(v, raw_row, dag.reach.Label(v, i, raw_row));
      if (!redundant.has_value()) pending.push_back(v);
      const uint32_t drop = redundant.value_or(0);
      for (size_t k = 0; drop != 0 && k < raw_row.size(); ++k) {
        kept[raw.offsets[v] + k] = !((drop >> k) & 1);
      }
    }
    std::sort(pending.begin(), pending.end());
    dag.preds.items.clear();
    dag.preds.offsets.assign(1, 0);
    for (NodeId v = 0; v < n; ++v) {
      for (int32_t k = raw.offsets[v]; k < raw.offsets[v + 1]; ++k) {
        if (kept[k]) dag.preds.items.push_back(raw.items[k]);
      }
      dag.preds.offsets.push_back(static_cast<int32_t>(dag.preds.items.size()));
    }
  }

  if (!pending.empty()) {
    // Some edges need more than the window and short searches: label the
    // intervals (kept in the index for later queries) and redo those rows.
    // In node order, dag.preds holds them whole (with every other row, in
    // part reduced: the same reachability).
    const Csr& rows = forward ? dag.preds : raw;
    dag.reach.set_intervals(IntervalLabels(rows, rows.Transpose(n)));
    ReachabilityQuery query(dag.reach, rows);
    TransitiveReducer reducer(dag.reach, rows, n);
    Csr preds;
    ReserveHuge(preds.offsets, n + 1);
    ReserveHuge(preds.items, dag.preds.items.size());
    size_t next = 0;
    for (NodeId v = 0; v < n; ++v) {
      if (next < pending.size() && pending[next] == v) {
        ++next;
        reducer.ReduceExact(v, rows.Row(v), query, keep);
        AppendKept(rows.Row(v), keep, preds);
      } else {
        preds.AppendRow(dag.preds.Row(v));
      }
    }
    dag.preds = std::move(preds);
  }
  if (forward && pending.empty()) {
    BuildSuccsInNodeOrder(graph, dag, levels);
  } else {
    dag.succs = dag.preds.Transpose(n);
    if (levels != nullptr) *levels = ComputeCostLevels(graph, dag);
  }
  return dag;
}

}  // namespace weft::scheduler
