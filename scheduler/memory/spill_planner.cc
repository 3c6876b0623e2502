#include "scheduler/memory/spill_planner.h"

#include <algorithm>
#include <queue>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace weft::scheduler::memory {

absl::StatusOr<SpillPlan> PlanSpills(const Graph& graph,
                                     absl::Span<const NodeId> order,
                                     int64_t budget_bytes) {
  SpillPlan plan;
  plan.budget_bytes = budget_bytes;
  const int n = static_cast<int>(order.size());
  const int num_buffers = graph.num_buffers();
  // Steps that use each buffer, ascending.
  std::vector<int32_t> offsets(num_buffers + 1, 0);
  for (int i = 0; i < n; ++i) {
    const NodeId v = order[i];
    if (v < 0 || v >= graph.num_nodes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("order[", i, "]: ", v, " is not a node of the graph"));
    }
    for (const BufferUse& u : graph.Uses(v)) ++offsets[u.buffer + 1];
  }
  for (int b = 0; b < num_buffers; ++b) offsets[b + 1] += offsets[b];
  std::vector<int32_t> steps(offsets[num_buffers]);
  {
    std::vector<int32_t> fill(offsets.begin(), offsets.end() - 1);
    for (int i = 0; i < n; ++i) {
      for (const BufferUse& u : graph.Uses(order[i])) {
        // A node listing a buffer twice uses it once.
        const int32_t at = fill[u.buffer];
        if (at > offsets[u.buffer] && steps[at - 1] == i) continue;
        steps[fill[u.buffer]++] = i;
      }
    }
    for (int b = 0; b < num_buffers; ++b) {
      std::fill(steps.begin() + fill[b], steps.begin() + offsets[b + 1], -1);
    }
  }
  auto size = [&](BufferId b) {
    return static_cast<int64_t>(graph.buffer_bytes(b));
  };
  std::vector<int32_t> next_use(num_buffers, 0);  // index into steps
  for (int b = 0; b < num_buffers; ++b) next_use[b] = offsets[b];
  auto next_step = [&](BufferId b) {
    const int32_t k = next_use[b];
    return k < offsets[b + 1] && steps[k] >= 0 ? steps[k] : -1;
  };
  auto last_step = [&](BufferId b) {
    int32_t k = offsets[b + 1] - 1;
    while (k >= offsets[b] && steps[k] < 0) --k;
    return k >= offsets[b] ? steps[k] : -1;
  };

  // The least bytes any eviction choice spills if a buffer could be
  // evicted in part: each gap between two uses of a buffer may be evicted
  // for any share of its bytes, each byte spilled costing one, and every
  // step's excess must be evicted across it. Sweeping the steps in order
  // and covering each step's shortfall from the gaps that reach furthest
  // is optimal for that relaxation (a gap reaching further covers every
  // later step a nearer one does, at the same cost per byte), so its cost
  // bounds every whole-buffer choice from below.
  auto FractionalSpills = [&](const std::vector<int64_t>& excess) {
    int64_t spilled = 0;
    int64_t covered = 0;  // evicted bytes of the gaps open at the step
    std::vector<int32_t> gap_end(num_buffers, -1);  // -1: no open gap
    std::vector<int64_t> room(num_buffers, 0);      // bytes left to evict
    std::vector<int64_t> evicted(num_buffers, 0);   // bytes evicted
    std::priority_queue<std::pair<int32_t, BufferId>> open;  // by end
    std::vector<int32_t> used_from(num_buffers, 0);          // index into steps
    for (int b = 0; b < num_buffers; ++b) used_from[b] = offsets[b];
    for (int i = 0; i < n; ++i) {
      const NodeId v = order[i];
      for (const BufferUse& u : graph.Uses(v)) {
        const BufferId b = u.buffer;
        if (gap_end[b] != i) continue;
        covered -= evicted[b];
        gap_end[b] = -1;
      }
      while (covered < excess[i] && !open.empty()) {
        const auto [end, b] = open.top();
        if (gap_end[b] != end || room[b] == 0) {
          open.pop();
          continue;
        }
        const int64_t take = std::min(room[b], excess[i] - covered);
        room[b] -= take;
        evicted[b] += take;
        covered += take;
        spilled += take;
      }
      for (const BufferUse& u : graph.Uses(v)) {
        const BufferId b = u.buffer;
        int32_t& k = used_from[b];
        if (k >= offsets[b + 1] || steps[k] != i) continue;  // seen
        ++k;
        if (k < offsets[b + 1] && steps[k] >= 0) {
          gap_end[b] = steps[k];
          room[b] = size(b);
          evicted[b] = 0;
          open.emplace(steps[k], b);
        }
      }
    }
    return spilled;
  };

  // Live bytes by step (first use to last), for the peak and the bound.
  {
    std::vector<int64_t> delta(n + 1, 0);
    std::vector<int32_t> reach(n + 1, 0);  // the latest last use begun by
    for (BufferId b = 0; b < num_buffers; ++b) {
      const int32_t first = next_step(b);
      if (first < 0) continue;
      const int32_t last = last_step(b);
      delta[first] += size(b);
      delta[last + 1] -= size(b);
      reach[first] = std::max(reach[first], last);
    }
    std::vector<int64_t> excess(n, 0);
    int64_t live = 0;
    for (int i = 0; i < n; ++i) {
      live += delta[i];
      plan.peak_bytes = std::max(plan.peak_bytes, live);
      excess[i] = std::max<int64_t>(live - budget_bytes, 0);
      reach[i] = std::max({reach[i], i, i > 0 ? reach[i - 1] : 0});
    }
    // Steps whose live buffers are all dead before the next one's spill
    // different buffers: the heaviest chain of such steps' excesses.
    std::vector<int64_t> best(n + 1, 0);
    for (int i = n - 1; i >= 0; --i) {
      best[i] = std::max(best[i + 1], excess[i] + best[reach[i] + 1]);
    }
    plan.lower_bound_bytes = n > 0 ? best[0] : 0;
    plan.lower_bound_bytes =
        std::max(plan.lower_bound_bytes, FractionalSpills(excess));
  }

  // Runs the order under the budget choosing victims by `rule`: adds to
  // plan's spilled bytes and spills.
  enum class Rule { kFurthest, kTighter };
  auto evict = [&](Rule rule, SpillPlan& out) -> absl::Status {
    for (int b = 0; b < num_buffers; ++b) next_use[b] = offsets[b];
    // Resident buffers by next use, furthest first (stale entries
    // skipped).
    std::vector<uint8_t> resident(num_buffers, 0);
    std::priority_queue<std::pair<int32_t, BufferId>> by_next;
    auto pop_live = [&]() {
      while (!by_next.empty()) {
        const std::pair<int32_t, BufferId> top = by_next.top();
        by_next.pop();
        if (resident[top.second] == 1 && next_step(top.second) == top.first) {
          return top;
        }
      }
      return std::pair<int32_t, BufferId>(-1, -1);
    };
    std::vector<BufferId> args;
    std::vector<std::pair<int32_t, BufferId>> victims;
    int64_t used = 0;
    for (int i = 0; i < n; ++i) {
      const NodeId v = order[i];
      args.clear();
      int64_t need = 0;
      for (const BufferUse& u : graph.Uses(v)) {
        if (std::find(args.begin(), args.end(), u.buffer) != args.end()) {
          continue;
        }
        args.push_back(u.buffer);
        need += size(u.buffer);
        if (!resident[u.buffer]) used += size(u.buffer);
        resident[u.buffer] = 2;  // pinned for this step
      }
      if (need > budget_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "node '", graph.node(v).name, "': its arguments need ", need,
            " bytes, above the budget of ", budget_bytes, " bytes"));
      }
      victims.clear();
      while (used > budget_bytes) {
        std::pair<int32_t, BufferId> victim = pop_live();
        if (rule == Rule::kTighter) {
          // The second furthest instead, where it alone frees what is
          // missing with fewer bytes.
          std::pair<int32_t, BufferId> second = pop_live();
          if (second.second >= 0) {
            const int64_t missing = used - budget_bytes;
            if (size(second.second) >= missing &&
                size(second.second) < size(victim.second)) {
              std::swap(victim, second);
            }
            by_next.push(second);
          }
        }
        resident[victim.second] = 0;
        used -= size(victim.second);
        victims.push_back(victim);
      }
      // The last victim may free more than was missing: those taken
      // before it stay where they still fit, nearest next use first.
      for (int k = static_cast<int>(victims.size()) - 2; k >= 0; --k) {
        const BufferId b = victims[k].second;
        if (used + size(b) <= budget_bytes) {
          resident[b] = 1;
          used += size(b);
          by_next.emplace(victims[k].first, b);
          victims[k].second = -1;
        }
      }
      for (const auto& [step, b] : victims) {
        if (b < 0) continue;
        out.spilled_bytes += size(b);
        ++out.spills;
      }
      for (const BufferId b : args) {
        ++next_use[b];
        const int32_t next = next_step(b);
        if (next < 0) {
          resident[b] = 0;  // freed (an output: downloaded)
          used -= size(b);
        } else {
          resident[b] = 1;
          by_next.emplace(next, b);
        }
      }
    }
    return absl::OkStatus();
  };
  const absl::Status furthest = evict(Rule::kFurthest, plan);
  if (!furthest.ok()) return furthest;
  SpillPlan tighter;
  if (plan.spilled_bytes > plan.lower_bound_bytes &&
      evict(Rule::kTighter, tighter).ok() &&
      tighter.spilled_bytes < plan.spilled_bytes) {
    plan.spilled_bytes = tighter.spilled_bytes;
    plan.spills = tighter.spills;
  }
  return plan;
}

}  // namespace weft::scheduler::memory
