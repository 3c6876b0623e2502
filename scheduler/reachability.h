// Reachability queries on a DAG without an O(V^2) ancestor matrix.
//
// The planner asks "does node u reach node v?" in two places: transitive
// reduction (is a direct predecessor also reachable through another one?)
// and stream recycling (is a stream's last node an ancestor of this node?).
// ReachabilityIndex labels every node once, in O(V + E):
//
//   - its position in a topological order and its depth (longest path, in
//     edges, from a source); a path u -> v needs pos(u) < pos(v) and
//     depth(u) < depth(v);
//   - a 64-node window: which of the 64 nodes just before it in the
//     topological order are its ancestors. A path between two nodes that
//     are at most 64 positions apart only passes through nodes between
//     them, so this answer is exact and costs one bit test;
//   - an interval label (its post-order number in a depth-first traversal
//     from the sources, and the smallest post-order number among its
//     descendants). u can reach v only if v's interval nests in u's
//     (GRAIL-style negative cut). More labelings prune a little more but
//     cost a traversal each; with the window, position and depth cuts, one
//     pays best on the graphs we plan.
//
// ReachabilityQuery answers what the labels cannot settle with a backward
// search from the target that only enters nodes the labels do not rule out,
// and stops at the first hit. Exact always; on typical graphs (layered,
// pipelines, fork/join) almost every query ends in the labels. Worst case,
// a query visits every ancestor of its target.
#ifndef WEFT_SCHEDULER_REACHABILITY_H_
#define WEFT_SCHEDULER_REACHABILITY_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/graph.h"

namespace weft::scheduler {

// Compressed sparse rows: row i is items[offsets[i], offsets[i + 1]).
struct Csr {
  std::vector<int32_t> offsets{0};
  std::vector<int32_t> items;

  int rows() const { return static_cast<int>(offsets.size()) - 1; }
  absl::Span<const int32_t> Row(int i) const {
    return absl::Span<const int32_t>(items.data() + offsets[i],
                                     offsets[i + 1] - offsets[i]);
  }
  // The transpose, with `num_cols` rows; each row sorted ascending.
  Csr Transpose(int num_cols) const;
};

// Immutable labels of one DAG. Thread-compatible.
class ReachabilityIndex {
 public:
  static constexpr int kWindow = 64;
  static constexpr int kLabelings = 1;

  ReachabilityIndex() = default;
  // `preds` holds the predecessors of each node (any edge set with the
  // DAG's reachability), `succs` its transpose, `order` a topological order
  // of all nodes.
  ReachabilityIndex(const Csr& preds, const Csr& succs,
                    absl::Span<const NodeId> order);

  int num_nodes() const { return static_cast<int>(pos_.size()); }
  int32_t pos(NodeId v) const { return pos_[v]; }
  int32_t depth(NodeId v) const { return depth_[v]; }
  // Bit k set: the node at position pos(v) - 1 - k is an ancestor of v.
  uint64_t window(NodeId v) const { return window_[v]; }

  // Cheap checks. `u` may reach `v` only if MayReach holds; when
  // pos(v) - pos(u) <= kWindow the window gives the exact answer.
  bool MayReach(NodeId u, NodeId v) const;
  bool InWindow(NodeId u, NodeId v) const {
    return pos_[v] > pos_[u] && pos_[v] - pos_[u] <= kWindow;
  }
  bool WindowBit(NodeId u, NodeId v) const {
    return (window_[v] >> (pos_[v] - pos_[u] - 1)) & 1;
  }
  // Interval labeling k (below kLabelings): v's post-order number, and the
  // smallest post-order number among v and its descendants. u reaches v
  // only if low(k, u) <= low(k, v) and post(k, v) < post(k, u).
  int32_t post(int k, NodeId v) const { return post_[k][v]; }
  int32_t low(int k, NodeId v) const { return low_[k][v]; }

 private:
  std::vector<int32_t> pos_;
  std::vector<int32_t> depth_;
  std::vector<uint64_t> window_;
  // Interval labelings: post-order number, and the smallest post-order
  // number among the node and its descendants.
  std::vector<int32_t> post_[kLabelings];
  std::vector<int32_t> low_[kLabelings];
};

// Answers reachability queries. Holds scratch space: not thread-safe; cheap
// to create. `index` and `preds` must outlive it; `preds` is any edge set
// with the DAG's reachability (more edges give earlier hits).
class ReachabilityQuery {
 public:
  ReachabilityQuery(const ReachabilityIndex& index, const Csr& preds);

  // True if there is a path of at least one edge from `from` to `to`.
  bool Reaches(NodeId from, NodeId to);
  // True if `from` reaches any of `targets`.
  bool ReachesAny(NodeId from, absl::Span<const NodeId> targets);

  // Nodes entered by backward searches so far (for tests and benchmarks).
  int64_t nodes_searched() const { return nodes_searched_; }

 private:
  bool Search(NodeId from);  // from stack_

  const ReachabilityIndex& index_;
  const Csr& preds_;
  std::vector<uint32_t> visited_;
  uint32_t stamp_ = 0;
  std::vector<NodeId> stack_;
  int64_t nodes_searched_ = 0;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_REACHABILITY_H_
