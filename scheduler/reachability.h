// Reachability queries on a DAG without an O(V^2) ancestor matrix.
//
// The planner asks "does node u reach node v?" in two places: transitive
// reduction (is a direct predecessor also reachable through another one?)
// and stream recycling (is a stream's last node an ancestor of this node?).
// ReachabilityIndex labels each node once, in topological order, from its
// predecessors alone (O(in-degree) per node, so labels can be built while
// the edges are still being found):
//
//   - its position in a topological order and its depth (longest path, in
//     edges, from a source); a path u -> v needs pos(u) < pos(v) and
//     depth(u) < depth(v);
//   - a 64-node window: which of the 64 nodes just before it in the
//     topological order are its ancestors. A path between two nodes that
//     are at most 64 positions apart only passes through nodes between
//     them, so this answer is exact and costs one bit test.
//
// IntervalLabels add a GRAIL-style negative cut: each node's post-order
// number in a depth-first traversal from the sources, and the smallest
// post-order number among its descendants; u can reach v only if v's
// interval nests in u's. They take a traversal of the whole graph, which on
// typical graphs (layered, pipelines, fork/join, where nearly every query
// ends in the window) costs more than it saves, so they are built only
// where searches turn out to need them: an index may carry them, and a
// ReachabilityQuery builds its own once its searches have entered more than
// a budget of nodes.
//
// ReachabilityQuery answers what the labels cannot settle with a backward
// search from the target that only enters nodes the labels do not rule out,
// and stops at the first hit. Exact always. Worst case, a query visits
// every ancestor of its target.
#ifndef WEFT_SCHEDULER_REACHABILITY_H_
#define WEFT_SCHEDULER_REACHABILITY_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/csr.h"
#include "scheduler/graph.h"

namespace weft::scheduler {

// Interval labels of one depth-first traversal over successors from the
// sources (sources and children in ascending NodeId order). Immutable once
// built; thread-compatible.
class IntervalLabels {
 public:
  IntervalLabels() = default;
  // `preds` holds the predecessors of each node (any edge set with the
  // DAG's reachability), `succs` its transpose. O(V + E).
  IntervalLabels(const Csr& preds, const Csr& succs);

  bool empty() const { return post_.empty(); }
  // v's post-order number, and the smallest post-order number among v and
  // its descendants.
  int32_t post(NodeId v) const { return post_[v]; }
  int32_t low(NodeId v) const { return low_[v]; }
  // False only if `u` cannot reach `v`.
  bool MayReach(NodeId u, NodeId v) const {
    return low_[u] <= low_[v] && post_[v] < post_[u];
  }

 private:
  std::vector<int32_t> post_;
  std::vector<int32_t> low_;
};

// Position, depth and window labels of one DAG (see the file comment), and
// optionally its interval labels. Built node by node; thread-compatible,
// and only read once built.
class ReachabilityIndex {
 public:
  static constexpr int kWindow = 64;

  ReachabilityIndex() = default;
  // Room for `num_nodes` nodes, none labelled yet.
  explicit ReachabilityIndex(int num_nodes);
  // Every node at once, interval labels included: `preds` holds the
  // predecessors of each node (any edge set with the DAG's reachability),
  // `succs` its transpose, `order` a topological order of all nodes.
  ReachabilityIndex(const Csr& preds, const Csr& succs,
                    absl::Span<const NodeId> order);

  // Labels `v` at position `pos` of the topological order. REQUIRES: every
  // node in `preds` (v's predecessors, any edge set with the DAG's
  // reachability) is labelled, at a lower position. Returns v's window
  // without the bits that only its direct predecessors set: bit d - 1 set
  // means the node at position pos - d is an ancestor of one of `preds`
  // (so a predecessor there is reached through another one).
  uint64_t Label(NodeId v, int32_t pos, absl::Span<const NodeId> preds) {
    int32_t depth = 0;
    uint64_t direct = 0;
    uint64_t inherited = 0;
    for (NodeId p : preds) {
      depth = std::max(depth, depth_[p] + 1);
      const int32_t d = pos - pos_[p];
      if (d <= kWindow) {
        direct |= uint64_t{1} << (d - 1);
        if (d < kWindow) inherited |= window_[p] << d;
      }
    }
    pos_[v] = pos;
    depth_[v] = depth;
    window_[v] = direct | inherited;
    return inherited;
  }
  void set_intervals(IntervalLabels intervals) {
    intervals_ = std::move(intervals);
  }
  // Empty unless set.
  const IntervalLabels& intervals() const { return intervals_; }

  int num_nodes() const { return static_cast<int>(pos_.size()); }
  int32_t pos(NodeId v) const { return pos_[v]; }
  int32_t depth(NodeId v) const { return depth_[v]; }
  // Bit k set: the node at position pos(v) - 1 - k is an ancestor of v.
  uint64_t window(NodeId v) const { return window_[v]; }

  // Cheap checks. `u` may reach `v` only if MayReach holds; when
  // pos(v) - pos(u) <= kWindow the window gives the exact answer.
  bool MayReach(NodeId u, NodeId v) const {
    if (pos_[u] >= pos_[v] || depth_[u] >= depth_[v]) return false;
    return intervals_.empty() || intervals_.MayReach(u, v);
  }
  bool InWindow(NodeId u, NodeId v) const {
    return pos_[v] > pos_[u] && pos_[v] - pos_[u] <= kWindow;
  }
  bool WindowBit(NodeId u, NodeId v) const {
    return (window_[v] >> (pos_[v] - pos_[u] - 1)) & 1;
  }

 private:
  std::vector<int32_t> pos_;
  std::vector<int32_t> depth_;
  std::vector<uint64_t> window_;
  IntervalLabels intervals_;
};

// Answers reachability queries. Holds scratch space: not thread-safe; cheap
// to create. `index` and `preds` must outlive it; `preds` is any edge set
// with the DAG's reachability (more edges give earlier hits).
class ReachabilityQuery {
 public:
  // The number of nodes searches may enter, for an index without interval
  // labels, before the query builds its own: -1 for the default, a quarter
  // of the nodes plus 4096 (so the searches never cost much more than the
  // labels would have).
  ReachabilityQuery(const ReachabilityIndex& index, const Csr& preds,
                    int64_t interval_budget = -1);

  // True if there is a path of at least one edge from `from` to `to`.
  bool Reaches(NodeId from, NodeId to);
  // True if `from` reaches any of `targets`.
  bool ReachesAny(NodeId from, absl::Span<const NodeId> targets);
  // As ReachesAny, but gives up (nullopt) rather than enter more than
  // `max_nodes` nodes, and never builds interval labels: usable while
  // nodes that cannot be ancestors of `targets` are still unlabelled.
  std::optional<bool> TryReachesAny(NodeId from,
                                    absl::Span<const NodeId> targets,
                                    int64_t max_nodes);

  // Nodes entered by backward searches so far (for tests and benchmarks).
  int64_t nodes_searched() const { return nodes_searched_; }
  // Whether this query built interval labels of its own.
  bool built_intervals() const { return !own_intervals_.empty(); }

 private:
  enum class Outcome { kNo, kYes, kGaveUp };

  bool MayReach(NodeId u, NodeId v) const {
    return index_.MayReach(u, v) &&
           (own_intervals_.empty() || own_intervals_.MayReach(u, v));
  }
  // Starts a search: true if a target settles it at once; otherwise the
  // targets left to search are on stack_.
  bool Start(NodeId from, absl::Span<const NodeId> targets);
  // Searches from stack_; gives up once nodes_searched_ reaches `stop_at`,
  // leaving stack_ as it was, so that the search can go on.
  Outcome Search(NodeId from, int64_t stop_at);
  void BuildIntervals();

  const ReachabilityIndex& index_;
  const Csr& preds_;
  std::vector<uint32_t> visited_;
  uint32_t stamp_ = 0;
  std::vector<NodeId> stack_;
  int64_t nodes_searched_ = 0;
  int64_t interval_budget_;  // -1: the default
  IntervalLabels own_intervals_;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_REACHABILITY_H_
