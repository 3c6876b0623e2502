#include "scheduler/cost_model.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {

CostLevels ComputeCostLevels(const Graph& graph, const Dag& dag) {
  const int n = dag.num_nodes();
  CostLevels levels;
  levels.top_us.assign(n, 0);
  levels.bottom_us.assign(n, 0);
  levels.bottom_hops.assign(n, 0);
  for (NodeId v : dag.order) {
    double top = 0;
    for (NodeId p : dag.Preds(v)) {
      top = std::max(top, levels.top_us[p] + graph.node(p).cost_us);
    }
    levels.top_us[v] = top;
    const NodeSpec& node = graph.node(v);
    levels.critical_path_us =
        std::max(levels.critical_path_us, top + node.cost_us);
    levels.total_work_us += node.cost_us;
    if (node.engine == Engine::kCompute || node.engine == Engine::kCollective) {
      levels.device_work_us += node.cost_us;
    }
  }
  for (auto it = dag.order.rbegin(); it != dag.order.rend(); ++it) {
    const NodeId v = *it;
    double below = 0;
    int32_t hops = 0;
    for (NodeId s : dag.Succs(v)) {
      below = std::max(below, levels.bottom_us[s]);
      hops = std::max(hops, levels.bottom_hops[s] + 1);
    }
    levels.bottom_us[v] = below + graph.node(v).cost_us;
    levels.bottom_hops[v] = hops;
  }
  return levels;
}

double LowerBound(const CostLevels& levels, int num_devices) {
  return std::max(levels.critical_path_us,
                  levels.device_work_us / std::max(num_devices, 1));
}

namespace {

// Units a node needs: the device's compute units, its copy engine, or none.
constexpr int kNoUnit = -1;

int UnitOf(Engine engine, int device) {
  switch (engine) {
    case Engine::kCompute:
    case Engine::kCollective:
      return 2 * device;
    case Engine::kCopy:
      return 2 * device + 1;
    case Engine::kHost:
      return kNoUnit;
  }
  return kNoUnit;
}

}  // namespace

absl::Status SimulatePlan(const Graph& graph, Plan* plan) {
  const int n = static_cast<int>(plan->nodes.size());
  const int num_streams = static_cast<int>(plan->streams.size());
  const int num_events = plan->num_events;
  int num_devices = plan->num_devices;

  // Check the plan's references before following them.
  std::vector<int32_t> signaller(num_events, -1);
  std::vector<std::vector<int32_t>> stream_nodes(num_streams);
  std::vector<int32_t> waiter_offsets(num_events + 1, 0);
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan->nodes[i];
    if (pn.node < 0 || pn.node >= graph.num_nodes()) {
      return absl::InternalError(
          absl::StrCat("plan node ", i, " refers to unknown node ", pn.node));
    }
    if (pn.stream < 0 || pn.stream >= num_streams) {
      return absl::InternalError(
          absl::StrCat("plan node ", i, " is on unknown stream ", pn.stream));
    }
    if (pn.device < 0) {
      return absl::InternalError(
          absl::StrCat("plan node ", i, " is on device ", pn.device));
    }
    num_devices = std::max(num_devices, pn.device + 1);
    stream_nodes[pn.stream].push_back(i);
    if (pn.signal_event >= 0) {
      if (pn.signal_event >= num_events || signaller[pn.signal_event] >= 0) {
        return absl::InternalError(absl::StrCat(
            "plan node ", i, " signals bad event ", pn.signal_event));
      }
      signaller[pn.signal_event] = i;
    }
    for (int e : pn.wait_events) {
      if (e < 0 || e >= num_events) {
        return absl::InternalError(
            absl::StrCat("plan node ", i, " waits on unknown event ", e));
      }
      ++waiter_offsets[e + 1];
    }
  }
  for (int e = 0; e < num_events; ++e) {
    if (signaller[e] < 0) {
      return absl::InternalError(
          absl::StrCat("event ", e, " is never signalled"));
    }
    waiter_offsets[e + 1] += waiter_offsets[e];
  }
  std::vector<int32_t> waiters(waiter_offsets[num_events]);
  {
    std::vector<int32_t> fill(waiter_offsets.begin(), waiter_offsets.end() - 1);
    for (int i = 0; i < n; ++i) {
      for (int e : plan->nodes[i].wait_events) waiters[fill[e]++] = i;
    }
  }

  std::vector<int32_t> pending(n);
  std::vector<int32_t> unit(n);
  std::vector<double> cost(n);
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan->nodes[i];
    pending[i] = static_cast<int32_t>(pn.wait_events.size());
    const NodeSpec& node = graph.node(pn.node);
    unit[i] = UnitOf(node.engine, pn.device);
    cost[i] = node.cost_us;
  }
  const int num_units = 2 * num_devices;
  std::vector<int> free_units(num_units, 1);
  using MinHeap =
      std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>>;
  std::vector<MinHeap> ready(num_units);
  MinHeap ready_host;
  std::vector<size_t> head(num_streams, 0);
  std::vector<bool> in_flight(num_streams, false);
  using Completion = std::pair<double, int32_t>;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>>
      completions;

  auto try_activate = [&](int s) {
    if (in_flight[s] || head[s] >= stream_nodes[s].size()) return;
    const int32_t i = stream_nodes[s][head[s]];
    if (pending[i] > 0) return;
    in_flight[s] = true;
    if (unit[i] == kNoUnit) {
      ready_host.push(i);
    } else {
      ready[unit[i]].push(i);
    }
  };
  double now = 0;
  auto start = [&](int32_t i) {
    PlannedNode& pn = plan->nodes[i];
    pn.estimated_start_us = now;
    pn.estimated_end_us = now + cost[i];
    completions.emplace(pn.estimated_end_us, i);
  };
  auto dispatch = [&]() {
    while (!ready_host.empty()) {
      start(ready_host.top());
      ready_host.pop();
    }
    for (int u = 0; u < num_units; ++u) {
      while (free_units[u] > 0 && !ready[u].empty()) {
        --free_units[u];
        start(ready[u].top());
        ready[u].pop();
      }
    }
  };

  for (int s = 0; s < num_streams; ++s) try_activate(s);
  dispatch();
  int finished = 0;
  double makespan = 0;
  while (!completions.empty()) {
    now = completions.top().first;
    // Finish everything ending now before starting anything new, so that
    // ties go to the node issued first.
    while (!completions.empty() && completions.top().first == now) {
      const int32_t i = completions.top().second;
      completions.pop();
      ++finished;
      makespan = std::max(makespan, now);
      const PlannedNode& pn = plan->nodes[i];
      if (unit[i] != kNoUnit) ++free_units[unit[i]];
      in_flight[pn.stream] = false;
      ++head[pn.stream];
      try_activate(pn.stream);
      if (pn.signal_event >= 0) {
        for (int32_t k = waiter_offsets[pn.signal_event];
             k < waiter_offsets[pn.signal_event + 1]; ++k) {
          const int32_t w = waiters[k];
          if (--pending[w] == 0) try_activate(plan->nodes[w].stream);
        }
      }
    }
    dispatch();
  }
  if (finished != n) {
    return absl::InternalError(
        absl::StrCat("the plan deadlocks: ", n - finished,
                     " nodes never start (waits out of stream order)"));
  }
  plan->estimated_makespan_us = makespan;
  return absl::OkStatus();
}

}  // namespace weft::scheduler
