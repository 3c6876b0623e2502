// Issue orders of a DAG: the topological orders a plan is placed and
// issued in (plan_search.h).
//
// PriorityOrder and RankOrder are list orders by a key (HEFT's upward
// rank, or ranks the search perturbed); EarliestStartOrder walks the nodes
// as they could start on given devices, their uploads queued in that
// order; IssueByStart reissues a DAG by estimated starts; HasOneOrder
// tells a DAG that has no other order. Each is O((V + E) log V) or less
// and the same on every run.
#ifndef WEFT_SCHEDULER_ISSUE_ORDERS_H_
#define WEFT_SCHEDULER_ISSUE_ORDERS_H_

#include <vector>

#include "absl/types/span.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/topology.h"

namespace weft::scheduler {

// A topological order that takes, among the nodes whose predecessors are
// all taken, the one with the highest `key` (by NodeId; ties in program
// order).
std::vector<NodeId> PriorityOrder(const std::vector<double>& key,
                                  const Dag& dag);

// PriorityOrder by HEFT's upward rank (`levels.bottom_us`): the longest
// path from a node's start to the end of the graph.
std::vector<NodeId> RankOrder(const CostLevels& levels, const Dag& dag);

// A topological order that takes next, among the nodes whose predecessors
// are all taken, the one that can start first on its device in `device`
// (by NodeId; negative: the host): after its predecessors' estimated ends
// (each its start plus its cost) and after the uploads of the host data it
// is the first to use on its device, queued on that device's upload
// engine behind the uploads of the nodes taken before it. Ties go to the
// higher rank, then program order: `levels.bottom_us`, where the last
// writer of an output also counts the downloads of that output and of
// those after it (outputs go down in buffer order, spread here over the
// devices). Ranks alone take a node whose long upload finishes late
// before one whose short upload lets it run while the long one is under
// way; the device policy books uploads in the order it walks the nodes.
// REQUIRES: `levels` are the DAG's; `topology` describes num_devices.
std::vector<NodeId> EarliestStartOrder(const Graph& graph, const Dag& dag,
                                       absl::Span<const int> device,
                                       const CostLevels& levels,
                                       const Topology& topology,
                                       int num_devices);

// Reissues `dag` by estimated start (`start_us`, by NodeId), ties in the
// current order, and relabels the reachability index for it. Leaves `dag`
// as it is if that order is not topological.
void IssueByStart(const std::vector<double>& start_us, Dag& dag);

// True when `dag` has a single topological order: each node in its order
// depends directly on the one before it. Any other walk or issue order of
// such a graph is the same order.
bool HasOneOrder(const Dag& dag);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_ISSUE_ORDERS_H_
