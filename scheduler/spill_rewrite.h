// The rewrite that fits a plan's devices into their memory budgets: which
// copies are spilled and filled back (Belady's rule over the uses of a
// device's copies in issue order), and the rewritten graph's nodes
// (spill_fitting.h says how the rounds use them). Pure functions.
#ifndef WEFT_SCHEDULER_SPILL_REWRITE_H_
#define WEFT_SCHEDULER_SPILL_REWRITE_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "scheduler/graph.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/plan.h"
#include "scheduler/planner_options.h"

namespace weft::scheduler {

// Fills start at most this many uses of their device ahead of the use
// that needs them.
inline constexpr int kFillLead = 64;

// A spill the fitting inserts: after the use at issue position `after`
// (the copy's last before its eviction), before the use at `before` (the
// one that needs its memory).
struct Spill {
  BufferId buffer = -1;
  int device = 0;
  int32_t after = 0;
  int32_t before = 0;
};

// A fill: before the use at `before`; it may start after the use at
// `start` (-1: from the beginning) and after the spills in `after_spills`
// (indices into the spills), once the memory it takes is free.
struct Fill {
  BufferId buffer = -1;
  int device = 0;
  int32_t before = 0;
  int32_t start = -1;
  std::vector<int32_t> after_spills;
};

// Every spill, fill and ordering of one rewrite.
struct Rewrite {
  std::vector<Spill> spills;
  std::vector<Fill> fills;
  // Orderings between issue positions: (earlier, later).
  std::vector<std::pair<int32_t, int32_t>> orders;
  // (spill index, issue position that must follow it).
  std::vector<std::pair<int32_t, int32_t>> spill_before;
};

// The rewritten graph's nodes: `graph`'s nodes in `plan`'s issue order,
// pinned to their devices, with the spills and fills of a Rewrite between
// them, and apart from them the orderings that keep each device's live
// bytes at Belady's, as (earlier, later) node ids.
struct RewrittenNodes {
  std::vector<NodeSpec> nodes;
  std::vector<std::pair<NodeId, NodeId>> orderings;
};

// Issue positions where each buffer is written (ascending), to tell
// whether a copy about to be evicted holds a version nothing else has.
std::vector<std::vector<int32_t>> WritePositions(const Graph& graph,
                                                 const Plan& plan);

// How ChooseSpills picks each victim among the resident copies the step
// does not use.
enum class EvictionRule {
  kFurthest,  // the one used again furthest ahead (Belady's rule)
  // The second furthest instead where it alone frees what is missing with
  // fewer bytes than the furthest: less traffic where sizes differ.
  kTighter,
};
inline constexpr EvictionRule kEvictionRules[] = {EvictionRule::kFurthest,
                                                  EvictionRule::kTighter};

// Victims by `rule` over the uses of device `device`'s copies in `plan`'s
// issue order (`lt`, its lifetimes), under `target` bytes (victims taken
// before the last one that then fit again stay resident, nearest next use
// first, as in memory/spill_planner.h): appends the
// spills, fills and orderings to `rewrite`. Copies of `pinned_buffer`s
// stay resident. `writes`: WritePositions.
void ChooseSpills(const Graph& graph, const Plan& plan,
                  const memory::Lifetimes& lt, int device, int64_t target,
                  const std::vector<uint8_t>& pinned_buffer,
                  const std::vector<std::vector<int32_t>>& writes,
                  EvictionRule rule, Rewrite* rewrite);

// Bytes a rewrite moves: its spills' and fills' buffers.
int64_t TrafficBytes(const Graph& graph, const Rewrite& rewrite);

// The nodes of the graph that `rewrite` makes of `graph` (whose nodes
// without memory orderings are `current`) and its plan `plan`.
RewrittenNodes BuildNodes(const Graph& graph, const RewrittenNodes& current,
                          const Plan& plan, const Rewrite& rewrite,
                          const PlannerOptions& options);

// A graph of `graph`'s buffers and modules and `nodes`, with `orderings`
// added as `after` edges.
std::shared_ptr<const Graph> MakeGraph(
    const Graph& graph, std::vector<NodeSpec> nodes,
    const std::vector<std::pair<NodeId, NodeId>>& orderings);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_SPILL_REWRITE_H_
