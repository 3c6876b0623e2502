// Orderings that let a plan's buffer copies share addresses in any plan
// of its graph, and their use after spill fitting (spill_fitting.h): the
// orderings an arena needs, a placement carried over to another plan of
// the same graph where it still holds, and the orderings a plan keeps.
#ifndef WEFT_SCHEDULER_ARENA_ORDERINGS_H_
#define WEFT_SCHEDULER_ARENA_ORDERINGS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::scheduler {

// The orderings that keep `plan`'s arenas on `devices` (a flag by device)
// valid in any plan of `graph`: for two copies placed over each other,
// every use of the earlier before every use of the later. As (earlier,
// later) node ids. Errors of memory::Lifetimes::Compute.
absl::StatusOr<std::vector<std::pair<NodeId, NodeId>>> ArenaOrderings(
    const Graph& graph, const Plan& plan, const std::vector<uint8_t>& devices);

// Gives `plan` the places of `placed` (a plan of the same graph) when it
// has the same copies and every two copies placed over each other there
// are ordered in `plan` too; leaves it otherwise.
void AdoptPlacement(const Graph& graph, const Plan& placed, Plan* plan);

// Orderings of `added` that `plan` keeps as direct dependencies between
// nodes sharing no buffer (that no data dependency implies), by the
// device of the later node.
std::vector<int32_t> CountOrderings(
    const Graph& graph, const Plan& plan,
    const std::vector<std::pair<NodeId, NodeId>>& added);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_ARENA_ORDERINGS_H_
