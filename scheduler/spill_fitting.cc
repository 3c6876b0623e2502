#include "scheduler/spill_fitting.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/arena_orderings.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/memory/memory_plan.h"
#include "scheduler/planner.h"
#include "scheduler/slack_placement.h"
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

namespace {

int64_t TotalArena(const Plan& plan) {
  int64_t bytes = 0;
  for (const DeviceMemory& m : plan.memory) bytes += m.arena_bytes;
  return bytes;
}

// Whether plan `a` finishes before `b`, or as early with arenas no larger
// in all; with `ties`, whether it finishes no later.
bool Faster(const Plan& a, const Plan& b, bool ties) {
  if (a.estimated_makespan_us != b.estimated_makespan_us || ties) {
    return a.estimated_makespan_us <= b.estimated_makespan_us;
  }
  return TotalArena(a) < TotalArena(b);
}

// A fitted plan of a rewritten graph, and the orderings the rewrite added
// to the submitted nodes' dependencies.
struct Fitted {
  Plan plan;
  std::shared_ptr<const Graph> graph;
  std::vector<std::pair<NodeId, NodeId>> added;
};

// The plan to keep of `ordered` (planned as `ordered_plan`, which fits its
// budgets): `ordered_plan` itself, or a plan of the same nodes with only
// the orderings an arena needs, when that fits and finishes no later. The
// arenas tried: the ordered plan's own (tight) and one placed within the
// budgets where memory was freed longest ago (slack_placement.h), which
// orders fewer nodes that could run side by side. The relaxed plan of the
// tight arena is kept over the ordered plan when it finishes no later (it
// leaves the executor more freedom); the slack one only when it finishes
// earlier, or as early in less memory.
Fitted Relax(const Graph& graph, const RewrittenNodes& built,
             std::shared_ptr<const Graph> ordered, Plan ordered_plan,
             const std::vector<int64_t>& budgets, const PlannerOptions& again,
             SpillReport& out) {
  std::vector<uint8_t> devices(budgets.size(), 0);
  for (int d = 0; d < static_cast<int>(budgets.size()); ++d) {
    devices[d] = budgets[d] > 0;
  }
  std::vector<Plan> placements;
  placements.push_back(ordered_plan);
  if (absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(*ordered, ordered_plan);
      lt.ok()) {
    if (std::optional<Plan> slack = SlackPlacement(ordered_plan, *lt, budgets);
        slack.has_value()) {
      placements.push_back(*std::move(slack));
    }
  }
  Fitted best{std::move(ordered_plan), ordered, built.orderings};
  out.relaxed = false;
  for (size_t k = 0; k < placements.size(); ++k) {
    const Plan& placed = placements[k];
    absl::StatusOr<std::vector<std::pair<NodeId, NodeId>>> needed =
        ArenaOrderings(*ordered, placed, devices);
    if (!needed.ok()) continue;
    std::shared_ptr<const Graph> relaxed =
        MakeGraph(graph, built.nodes, *needed);
    absl::StatusOr<Plan> relaxed_plan = PlanGraph(*relaxed, again);
    ++out.rounds;
    // Where its own arenas fragment past the budget, the places that gave
    // the orderings hold for it.
    if (relaxed_plan.ok() && OverBudget(*relaxed_plan, budgets) >= 0) {
      AdoptPlacement(*relaxed, placed, &*relaxed_plan);
    }
    if (relaxed_plan.ok() && OverBudget(*relaxed_plan, budgets) < 0 &&
        Faster(*relaxed_plan, best.plan, /*ties=*/k == 0)) {
      out.relaxed = true;
      best = Fitted{*std::move(relaxed_plan), std::move(relaxed),
                    *std::move(needed)};
    }
  }
  return best;
}

// Rounds of spills and fills from `plan` (a plan of `graph` that exceeds a
// budget), each fitting the latest plan (its own copies, transfers and
// earlier spills) to the targets, which drop where the offsets fragment.
absl::StatusOr<Fitted> FitRounds(const Graph& graph, const Plan& plan,
                                 const std::vector<int64_t>& budgets,
                                 const std::vector<uint8_t>& pinned,
                                 const PlannerOptions& options,
                                 const PlannerOptions& again,
                                 SpillReport& out) {
  RewrittenNodes current;
  current.nodes = graph.nodes();
  std::shared_ptr<const Graph> current_graph;  // null: `graph`
  Plan current_plan = plan;
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
      // Each rule on top of the devices so far; the least traffic wins.
      Rewrite best;
      int64_t best_bytes = -1;
      for (const EvictionRule rule : kEvictionRules) {
        Rewrite tried = rewrite;
        ChooseSpills(g, current_plan, lt, d, targets[d], pinned, writes, rule,
                     &tried);
        const int64_t bytes = TrafficBytes(g, tried);
        if (best_bytes < 0 || bytes < best_bytes) {
          best = std::move(tried);
          best_bytes = bytes;
        }
      }
      rewrite = std::move(best);
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
      return Relax(graph, built, std::move(ordered), std::move(ordered_plan),
                   budgets, again, out);
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

// One fitting from a plan: the plan kept, or why none fits, and its report.
struct Attempt {
  absl::StatusOr<Fitted> fitted = absl::UnknownError("not fitted");
  SpillReport report;
};

Attempt FitFrom(const Graph& graph, const Plan& plan,
                const std::vector<int64_t>& budgets,
                const std::vector<uint8_t>& pinned,
                const PlannerOptions& options, const PlannerOptions& again) {
  Attempt attempt;
  SpillReport& out = attempt.report;
  attempt.fitted = FitRounds(graph, plan, budgets, pinned, options, again, out);
  if (!attempt.fitted.ok()) return attempt;
  Plan& kept = attempt.fitted->plan;
  const Graph& rewritten = *attempt.fitted->graph;
  std::vector<int64_t> spilled(budgets.size(), 0);
  for (const PlannedNode& pn : kept.nodes) {
    if (rewritten.memory_move(pn.node) == MemoryMove::kFill) ++out.fills;
    if (rewritten.memory_move(pn.node) != MemoryMove::kSpill) continue;
    for (const BufferUse& u : rewritten.Uses(pn.node)) {
      const int64_t bytes =
          static_cast<int64_t>(rewritten.buffer_bytes(u.buffer));
      if (pn.device < static_cast<int>(spilled.size())) {
        spilled[pn.device] += bytes;
      }
      out.spilled_bytes += bytes;
    }
    ++out.spills;
  }
  const std::vector<int32_t> orderings =
      CountOrderings(rewritten, kept, attempt.fitted->added);
  for (DeviceMemory& m : kept.memory) {
    if (m.device < 0 || m.device >= static_cast<int>(spilled.size())) {
      continue;
    }
    m.spilled_bytes = spilled[m.device];
    m.orderings_added = orderings[m.device];
  }
  out.makespan_us = kept.estimated_makespan_us;
  return attempt;
}

// Whether fitting `a` is the one to keep over `b`: it fits where `b` does
// not, or finishes earlier, or as early with fewer bytes spilled.
bool BetterFit(const Attempt& a, const Attempt& b) {
  if (!a.fitted.ok() || !b.fitted.ok()) return a.fitted.ok();
  if (a.report.makespan_us != b.report.makespan_us) {
    return a.report.makespan_us < b.report.makespan_us;
  }
  return a.report.spilled_bytes < b.report.spilled_bytes;
}

}  // namespace

absl::Status FitMemoryBudgets(const Graph& graph, const PlannerOptions& options,
                              Plan* plan, SpillReport* report) {
  SpillReport ignored;
  SpillReport& out = report != nullptr ? *report : ignored;
  out = SpillReport();
  const std::vector<int64_t> budgets = EffectiveBudgets(options);
  if (plan->memory.empty() || OverBudget(*plan, budgets) < 0) {
    return absl::OkStatus();
  }
  // With kAuto, the plan of the other order (which of the two is fitted
  // first: the one whose arenas exceed the budgets by less).
  std::optional<Plan> other;
  bool aware_first = false;
  if (options.memory_order == MemoryOrderKind::kAuto) {
    // A tight budget: the order that keeps fewer bytes live may fit as it
    // is, or need fewer spills.
    PlannerOptions aware = options;
    aware.memory_order = MemoryOrderKind::kMemoryAware;
    aware.fit_memory = false;
    aware.plan_memory = true;
    aware.arena_improve_rounds = 0;
    absl::StatusOr<Plan> aware_plan = PlanGraph(graph, aware);
    if (aware_plan.ok() &&
        Excess(*aware_plan, budgets) < Excess(*plan, budgets)) {
      other = std::move(*plan);
      *plan = *std::move(aware_plan);
      aware_first = true;
      out.memory_aware_order = true;
      if (OverBudget(*plan, budgets) < 0) return absl::OkStatus();
    } else if (aware_plan.ok()) {
      other = *std::move(aware_plan);
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
  again.arena_improve_rounds = 0;  // as the plan being fitted
  Attempt best = FitFrom(graph, *plan, budgets, pinned, options, again);
  best.report.memory_aware_order = aware_first;
  // Which order spills less is not known from the arenas before fitting:
  // where the first fitting spills, or fits nothing, the other order is
  // fitted too and the better kept.
  const bool try_other = best.fitted.ok()
                             ? best.report.spilled_bytes > 0
                             : absl::IsResourceExhausted(best.fitted.status());
  if (other.has_value() && try_other) {
    Attempt second = FitFrom(graph, *other, budgets, pinned, options, again);
    second.report.memory_aware_order = !aware_first;
    const int rounds = best.report.rounds + second.report.rounds;
    if (BetterFit(second, best)) best = std::move(second);
    best.report.rounds = rounds;
  }
  out = best.report;
  if (!best.fitted.ok()) return best.fitted.status();
  Plan& kept = best.fitted->plan;
  if (!options.simulate) {
    kept.estimates.clear();
    kept.estimated_makespan_us = 0;
    kept.lower_bound_us = 0;
  }
  kept.graph = std::move(best.fitted->graph);
  *plan = std::move(kept);
  return absl::OkStatus();
}

}  // namespace weft::scheduler
