#include "scheduler/memory/memory_plan.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/memory/arena_planner.h"
#include "scheduler/memory/body_uses.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler::memory {

std::vector<DeviceBudget> DeviceBudgets(
    absl::Span<const int64_t> budget_bytes,
    absl::Span<const int64_t> device_memory_bytes, int num_devices) {
  std::vector<DeviceBudget> budgets(std::max(num_devices, 0));
  for (int d = 0; d < num_devices; ++d) {
    DeviceBudget& b = budgets[d];
    if (d < static_cast<int>(budget_bytes.size())) {
      b.bytes = std::max<int64_t>(budget_bytes[d], 0);
    }
    const int64_t memory = d < static_cast<int>(device_memory_bytes.size())
                               ? device_memory_bytes[d]
                               : 0;
    if (b.bytes == 0) b.bytes = std::max<int64_t>(memory, 0);
    if (b.bytes > 0 && memory > 0 && b.bytes >= memory) {
      b.clamped = b.bytes > memory;
      b.bytes = memory;
      b.device_memory = true;
    }
  }
  return budgets;
}

uint64_t NodeArgumentBytes(const Graph& graph, NodeId v, uint64_t alignment) {
  alignment = std::max<uint64_t>(alignment, 1);
  const absl::Span<const BufferUse> uses = graph.Uses(v);
  uint64_t bytes = 0;
  for (size_t i = 0; i < uses.size(); ++i) {
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) {
      seen = uses[j].buffer == uses[i].buffer;
    }
    if (seen) continue;
    const uint64_t size = graph.buffer_bytes(uses[i].buffer);
    bytes += (size + alignment - 1) / alignment * alignment;
  }
  return bytes;
}

uint64_t LargestNodeArgumentBytes(const Graph& graph, uint64_t alignment) {
  uint64_t largest = 0;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (!UsesDeviceMemory(graph, v)) continue;
    largest = std::max(largest, NodeArgumentBytes(graph, v, alignment));
  }
  return largest;
}

namespace {

// Byte counts by device of distinct buffers: `held` marks each (buffer,
// device) counted, by buffer then device; sizes are rounded up to
// `alignment`.
struct DeviceBytes {
  DeviceBytes(const Graph& graph, int num_devices, uint64_t alignment)
      : graph(graph),
        alignment(std::max<uint64_t>(alignment, 1)),
        bytes(std::max(num_devices, 0), 0),
        held(static_cast<size_t>(graph.num_buffers()) * bytes.size(), 0) {}

  // Counts buffer `b` on `device` unless it is held there already.
  void Add(BufferId b, int device) {
    if (device < 0 || static_cast<size_t>(device) >= bytes.size()) return;
    uint8_t& mark = held[static_cast<size_t>(b) * bytes.size() + device];
    if (mark) return;
    mark = 1;
    const uint64_t size = graph.buffer_bytes(b);
    bytes[device] += (size + alignment - 1) / alignment * alignment;
  }
  // Add for every buffer node `v` of `g` (a graph over the same buffers)
  // uses.
  void AddNode(const Graph& g, NodeId v, int device) {
    for (const BufferUse& use : g.Uses(v)) Add(use.buffer, device);
  }
  // What BytesWithoutReuse counts: every buffer a device node of `plan`
  // uses on its device, and every eager copy's destination.
  void AddPlan(const Plan& plan) {
    for (const PlannedNode& pn : plan.nodes) {
      if (UsesDeviceMemory(graph, pn.node)) AddNode(graph, pn.node, pn.device);
    }
    for (const PlannedCopy& copy : plan.copies) Add(copy.buffer, copy.device);
  }

  const Graph& graph;
  const uint64_t alignment;
  std::vector<uint64_t> bytes;
  std::vector<uint8_t> held;
};

}  // namespace

std::vector<uint64_t> BytesWithoutReuse(const Graph& graph, const Plan& plan,
                                        int num_devices, uint64_t alignment) {
  DeviceBytes counted(graph, num_devices, alignment);
  counted.AddPlan(plan);
  return std::move(counted.bytes);
}

namespace {

// What BodyBytesBeyondPlan counts of `plan`'s control nodes (body_uses.h).
void AddBodiesBytes(const Graph& graph, const Plan& plan,
                    DeviceBytes& counted) {
  for (const PlannedNode& pn : plan.nodes) {
    if (static_cast<size_t>(pn.node) >= plan.bodies.size()) continue;
    ForEachBodyUse(graph, pn.node, plan.bodies[pn.node],
                   [&](BufferId b, int device) { counted.Add(b, device); });
  }
}

}  // namespace

std::vector<uint64_t> BodyBytesBeyondPlan(const Graph& graph, const Plan& plan,
                                          int num_devices, uint64_t alignment) {
  DeviceBytes counted(graph, num_devices, alignment);
  if (!graph.has_control() || plan.bodies.empty()) return counted.bytes;
  // What the plan holds already: its placed copies, or without a memory
  // plan what BytesWithoutReuse counts.
  if (!plan.memory.empty()) {
    for (const PlannedBuffer& pb : plan.buffers)
      counted.Add(pb.buffer, pb.device);
  } else {
    counted.AddPlan(plan);
  }
  std::fill(counted.bytes.begin(), counted.bytes.end(), 0);
  AddBodiesBytes(graph, plan, counted);
  return std::move(counted.bytes);
}

absl::Status CheckBudgetsWithoutReuse(const Graph& graph, const Plan& plan,
                                      absl::Span<const DeviceBudget> budgets,
                                      uint64_t alignment) {
  bool any = false;
  for (const DeviceBudget& budget : budgets) any = any || budget.bytes > 0;
  if (!any) return absl::OkStatus();
  const std::vector<uint64_t> bytes = BytesWithoutReuse(
      graph, plan, static_cast<int>(budgets.size()), alignment);
  for (size_t d = 0; d < budgets.size(); ++d) {
    if (budgets[d].bytes > 0 &&
        bytes[d] > static_cast<uint64_t>(budgets[d].bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the job's buffers, each allocated by itself for the whole job, "
          "need ",
          bytes[d], " bytes on device ", d, ", above the memory budget of ",
          budgets[d].bytes, " bytes",
          budgets[d].device_memory ? " (the device's memory)" : ""));
    }
  }
  return absl::OkStatus();
}

bool ExceedsBudgetsWithoutReuse(const Graph& graph, const Plan& plan,
                                absl::Span<const DeviceBudget> budgets,
                                uint64_t alignment) {
  return !CheckBudgetsWithoutReuse(graph, plan, budgets, alignment).ok();
}

absl::Status CheckNodeBudgets(const Graph& graph, const Plan& plan,
                              absl::Span<const DeviceBudget> budgets,
                              uint64_t alignment) {
  const bool any =
      std::any_of(budgets.begin(), budgets.end(),
                  [](const DeviceBudget& b) { return b.bytes > 0; });
  if (!any) return absl::OkStatus();
  alignment = std::max<uint64_t>(alignment, 1);
  for (const PlannedNode& pn : plan.nodes) {
    if (pn.device < 0 || pn.device >= static_cast<int>(budgets.size())) {
      continue;
    }
    const int64_t budget = budgets[pn.device].bytes;
    if (budget <= 0 || !UsesDeviceMemory(graph, pn.node)) continue;
    const uint64_t bytes = NodeArgumentBytes(graph, pn.node, alignment);
    if (bytes > static_cast<uint64_t>(budget)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "node '", graph.node(pn.node).name, "': ",
          graph.node(pn.node).control != nullptr ? "the buffers its bodies use"
                                                 : "its arguments",
          " need ", bytes, " bytes on device ", pn.device,
          ", above the memory budget of ", budget, " bytes",
          budgets[pn.device].device_memory ? " (the device's memory)" : ""));
    }
  }
  return absl::OkStatus();
}

absl::Status PlanMemory(const Graph& graph, const MemoryPlanOptions& options,
                        Plan* plan,
                        std::vector<int64_t>* unimproved_arena_bytes) {
  WEFT_ASSIGN_OR_RETURN(const Lifetimes lifetimes,
                        Lifetimes::Compute(graph, *plan));
  const std::vector<DeviceBudget> budgets =
      DeviceBudgets(options.budget_bytes, options.device_memory_bytes,
                    lifetimes.num_devices());
  ArenaOptions arena_options;
  arena_options.alignment = options.alignment;
  arena_options.improve_rounds = options.improve_rounds;
  for (const DeviceBudget& b : budgets) {
    arena_options.budget_bytes.push_back(b.bytes);
  }
  const ArenaPlan arenas = PlanArenas(lifetimes, arena_options);
  plan->memory.clear();
  plan->memory.reserve(arenas.devices.size());
  if (unimproved_arena_bytes != nullptr) unimproved_arena_bytes->clear();
  for (const DeviceArena& arena : arenas.devices) {
    DeviceMemory memory;
    memory.device = arena.device;
    memory.arena_bytes = arena.arena_bytes;
    memory.peak_live_bytes = arena.peak_live_bytes;
    memory.lower_bound_bytes = arena.lower_bound_bytes;
    memory.budget_bytes = arena.budget_bytes;
    memory.spilled_bytes = arena.spilled_bytes;
    memory.orderings_added = arena.orderings_added;
    memory.budget_clamped = arena.device < static_cast<int>(budgets.size()) &&
                            budgets[arena.device].clamped;
    plan->memory.push_back(memory);
    if (unimproved_arena_bytes != nullptr) {
      unimproved_arena_bytes->push_back(arena.unimproved_arena_bytes);
    }
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

absl::Status ImproveMemoryPlan(const Graph& graph,
                               const MemoryPlanOptions& options, Plan* plan) {
  if (options.improve_rounds <= 0 || plan->memory.empty()) {
    return absl::OkStatus();
  }
  WEFT_ASSIGN_OR_RETURN(const Lifetimes lifetimes,
                        Lifetimes::Compute(graph, *plan));
  const int n = lifetimes.num_copies();
  bool placed_here =
      static_cast<int>(plan->buffers.size()) == n &&
      static_cast<int>(plan->memory.size()) == lifetimes.num_devices();
  for (int c = 0; placed_here && c < n; ++c) {
    placed_here = plan->buffers[c].buffer == lifetimes.copy(c).buffer &&
                  plan->buffers[c].device == lifetimes.copy(c).device;
  }
  for (int d = 0; placed_here && d < lifetimes.num_devices(); ++d) {
    placed_here = plan->memory[d].device == d;
  }
  if (!placed_here) {
    // Not this plan's own placement (e.g. a relaxed plan that took the
    // places its orderings came from): placed anew with the rounds, kept
    // where no arena grows.
    Plan improved = *plan;
    WEFT_RETURN_IF_ERROR(PlanMemory(graph, options, &improved));
    for (size_t d = 0; d < plan->memory.size(); ++d) {
      if (improved.memory.size() != plan->memory.size() ||
          improved.memory[d].arena_bytes > plan->memory[d].arena_bytes) {
        return absl::OkStatus();
      }
    }
    for (size_t d = 0; d < plan->memory.size(); ++d) {
      plan->memory[d].arena_bytes = improved.memory[d].arena_bytes;
    }
    plan->buffers = std::move(improved.buffers);
    return absl::OkStatus();
  }
  ArenaPlan arenas;
  for (const DeviceMemory& m : plan->memory) {
    DeviceArena arena;
    arena.device = m.device;
    arena.arena_bytes = m.arena_bytes;
    arena.lower_bound_bytes = m.lower_bound_bytes;
    arenas.devices.push_back(arena);
  }
  arenas.offsets.resize(n);
  for (int c = 0; c < n; ++c) arenas.offsets[c] = plan->buffers[c].offset;
  ArenaOptions arena_options;
  arena_options.alignment = options.alignment;
  arena_options.improve_rounds = options.improve_rounds;
  ImproveArenaPlan(lifetimes, arena_options, &arenas);
  for (size_t d = 0; d < plan->memory.size(); ++d) {
    plan->memory[d].arena_bytes = arenas.devices[d].arena_bytes;
  }
  for (int c = 0; c < n; ++c) plan->buffers[c].offset = arenas.offsets[c];
  return absl::OkStatus();
}

}  // namespace weft::scheduler::memory
