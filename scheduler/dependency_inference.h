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
// Cost, for V nodes, A buffer arguments and E inferred edges (E <= A plus the
// `after` edges): collecting edges O(V + A + E); topological order O(V + E)
// when every edge points forward in node order, O(V log V + E) otherwise;
// reachability labels O(V + E) (reachability.h); reduction: an edge between
// nodes at most 64 positions apart in the topological order costs one bit
// test; a longer edge u -> v is checked against the other predecessors of v
// whose interval labels nest in u's (found by a sorted range scan,
// O(d log d) for in-degree d), then by one backward search over the
// candidates. Near-linear on typical graphs; the worst case is O(V * E).
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
  Csr preds;      // direct predecessors, transitively reduced
  Csr succs;      // transpose of preds
  Csr raw_preds;  // before reduction (same reachability; used by queries)
  std::vector<NodeId> order;  // a topological order: the issue order
  ReachabilityIndex reach;

  int num_nodes() const { return static_cast<int>(order.size()); }
  absl::Span<const NodeId> Preds(NodeId v) const { return preds.Row(v); }
  absl::Span<const NodeId> Succs(NodeId v) const { return succs.Row(v); }
  // Position of `v` in `order`.
  int32_t pos(NodeId v) const { return reach.pos(v); }
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

// The whole analysis. Thread-safe (stateless).
absl::StatusOr<Dag> InferDependencies(const Graph& graph);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_DEPENDENCY_INFERENCE_H_
