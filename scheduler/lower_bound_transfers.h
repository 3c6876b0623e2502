// The lower bound's transfer-order terms (lower_bound.h): host data
// before its first device user and the rest of the graph after that user,
// outputs after their last writer and the work that must precede it. On
// graphs of at most 4096 nodes they weigh the work between two nodes from
// bitsets of every node's ancestors and descendants, within a budget of
// visited positions.
#ifndef WEFT_SCHEDULER_LOWER_BOUND_TRANSFERS_H_
#define WEFT_SCHEDULER_LOWER_BOUND_TRANSFERS_H_

#include <vector>

#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/lower_bound.h"
#include "scheduler/reach_sets.h"
#include "scheduler/topology.h"

namespace weft::scheduler::bounds {

// Sets terms.uploads_us and terms.downloads_us from every node's head and
// tail (by NodeId, as ComputeLowerBound finds them); `reach`: the DAG's
// reach sets, or null (on larger graphs) for the terms without the work
// between nodes. REQUIRES: `dag` is
// InferDependencies(graph) and the topology describes at least
// options.num_devices devices.
void TransferOrderTerms(const Graph& graph, const Dag& dag,
                        const LowerBoundOptions& options,
                        const Topology& topology,
                        const std::vector<double>& head,
                        const std::vector<double>& tail, const ReachSets* reach,
                        LowerBoundTerms& terms);

}  // namespace weft::scheduler::bounds

#endif  // WEFT_SCHEDULER_LOWER_BOUND_TRANSFERS_H_
