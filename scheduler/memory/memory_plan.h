// Memory planning of a finished plan: lifetimes (lifetimes.h), then one
// arena per device (arena_planner.h), written into the plan.
//
// What comes later fits here: spilling to a budget (a copy moved out and
// back: DeviceMemory::spilled_bytes), orderings added so that copies can
// share addresses (DeviceMemory::orderings_added), and the executor
// placing copies at their offsets.
#ifndef WEFT_SCHEDULER_MEMORY_MEMORY_PLAN_H_
#define WEFT_SCHEDULER_MEMORY_MEMORY_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::scheduler::memory {

struct MemoryPlanOptions {
  uint64_t alignment = 256;
  // By device; 0 or missing: no budget. Reported only.
  std::vector<int64_t> budget_bytes;
};

// Fills plan->memory (one per device) and plan->buffers (one per buffer
// copy: uploads first, then by first use). REQUIRES: `plan` is a plan of
// `graph`. Errors as Lifetimes::Compute.
absl::Status PlanMemory(const Graph& graph, const MemoryPlanOptions& options,
                        Plan* plan);

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_MEMORY_PLAN_H_
