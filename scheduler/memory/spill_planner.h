// Spill/fill planning for one memory and one issue order: which buffers to
// move out when the order's live bytes exceed a budget, chosen by next use
// (Belady's rule: evict the buffer needed again furthest ahead).
//
// The model is memory_order.h's: node by node in `order`, a buffer needs
// memory from its first user to its last (then it is freed; an output is
// downloaded); host data is uploaded at its first user. Each node needs
// its own arguments resident; when they do not fit, resident buffers the
// node does not use are evicted, furthest next use first, and those taken
// before the last that then fit again stay (the last may free more than
// was missing), nearest next use first; the run is repeated taking the
// second furthest instead where it alone frees what is missing with fewer
// bytes, and the run that spills less is reported. An evicted
// buffer that is used again is spilled (written out) and filled back
// before that use.
//
// Planning only: nothing here issues spill or fill nodes. Thread-safe.
#ifndef WEFT_SCHEDULER_MEMORY_SPILL_PLANNER_H_
#define WEFT_SCHEDULER_MEMORY_SPILL_PLANNER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "scheduler/graph.h"

namespace weft::scheduler::memory {

struct SpillPlan {
  int64_t budget_bytes = 0;
  int64_t peak_bytes = 0;     // live bytes of the order without a budget
  int64_t spilled_bytes = 0;  // written out (each filled back once)
  int32_t spills = 0;
  // No eviction choice for this order spills less. The larger of two
  // bounds: at any step, all but `budget_bytes` of the live bytes belong
  // to buffers live across it and not used by it, each spilled at least
  // once, and steps whose live buffers all die before the next one's count
  // different buffers (the heaviest chain of such steps); and what
  // evicting shares of buffers would spill at least, each gap between two
  // uses of a buffer evictable for any share of its bytes (the sweep that
  // covers each step's shortfall from the gaps reaching furthest, optimal
  // for that relaxation).
  int64_t lower_bound_bytes = 0;
};

// The spills of `order` (a topological order of `graph`'s nodes) under
// `budget_bytes`. RESOURCE_EXHAUSTED naming the node when one node's own
// arguments exceed the budget; INVALID_ARGUMENT when `order` has a node id
// out of range.
absl::StatusOr<SpillPlan> PlanSpills(const Graph& graph,
                                     absl::Span<const NodeId> order,
                                     int64_t budget_bytes);

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_SPILL_PLANNER_H_
