// Memory planning of a finished plan: lifetimes (lifetimes.h), then one
// arena per device (arena_planner.h), written into the plan. The executor
// places each job's buffer copies at these offsets in one arena per device
// (runtime/buffer_coherence.h).
//
// Copies share addresses only where the plan already orders them, so no
// ordering is added here; spill fitting (scheduler/spill_fitting.h) adds
// spills, fills and orderings where an arena exceeds its budget and fills
// DeviceMemory::spilled_bytes and orderings_added.
#ifndef WEFT_SCHEDULER_MEMORY_MEMORY_PLAN_H_
#define WEFT_SCHEDULER_MEMORY_MEMORY_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::scheduler::memory {

struct MemoryPlanOptions {
  uint64_t alignment = 256;
  // By device; 0 or missing: the device's memory (DeviceBudgets).
  // Reported; spill_fitting.h fits plans to them.
  std::vector<int64_t> budget_bytes;
  // Each device's memory, by device (0 or missing: unknown): budgets above
  // it are clamped to it.
  std::vector<int64_t> device_memory_bytes;
  // ArenaOptions::improve_rounds.
  int improve_rounds = 0;
};

// One device's budget: the one asked for, clamped to the device's memory
// where that is known and smaller; where none is asked for (0), the
// device's memory (0: unknown, no budget).
struct DeviceBudget {
  int64_t bytes = 0;           // 0: none
  bool clamped = false;        // asked for more than the device's memory
  bool device_memory = false;  // bytes is the device's memory
};
std::vector<DeviceBudget> DeviceBudgets(
    absl::Span<const int64_t> budget_bytes,
    absl::Span<const int64_t> device_memory_bytes, int num_devices);

// Bytes node `v`'s own arguments take on a device: its distinct buffers,
// each rounded up to `alignment` (for a control node, every buffer its
// bodies and condition use: all current on its device while it runs).
uint64_t NodeArgumentBytes(const Graph& graph, NodeId v,
                           uint64_t alignment = 256);
// The most NodeArgumentBytes of any node but HOST nodes: no budget below
// it can be met.
uint64_t LargestNodeArgumentBytes(const Graph& graph, uint64_t alignment = 256);

// Device memory the buffers of `plan` take when each is allocated by
// itself for the whole job (no memory plan), by device: every distinct
// buffer a device's nodes use (HOST nodes use host memory; control nodes
// their device's) or an eager copy
// brings there, rounded up to `alignment`.
std::vector<uint64_t> BytesWithoutReuse(const Graph& graph, const Plan& plan,
                                        int num_devices,
                                        uint64_t alignment = 256);
// Device memory control nodes' bodies take beyond what `plan` holds, by
// device: where a body's plan (Plan::bodies, at any depth) runs a node on a
// device on which the job holds none of that node's buffer (not placed
// there by the memory plan, or, without one, not among BytesWithoutReuse's
// buffers of that device), the buffer is allocated there by itself for
// the rest of the job; and where all of a control node's bodies run on
// one device, every buffer the node uses (its condition or selector
// included) is made current there, as the device does before deciding it.
// Bodies planned over several devices do that (CONTROL_HOST, or a body
// that pins a node) unless the memory plan knew their plans (Lifetimes
// reads Plan::bodies: PlanGraph plans memory again once the bodies show
// it), which places those copies;
// bodies on their control node's device take nothing more. Each distinct
// buffer rounded up to `alignment`.
std::vector<uint64_t> BodyBytesBeyondPlan(const Graph& graph, const Plan& plan,
                                          int num_devices,
                                          uint64_t alignment = 256);
// RESOURCE_EXHAUSTED naming the first device where those bytes exceed its
// budget: the plan needs a memory plan (and maybe spills) to run. OK when
// no device has a budget.
absl::Status CheckBudgetsWithoutReuse(const Graph& graph, const Plan& plan,
                                      absl::Span<const DeviceBudget> budgets,
                                      uint64_t alignment = 256);
// Whether CheckBudgetsWithoutReuse refuses.
bool ExceedsBudgetsWithoutReuse(const Graph& graph, const Plan& plan,
                                absl::Span<const DeviceBudget> budgets,
                                uint64_t alignment = 256);

// RESOURCE_EXHAUSTED naming the first node of `plan` (in issue order) whose
// own arguments, the distinct buffers it uses each rounded up to
// `alignment`, exceed the budget of its device: no arena within the budget
// can hold them while it runs. HOST nodes use host memory and are not
// checked; control nodes are. OK when no device has a budget.
absl::Status CheckNodeBudgets(const Graph& graph, const Plan& plan,
                              absl::Span<const DeviceBudget> budgets,
                              uint64_t alignment = 256);

// Fills plan->memory (one per device) and plan->buffers (one per buffer
// copy: uploads first, then by first use), and, where asked, by entry of
// plan->memory, the arena the same call with no improve_rounds would give
// (rounds only shrink an arena). REQUIRES: `plan` is a plan of `graph`.
// Errors as Lifetimes::Compute.
absl::Status PlanMemory(const Graph& graph, const MemoryPlanOptions& options,
                        Plan* plan,
                        std::vector<int64_t>* unimproved_arena_bytes = nullptr);

// options.improve_rounds of re-placement applied to `plan`'s memory plan,
// made by PlanMemory without them: the arenas and offsets PlanMemory with
// them would give, without placing anew (only the conflict graphs and the
// rounds). Where plan->buffers are not PlanMemory's own for this plan,
// the memory is planned anew with the rounds and kept where no arena
// grows. Spills, orderings and bounds stay as they are.
absl::Status ImproveMemoryPlan(const Graph& graph,
                               const MemoryPlanOptions& options, Plan* plan);

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_MEMORY_PLAN_H_
