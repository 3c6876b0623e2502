#include "scheduler/issue_orders.h"

#include <algorithm>
#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

namespace weft::scheduler {

std::vector<NodeId> PriorityOrder(const std::vector<double>& key,
                                  const Dag& dag) {
  const int n = dag.num_nodes();
  std::vector<int32_t> waiting(n);
  using Entry = std::pair<double, NodeId>;
  auto later = [](const Entry& a, const Entry& b) {
    return a.first < b.first || (a.first == b.first && a.second > b.second);
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> ready(later);
  for (NodeId v = 0; v < n; ++v) {
    waiting[v] = static_cast<int32_t>(dag.Preds(v).size());
    if (waiting[v] == 0) ready.push({key[v], v});
  }
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    const NodeId v = ready.top().second;
    ready.pop();
    order.push_back(v);
    for (NodeId s : dag.Succs(v)) {
      if (--waiting[s] == 0) ready.push({key[s], s});
    }
  }
  return order;
}

std::vector<NodeId> RankOrder(const CostLevels& levels, const Dag& dag) {
  return PriorityOrder(levels.bottom_us, dag);
}

std::vector<NodeId> EarliestStartOrder(const Graph& graph, const Dag& dag,
                                       absl::Span<const int> device,
                                       const CostLevels& levels,
                                       const Topology& topology,
                                       int num_devices) {
  const int n = dag.num_nodes();
  const int devices = std::max(num_devices, 1);
  std::vector<double> ready_at(n, 0), end(n, 0), upload_free(devices, 0);
  std::vector<uint8_t> written(graph.num_buffers(), 0);
  // Ranks with the outputs' downloads in their order.
  std::vector<double> rank(levels.bottom_us.begin(), levels.bottom_us.end());
  {
    std::vector<NodeId> last_writer(graph.num_buffers(), -1);
    for (const NodeId v : dag.order) {
      for (const BufferUse& use : graph.Uses(v)) {
        if (Writes(use.access)) last_writer[use.buffer] = v;
      }
    }
    std::vector<double> downloads_after(n, 0);
    double after = 0;
    for (BufferId b = graph.num_buffers() - 1; b >= 0; --b) {
      const NodeId w = last_writer[b];
      if (!graph.buffer(b).output || w < 0 || device[w] < 0) continue;
      after += topology.TransferUs(graph.buffer_bytes(b), device[w],
                                   Topology::kHost) /
               devices;
      downloads_after[w] = std::max(downloads_after[w], after);
    }
    for (auto it = dag.order.rbegin(); it != dag.order.rend(); ++it) {
      const NodeId v = *it;
      double tail = downloads_after[v];
      for (const NodeId s : dag.Succs(v)) tail = std::max(tail, rank[s]);
      rank[v] = std::max(rank[v], std::max(graph.cost_us(v), 0.0) + tail);
    }
  }
  std::vector<uint8_t> uploaded(
      static_cast<size_t>(graph.num_buffers()) * devices, 0);
  // When v could start if taken now, its uploads queued now.
  auto start_of = [&](NodeId v) {
    const int d = device[v];
    if (d < 0 || d >= devices) return ready_at[v];
    double uploads = 0;
    for (const BufferUse& use : graph.Uses(v)) {
      const BufferId b = use.buffer;
      if (written[b] || !graph.has_initial_data(b) ||
          uploaded[static_cast<size_t>(b) * devices + d]) {
        continue;
      }
      uploads += topology.TransferUs(graph.buffer_bytes(b), Topology::kHost, d);
    }
    return uploads > 0 ? std::max(ready_at[v], upload_free[d] + uploads)
                       : ready_at[v];
  };
  // (start, rank, node): the earliest start first, then the highest rank,
  // then the lowest node. Starts only grow as uploads queue, so an entry
  // whose start has grown since it was pushed goes back in.
  struct Entry {
    double start, rank;
    NodeId node;
  };
  auto later = [](const Entry& a, const Entry& b) {
    if (a.start != b.start) return a.start > b.start;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.node > b.node;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> ready(later);
  std::vector<int32_t> waiting(n);
  for (NodeId v = 0; v < n; ++v) {
    waiting[v] = static_cast<int32_t>(dag.Preds(v).size());
    if (waiting[v] == 0) ready.push({start_of(v), rank[v], v});
  }
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    const Entry top = ready.top();
    ready.pop();
    const NodeId v = top.node;
    const double start = start_of(v);
    if (start > top.start) {
      ready.push({start, top.rank, v});
      continue;
    }
    order.push_back(v);
    const int d = device[v];
    for (const BufferUse& use : graph.Uses(v)) {
      const BufferId b = use.buffer;
      if (d >= 0 && d < devices && !written[b] && graph.has_initial_data(b)) {
        uint8_t& up = uploaded[static_cast<size_t>(b) * devices + d];
        if (!up) {
          up = 1;
          upload_free[d] +=
              topology.TransferUs(graph.buffer_bytes(b), Topology::kHost, d);
        }
      }
    }
    for (const BufferUse& use : graph.Uses(v)) {
      if (Writes(use.access)) written[use.buffer] = 1;
    }
    end[v] = start + std::max(graph.cost_us(v), 0.0);
    for (const NodeId s : dag.Succs(v)) {
      ready_at[s] = std::max(ready_at[s], end[v]);
      if (--waiting[s] == 0) ready.push({start_of(s), rank[s], s});
    }
  }
  return order;
}

void IssueByStart(const std::vector<double>& start_us, Dag& dag) {
  const int n = dag.num_nodes();
  std::vector<std::pair<double, int32_t>> key(n);
  for (int32_t i = 0; i < n; ++i) key[i] = {start_us[dag.order[i]], i};
  std::sort(key.begin(), key.end());
  std::vector<NodeId> order(n);
  std::vector<int32_t> pos(n);
  for (int32_t i = 0; i < n; ++i) {
    order[i] = dag.order[key[i].second];
    pos[order[i]] = i;
  }
  for (NodeId v = 0; v < n; ++v) {
    for (NodeId p : dag.Preds(v)) {
      if (pos[p] >= pos[v]) return;
    }
  }
  dag.order = std::move(order);
  IntervalLabels intervals = dag.reach.intervals();
  dag.reach = ReachabilityIndex(n);
  for (int32_t i = 0; i < n; ++i) {
    dag.reach.Label(dag.order[i], i, dag.Preds(dag.order[i]));
  }
  if (!intervals.empty()) dag.reach.set_intervals(std::move(intervals));
}

bool HasOneOrder(const Dag& dag) {
  for (int i = 1; i < dag.num_nodes(); ++i) {
    const absl::Span<const NodeId> preds = dag.Preds(dag.order[i]);
    if (std::find(preds.begin(), preds.end(), dag.order[i - 1]) ==
        preds.end()) {
      return false;
    }
  }
  return true;
}

}  // namespace weft::scheduler
