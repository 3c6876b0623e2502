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
  }

  // Resident buffers by next use, furthest first (stale entries skipped).
  std::vector<uint8_t> resident(num_buffers, 0);
  std::priority_queue<std::pair<int32_t, BufferId>> by_next;
  std::vector<BufferId> args;
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
    while (used > budget_bytes) {
      const auto [step, b] = by_next.top();
      by_next.pop();
      if (resident[b] != 1 || next_step(b) != step) continue;  // stale
      resident[b] = 0;
      used -= size(b);
      plan.spilled_bytes += size(b);
      ++plan.spills;
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
  return plan;
}

}  // namespace weft::scheduler::memory
