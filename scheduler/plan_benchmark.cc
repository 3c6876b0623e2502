// Planner throughput on random layered DAGs.
//
// For each size N: a graph of N `spin` nodes in layers of `width`; every
// node writes its own buffer and reads one to three buffers written in the
// previous two layers. Prints the time of PlanGraph beside the time of a
// bare topological sort (Kahn) of the same dependency edges.
//
//   bazel run -c opt //scheduler:plan_benchmark -- [N ...]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/planner.h"

namespace weft::scheduler {
namespace {

Graph LayeredGraph(int n, int width, std::mt19937& rng) {
  std::vector<BufferSpec> buffers(n);
  std::vector<NodeSpec> nodes(n);
  std::uniform_int_distribution<int> fan_in(1, 3);
  std::uniform_real_distribution<double> cost(1, 100);
  for (int i = 0; i < n; ++i) {
    buffers[i].name = absl::StrCat("b", i);
    buffers[i].size_bytes = 1024;
    NodeSpec& node = nodes[i];
    node.name = absl::StrCat("n", i);
    node.op = "spin";
    node.cost_us = cost(rng);
    const int layer = i / width;
    if (layer > 0) {
      const int lo = std::max(0, (layer - 2) * width);
      const int hi = layer * width - 1;
      std::uniform_int_distribution<int> pick(lo, hi);
      const int k = fan_in(rng);
      for (int a = 0; a < k; ++a) {
        node.args.push_back(BufferUse{pick(rng), Access::kRead});
      }
    }
    node.args.push_back(BufferUse{i, Access::kWrite});
  }
  return Graph("layered", std::move(buffers), std::move(nodes));
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// Kahn's algorithm with a FIFO queue: the baseline.
std::vector<NodeId> BareTopologicalSort(const Csr& preds) {
  const int n = preds.rows();
  Csr succs = preds.Transpose(n);
  std::vector<int32_t> indegree(n);
  std::vector<NodeId> order;
  order.reserve(n);
  for (NodeId v = 0; v < n; ++v) {
    indegree[v] = static_cast<int32_t>(preds.Row(v).size());
    if (indegree[v] == 0) order.push_back(v);
  }
  for (size_t head = 0; head < order.size(); ++head) {
    for (NodeId s : succs.Row(order[head])) {
      if (--indegree[s] == 0) order.push_back(s);
    }
  }
  return order;
}

int Run(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {1000, 10000, 100000, 1000000};
  std::printf("%10s %8s %12s %12s %8s %8s %8s\n", "nodes", "edges", "topo_s",
              "plan_s", "ratio", "streams", "events");
  for (int n : sizes) {
    std::mt19937 rng(42);
    Graph graph = LayeredGraph(n, /*width=*/64, rng);
    Csr raw = CollectDependencies(graph);
    auto start = std::chrono::steady_clock::now();
    std::vector<NodeId> order = BareTopologicalSort(raw);
    const double topo = Seconds(start);
    if (static_cast<int>(order.size()) != n) return 1;

    PlannerOptions options;
    options.num_devices = 2;
    start = std::chrono::steady_clock::now();
    absl::StatusOr<Plan> plan = PlanGraph(graph, options);
    const double planning = Seconds(start);
    if (!plan.ok()) {
      std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
      return 1;
    }
    std::printf("%10d %8zu %12.4f %12.4f %8.1f %8zu %8d\n", n, raw.items.size(),
                topo, planning, planning / topo, plan->streams.size(),
                plan->num_events);
  }
  return 0;
}

}  // namespace
}  // namespace weft::scheduler

int main(int argc, char** argv) { return weft::scheduler::Run(argc, argv); }
