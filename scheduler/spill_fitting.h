// Fitting a plan into per-device memory budgets with spills and fills
// (QNN HTP's spill/fill step, seed 004).
//
// When a device's arena (scheduler/memory/memory_plan.h) exceeds its
// budget, the plan's copies on that device are run through Belady's rule
// in the order the device uses them: before each use the copies it needs
// are resident; when they do not fit, the resident copy used again
// furthest ahead is evicted, until they do (where the last copy evicted
// frees more than was missing, those evicted before it that fit again
// stay). A second rule takes the second furthest instead where it alone
// frees what is missing with fewer bytes; per device, the rule whose
// spills and fills move fewer bytes is kept (spill_rewrite.h). An evicted copy
// whose buffer was written is spilled (a kSpillOp node copies it to host memory
// after its last use before the eviction); its next use is preceded by a fill
// (kFillOp) that makes it current again, at a place of its own. Host data is
// then not uploaded before the first node but filled before its first use.
// Fills start as early as the memory they need is free (up to kFillLead uses
// ahead), on a COPY stream, so the compute streams do not wait for them.
//
// The spills and fills are nodes of a new graph: the submitted nodes in
// the plan's issue order (a topological order, so what depends on what is
// unchanged), each pinned to its planned device, with the spills and fills
// between them and the orderings that keep the device's live bytes at
// Belady's: the device's uses in that order, each spill before the use
// that needs its memory, each fill after the uses that free its memory.
// The new graph is planned again (its nodes keep their devices), its
// memory planned, and if an arena still exceeds its budget (the offsets
// fragment) the device's target is lowered and the fitting tried again, up
// to kFitRounds times.
//
// Then the orderings are relaxed (QNN's re-scheduling for parallelism):
// the device order is replaced by only the orderings an arena needs (a
// copy before every copy placed over it), the graph planned once more, and
// that plan kept when its arenas fit and it finishes no later. Two arenas
// are tried: the ordered plan's own, and one that uses the budget's slack
// to put each copy on memory freed long before (slack_placement.h), whose
// orderings the plan mostly keeps already; the relaxed plan that finishes
// first is kept.
//
// With MemoryOrderKind::kAuto, where fitting the order chosen first spills
// (or fits nothing), the other order (submitted or memory-aware) is fitted
// too, and the plan that finishes first is kept.
#ifndef WEFT_SCHEDULER_SPILL_FITTING_H_
#define WEFT_SCHEDULER_SPILL_FITTING_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"
#include "scheduler/planner_options.h"

namespace weft::scheduler {

inline constexpr int kFitRounds = 6;

// What one fitting did, for reports and benchmarks.
struct SpillReport {
  int64_t spilled_bytes = 0;  // over all devices
  int spills = 0;
  int fills = 0;
  int rounds = 0;  // plans of a rewritten graph made
  // Estimated makespans (0 when the plans were not simulated): of the plan
  // with the device order, and of the plan kept.
  double ordered_makespan_us = 0;
  double makespan_us = 0;
  bool relaxed = false;  // the relaxed plan was kept
  // MemoryOrderKind::kAuto: the plan issued in the memory-aware order was
  // the one fitted (or fitted as it was).
  bool memory_aware_order = false;
};

// The budget of each device that fitting aims for: options'
// memory_budget_bytes (clamped to the device's memory), or the device's
// memory where the budget is 0 or missing (0: no budget).
std::vector<int64_t> EffectiveBudgets(const PlannerOptions& options);

// If `plan` (a plan of `graph` with its memory planned) has a device whose
// arena exceeds its budget, replaces it with a plan of a rewritten graph
// with spills and fills, held in plan->graph, whose arenas fit; otherwise
// leaves it. With options.memory_order kAuto the graph is first planned in
// the memory-aware order: that plan is kept if it fits as it is, and
// fitted instead of `plan` if it exceeds the budgets by less.
// RESOURCE_EXHAUSTED naming the device, its arena and budget when no fitting
// fits; errors of PlanGraph otherwise. `report` may be null.
absl::Status FitMemoryBudgets(const Graph& graph, const PlannerOptions& options,
                              Plan* plan, SpillReport* report = nullptr);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_SPILL_FITTING_H_
