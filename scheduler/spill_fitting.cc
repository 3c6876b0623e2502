#include "scheduler/spill_fitting.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/arena_orderings.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/memory/memory_plan.h"
#include "scheduler/planner.h"
#include "scheduler/spill_rewrite.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler {
namespace {

using memory::Lifetimes;

constexpr int64_t kAlignment = 256;

int64_t ArenaOn(const Plan& plan, int device) {
  for (const DeviceMemory& m : plan.memory) {
    if (m.device == device) return m.arena_bytes;
  }
  return 0;
}

// The first device whose arena exceeds its budget, or -1.
int OverBudget(const Plan& plan, const std::vector<int64_t>& budgets) {
  for (const DeviceMemory& m : plan.memory) {
    if (m.device >= 0 && m.device < static_cast<int>(budgets.size()) &&
        budgets[m.device] > 0 && m.arena_bytes > budgets[m.device]) {
      return m.device;
    }
  }
  return -1;
}

// Bytes by which the arenas exceed their budgets, over all devices.
int64_t Excess(const Plan& plan, const std::vector<int64_t>& budgets) {
  int64_t excess = 0;
  for (const DeviceMemory& m : plan.memory) {
    if (m.device >= 0 && m.device < static_cast<int>(budgets.size()) &&
        budgets[m.device] > 0) {
      excess += std::max<int64_t>(m.arena_bytes - budgets[m.device], 0);
    }
  }
  return excess;
}

}  // namespace

std::vector<int64_t> EffectiveBudgets(const PlannerOptions& options) {
  const std::vector<memory::DeviceBudget> budgets =
      memory::DeviceBudgets(options.memory_budget_bytes,
                            options.device_memory_bytes, options.num_devices);
  std::vector<int64_t> bytes;
  bytes.reserve(budgets.size());
  for (const memory::DeviceBudget& b : budgets) bytes.push_back(b.bytes);
  return bytes;
}

absl::Status FitMemoryBudgets(const Graph& graph, const PlannerOptions& options,
                              Plan* plan, SpillReport* report) {
  SpillReport ignored;
  SpillReport& out = report != nullptr ? *report : ignored;
  out = SpillReport();
  const std::vector<int64_t> budgets = EffectiveBudgets(options);
  if (plan->memory.empty() || OverBudget(*plan, budgets) < 0) {
    return absl::OkStatus();
  }
  if (options.memory_order == MemoryOrderKind::kAuto) {
    // A tight budget: the order that keeps fewer bytes live may fit as it
    // is, or need fewer spills.
    PlannerOptions aware = options;
    aware.memory_order = MemoryOrderKind::kMemoryAware;
    aware.fit_memory = false;
    aware.plan_memory = true;
    absl::StatusOr<Plan> aware_plan = PlanGraph(graph, aware);
    if (aware_plan.ok() &&
        Excess(*aware_plan, budgets) < Excess(*plan, budgets)) {
      *plan = *std::move(aware_plan);
      out.memory_aware_order = true;
      if (OverBudget(*plan, budgets) < 0) return absl::OkStatus();
    }
  }
  // Buffers whose copies the memory plan does not describe stay put.
  std::vector<uint8_t> pinned(graph.num_buffers(), 0);
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (graph.node(v).control == nullptr) continue;
    for (const BufferUse& u : graph.Uses(v)) pinned[u.buffer] = 1;
  }

  // Planned again with the cost model, to compare the relaxed plan.
  PlannerOptions again = options;
  again.memory_order = MemoryOrderKind::kSubmitted;  // the graph's order
  again.fit_memory = false;
  again.plan_memory = true;
  again.simulate = true;
  auto finish = [&](Plan fitted, std::shared_ptr<const Graph> rewritten,
                    const std::vector<std::pair<NodeId, NodeId>>& added) {
    std::vector<int64_t> spilled(budgets.size(), 0);
    for (const PlannedNode& pn : fitted.nodes) {
      if (rewritten->memory_move(pn.node) != MemoryMove::kSpill) continue;
      for (const BufferUse& u : rewritten->Uses(pn.node)) {
        const int64_t bytes =
            static_cast<int64_t>(rewritten->buffer_bytes(u.buffer));
        if (pn.device < static_cast<int>(spilled.size())) {
          spilled[pn.device] += bytes;
        }
        out.spilled_bytes += bytes;
      }
      ++out.spills;
    }
    for (const PlannedNode& pn : fitted.nodes) {
      if (rewritten->memory_move(pn.node) == MemoryMove::kFill) ++out.fills;
    }
    const std::vector<int32_t> orderings =
        CountOrderings(*rewritten, fitted, added);
    for (DeviceMemory& m : fitted.memory) {
      if (m.device < 0 || m.device >= static_cast<int>(spilled.size())) {
        continue;
      }
      m.spilled_bytes = spilled[m.device];
      m.orderings_added = orderings[m.device];
    }
    out.makespan_us = fitted.estimated_makespan_us;
    if (!options.simulate) {
      fitted.estimates.clear();
      fitted.estimated_makespan_us = 0;
      fitted.lower_bound_us = 0;
    }
    fitted.graph = std::move(rewritten);
    *plan = std::move(fitted);
  };

  // Each round fits the latest plan (its own copies, transfers and earlier
  // spills) to the targets, which drop where the offsets fragment.
  RewrittenNodes current;
  current.nodes = graph.nodes();
  std::shared_ptr<const Graph> current_graph;  // null: `graph`
  Plan current_plan = *plan;
  std::vector<int64_t> targets = budgets;
  absl::Status last = absl::OkStatus();
  for (int round = 0; round < kFitRounds; ++round) {
    const Graph& g = current_graph != nullptr ? *current_graph : graph;
    WEFT_ASSIGN_OR_RETURN(const Lifetimes lt,
                          Lifetimes::Compute(g, current_plan));
    const std::vector<std::vector<int32_t>> writes =
        WritePositions(g, current_plan);
    Rewrite rewrite;
    for (int d = 0; d < static_cast<int>(budgets.size()); ++d) {
      if (budgets[d] <= 0 || ArenaOn(current_plan, d) <= budgets[d]) continue;
      ChooseSpills(g, current_plan, lt, d, targets[d], pinned, writes,
                   &rewrite);
    }
    RewrittenNodes built =
        BuildNodes(g, current, current_plan, rewrite, options);
    std::shared_ptr<const Graph> ordered =
        MakeGraph(graph, built.nodes, built.orderings);
    WEFT_ASSIGN_OR_RETURN(Plan ordered_plan, PlanGraph(*ordered, again));
    ++out.rounds;
    const int over = OverBudget(ordered_plan, budgets);
    if (over < 0) {
      out.ordered_makespan_us = ordered_plan.estimated_makespan_us;
      // Only the orderings the arenas need, then planned once more.
      std::vector<uint8_t> devices(budgets.size(), 0);
      for (int d = 0; d < static_cast<int>(budgets.size()); ++d) {
        devices[d] = budgets[d] > 0;
      }
      absl::StatusOr<std::vector<std::pair<NodeId, NodeId>>> needed =
          ArenaOrderings(*ordered, ordered_plan, devices);
      if (needed.ok()) {
        std::shared_ptr<const Graph> relaxed =
            MakeGraph(graph, built.nodes, *needed);
        absl::StatusOr<Plan> relaxed_plan = PlanGraph(*relaxed, again);
        ++out.rounds;
        // Where its own arenas fragment past the budget, the ordered
        // plan's places may still hold for it.
        if (relaxed_plan.ok() && OverBudget(*relaxed_plan, budgets) >= 0) {
          AdoptPlacement(*relaxed, ordered_plan, &*relaxed_plan);
        }
        if (relaxed_plan.ok() && OverBudget(*relaxed_plan, budgets) < 0 &&
            relaxed_plan->estimated_makespan_us <=
                ordered_plan.estimated_makespan_us) {
          out.relaxed = true;
          finish(*std::move(relaxed_plan), std::move(relaxed), *needed);
          return absl::OkStatus();
        }
      }
      finish(std::move(ordered_plan), std::move(ordered), built.orderings);
      return absl::OkStatus();
    }
    const int64_t arena = ArenaOn(ordered_plan, over);
    last = absl::ResourceExhaustedError(absl::StrCat(
        "device ", over, ": the memory plan needs an arena of ", arena,
        " bytes after spilling, above the memory budget of ", budgets[over],
        " bytes"));
    // Where the live bytes fit but the offsets fragment, aim lower.
    for (const DeviceMemory& m : ordered_plan.memory) {
      const int d = m.device;
      if (d < 0 || d >= static_cast<int>(budgets.size()) || budgets[d] <= 0 ||
          m.arena_bytes <= budgets[d] || m.peak_live_bytes > budgets[d]) {
        continue;
      }
      targets[d] = std::max<int64_t>(
          kAlignment, static_cast<int64_t>(static_cast<double>(targets[d]) *
                                           budgets[d] / m.arena_bytes * 0.97));
    }
    current = std::move(built);
    current_graph = std::move(ordered);
    current_plan = std::move(ordered_plan);
  }
  return last;
}

}  // namespace weft::scheduler
