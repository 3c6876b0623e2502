// Dependency-based assignment: NNC's static schedule, with a real rank.
//
// Every node still without a stream (after labels and independent engines)
// is placed by one walk in issue order. An unassigned node takes a
// recyclable stream of its device and engine: one whose last node is its
// ancestor, so the reuse adds no ordering (one whose last node is a direct
// predecessor is preferred, then a stream that already ran the node's op,
// then the lowest id); else a new stream while its
// device and engine have fewer than max_streams_per_device; else (the cap
// is soft) the stream that delays it least: the one whose node just before
// it in issue order is expected to finish first on unlimited hardware
// (ties: the node's op, then the lowest id). That sharing orders the node
// after that node, and is recorded in added_orderings when the DAG does not
// already order them (only if options.record_choices). The stream then follows
// the node's highest-ranked unassigned successor on the same device and engine,
// and so on down the chain. Rank: the longest cost-weighted path to a sink,
// then the longest path in edges; ties prefer a successor whose op already ran
// on the stream, then the lower node id.
//
// A copy between devices (StreamContext::peer_device) also gets a peer
// stream when the walk reaches it: a COPY stream of its source device,
// chosen by the same rules (recycled, else new below the cap, else the one
// that delays it least, recording the added ordering). Chains never follow
// a peer stream.
//
// Cost, with many streams per device: each chain start looks at its
// group's streams once, a block of four at a time (streams whose last node
// comes before it, the delay each would add), and asks about ancestry only
// where the answer can still change the choice: never when a stream's
// last node is a direct predecessor, and not of a stream the levels
// already rule out (an ancestor of the node has a longer path in edges to
// a sink and, with costs neither negative nor NaN, ends no later than the
// node can start; CostLevels must be those of the DAG). The delays are
// only compared when the cap is reached and nothing is recyclable. The
// remaining questions are mostly about nodes a few hundred positions
// apart: the walk keeps each node's ancestors among the 255 positions
// before it (from its predecessors', a few words a node, in a ring of the
// last 256 positions; the first 64 are ReachabilityIndex's window), and a
// question reaching further back is a short forward search that the
// levels prune and the ring ends, handed to the reachability query
// (reachability.h) past a few hundred nodes.
#ifndef WEFT_SCHEDULER_PASSES_ASSIGN_BY_DEPENDENCY_PASS_H_
#define WEFT_SCHEDULER_PASSES_ASSIGN_BY_DEPENDENCY_PASS_H_

#include "scheduler/passes/stream_pass.h"

namespace weft::scheduler {

class AssignByDependencyPass final : public StreamPass {
 public:
  absl::string_view name() const override { return "assign_by_dependency"; }
  // INVALID_ARGUMENT if options.max_streams_per_device < 1.
  absl::Status Run(StreamContext& context) const override;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_ASSIGN_BY_DEPENDENCY_PASS_H_
