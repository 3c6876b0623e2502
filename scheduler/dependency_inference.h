// Dependency inference: which nodes must finish before which.
//
// Dependencies come from buffer access, in node order (the GrCUDA rule): a
// node depends on the last writer of every buffer it touches (read after
// write, write after write) and, if it writes the buffer, on every reader
// since that write (write after read). Two readers never depend on each
// other. Explicit `after` edges are added, and may point at later nodes as
// long as no cycle results. The edges are then transitively reduced: a
// dependency u -> v is kept only if no other path leads from u to v.
//
// How: one pass in node order finds each node's predecessors (readers of a
// buffer since its last write are kept in linked lists in one pool) and,
// as long as node order is topological (no `after` edge points forward),
// labels the node in the reachability index (reachability.h) and reduces
// its row at once, in place (the unreduced rows are not kept): a
// predecessor within 64 positions is redundant if the
// window of another predecessor holds it (one bit test); a farther one u
// is checked against the other predecessors w, by u's window where w lies
// within 64 positions after u, otherwise by a short backward search. The
// top cost levels follow in the same pass; one backward pass then builds
// the successor rows and the bottom levels. An `after` edge pointing
// forward costs a second collection, a topological sort (O(V log V + E))
// and a pass in that order. Rows the window and short searches cannot settle
// (more than 16 predecessors, or searches past their budget) are redone
// with interval labels (built only then) and a sorted range scan.
// Near-linear on typical graphs; the worst case is O(V * E).
#ifndef WEFT_SCHEDULER_DEPENDENCY_INFERENCE_H_
#define WEFT_SCHEDULER_DEPENDENCY_INFERENCE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "scheduler/graph.h"
#include "scheduler/reachability.h"

namespace weft::scheduler {

// The dependency DAG of a graph. Rows are indexed by NodeId and sorted by
// NodeId. Immutable once built; thread-compatible.
struct Dag {
  Csr preds;                  // direct predecessors, transitively reduced
  Csr succs;                  // transpose of preds
  std::vector<NodeId> order;  // a topological order: the issue order
  ReachabilityIndex reach;

  int num_nodes() const { return static_cast<int>(order.size()); }
  absl::Span<const NodeId> Preds(NodeId v) const { return preds.Row(v); }
  absl::Span<const NodeId> Succs(NodeId v) const { return succs.Row(v); }
  // Position of `v` in `order`.
  int32_t pos(NodeId v) const { return reach.pos(v); }
};

// Static cost levels of a DAG: they look at dependencies and
// NodeSpec::cost_us only (the cost model, cost_model.h, uses them).
struct CostLevels {
  // By NodeId: the longest cost-weighted path from a source to the node's
  // start (its earliest start on unlimited hardware).
  std::vector<double> top_us;
  // By NodeId: the longest cost-weighted path from the node's start to the
  // end of a sink, the node's own cost included (its rank).
  std::vector<double> bottom_us;
  // By NodeId: the longest path to a sink counted in edges (ties in rank).
  std::vector<int32_t> bottom_hops;
  double critical_path_us = 0;
  double total_work_us = 0;   // every node
  double device_work_us = 0;  // COMPUTE and COLLECTIVE nodes
};

// Unreduced dependencies: for every node, its distinct direct predecessors
// from buffer access and `after`, sorted by NodeId.
Csr CollectDependencies(const Graph& graph);

// A topological order of `preds`. Among ready nodes the smallest NodeId goes
// first, so the node order is kept wherever it is valid. On a cycle returns
// INVALID_ARGUMENT naming an `after` edge on it, e.g.
// "graph.nodes[0].after[1]: 'c' closes a dependency cycle: a -> b -> c -> a".
absl::StatusOr<std::vector<NodeId>> TopologicalOrder(const Graph& graph,
                                                     const Csr& preds);

// Fails with TopologicalOrder's error if `after` and the inferred edges
// form a cycle.
absl::Status CheckAcyclic(const Graph& graph);

// The whole analysis. With `levels`, also fills the cost levels, as
// ComputeCostLevels would, in the same passes. Thread-safe (stateless).
absl::StatusOr<Dag> InferDependencies(const Graph& graph,
                                      CostLevels* levels = nullptr);

// The cost levels of `dag`, built from `graph`. O(V + E). Thread-safe
// (stateless).
CostLevels ComputeCostLevels(const Graph& graph, const Dag& dag);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_DEPENDENCY_INFERENCE_H_
