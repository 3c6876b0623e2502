// TransitiveReducer: the transitive reduction of dependency rows, one node
// at a time in topological order (dependency_inference.h). For a node's
// direct predecessors it finds those another one of them reaches, which
// are redundant: by the reachability index's 64-node window where it can
// (one bit test), by a short, budgeted backward search otherwise, and
// (ReduceExact) by interval labels and a sorted range scan for the rows
// those cannot settle.
//
// Not thread-safe.
#ifndef WEFT_SCHEDULER_TRANSITIVE_REDUCER_H_
#define WEFT_SCHEDULER_TRANSITIVE_REDUCER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/csr.h"
#include "scheduler/graph.h"
#include "scheduler/reachability.h"

namespace weft::scheduler {

class TransitiveReducer {
 public:
  // Searches (backward over `raw`) may enter this many nodes per edge
  // before the edge is left to the interval labels ...
  static constexpr int64_t kSearchLimit = 256;
  // ... and this many per node of the graph, plus kSearchSlack, in all.
  static constexpr int64_t kSearchSlack = 4096;
  // Rows longer than this are left to ReduceExact.
  static constexpr size_t kFewPreds = 16;

  // `reach` labels (or will label) `num_nodes` nodes; `raw` holds the rows
  // searches run over. Both must outlive the reducer.
  TransitiveReducer(const ReachabilityIndex& reach, const Csr& raw,
                    int num_nodes);

  // Which of `row`, the direct predecessors of `v`, are redundant: returns
  // a mask (bit i: row[i] is). `inherited` is what Label returned for v.
  // REQUIRES: v and its ancestors are labelled in the index. Returns
  // nullopt if some edge could not be settled with the window and a short
  // search (or the row is longer than kFewPreds): ReduceExact must decide
  // the row.
  std::optional<uint32_t> Reduce(NodeId v, absl::Span<const NodeId> row,
                                 uint64_t inherited);

  // As Reduce, for any row and always deciding: sets keep[i] to whether
  // row[i] stays. `query` runs over an index that carries interval labels.
  void ReduceExact(NodeId v, absl::Span<const NodeId> row,
                   ReachabilityQuery& query, std::vector<uint8_t>& keep);

 private:
  // Settles the predecessors within the window of v (at position pv): one
  // is redundant if the ancestors of the others include it. True if some
  // lie beyond the window.
  bool ReduceInWindow(int32_t pv, absl::Span<const NodeId> row,
                      std::vector<uint8_t>& keep) const;

  const ReachabilityIndex& reach_;
  ReachabilityQuery query_;
  const int64_t budget_;
  std::vector<NodeId> candidates_;
  std::vector<size_t> far_;
  std::vector<std::pair<int32_t, NodeId>> by_post_;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_TRANSITIVE_REDUCER_H_
