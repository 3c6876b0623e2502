#include "scheduler/memory/memory_plan.h"

#include <utility>

#include "scheduler/memory/arena_planner.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler::memory {

absl::Status PlanMemory(const Graph& graph, const MemoryPlanOptions& options,
                        Plan* plan) {
  WEFT_ASSIGN_OR_RETURN(const Lifetimes lifetimes,
                        Lifetimes::Compute(graph, *plan));
  ArenaOptions arena_options;
  arena_options.alignment = options.alignment;
  arena_options.budget_bytes = options.budget_bytes;
  const ArenaPlan arenas = PlanArenas(lifetimes, arena_options);
  plan->memory.clear();
  plan->memory.reserve(arenas.devices.size());
  for (const DeviceArena& arena : arenas.devices) {
    DeviceMemory memory;
    memory.device = arena.device;
    memory.arena_bytes = arena.arena_bytes;
    memory.peak_live_bytes = arena.peak_live_bytes;
    memory.lower_bound_bytes = arena.lower_bound_bytes;
    memory.budget_bytes = arena.budget_bytes;
    memory.spilled_bytes = arena.spilled_bytes;
    memory.orderings_added = arena.orderings_added;
    plan->memory.push_back(memory);
  }
  plan->buffers.clear();
  plan->buffers.reserve(lifetimes.num_copies());
  for (int c = 0; c < lifetimes.num_copies(); ++c) {
    const BufferCopy& copy = lifetimes.copy(c);
    plan->buffers.push_back({copy.buffer, copy.device, arenas.offsets[c],
                             static_cast<int64_t>(copy.size_bytes)});
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler::memory
