// Memory planning on DNN-shaped graphs and random DAGs (dnn_graphs.h).
//
// For each graph, planned for one device with the default options as a
// job (no simulation), prints, all measured in this run:
//   - arena/lb: the arena over its lower bound (target <= 1.02), and which
//     placement order won;
//   - noreuse/arena: the sum of the copy sizes over the arena;
//   - order: peak live bytes of the submitted order over that of the
//     memory-aware order (memory_order.h), and the arena of a plan issued
//     in the submitted order over that of one issued in the memory-aware
//     order;
//   - time: memory planning (lifetimes and arenas) over a bare topological
//     sort (Kahn) of the graph's dependency edges (target: <= 3x extra),
//     and the memory-aware order over the same sort; thread CPU time, best
//     of three;
//   - spill: bytes spilled by next use (spill_planner.h) running the
//     memory-aware order under three quarters of its peak, and that over
//     the least any eviction choice spills for the order.
//
//   bazel run -c opt //scheduler/memory:memory_bench -- [N ...]
//       [--graphs=mobilenet,nas,...] [--antichain_max_positions=N]
//       [--max_conflicts=N]
//
// The last two set ArenaOptions: the plan size up to which the lower bound
// may use the antichain (it costs seconds at 100k), and the conflict graph
// size above which placement goes without one.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "scheduler/dependency_inference.h"
#include "scheduler/memory/arena_planner.h"
#include "scheduler/memory/dnn_graphs.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/memory/memory_order.h"
#include "scheduler/memory/spill_planner.h"
#include "scheduler/planner.h"

namespace weft::scheduler::memory {
namespace {

double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         1e-9 * static_cast<double>(ts.tv_nsec);
}

double Best(int runs, const std::function<void()>& f) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const double start = ThreadSeconds();
    f();
    best = std::min(best, ThreadSeconds() - start);
  }
  return best;
}

std::vector<NodeId> Kahn(const Csr& preds, int n) {
  const Csr succs = preds.Transpose(n);
  std::vector<int32_t> waiting(n);
  std::vector<NodeId> order;
  order.reserve(n);
  for (NodeId v = 0; v < n; ++v) {
    waiting[v] = static_cast<int32_t>(preds.Row(v).size());
    if (waiting[v] == 0) order.push_back(v);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    for (const NodeId s : succs.Row(order[i])) {
      if (--waiting[s] == 0) order.push_back(s);
    }
  }
  return order;
}

Plan MustPlan(const Graph& graph, MemoryOrderKind order) {
  PlannerOptions options;
  options.explain = false;
  options.simulate = false;
  options.memory_order = order;
  absl::StatusOr<Plan> plan = PlanGraph(graph, options);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s: %s\n", graph.name().c_str(),
                 std::string(plan.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(plan);
}

struct Arena {
  DeviceArena device;
  int copies = 0;
};

ArenaOptions& Options() {
  static ArenaOptions* options = new ArenaOptions;
  return *options;
}

Arena PlanAndMeasure(const Graph& graph, const Plan& plan) {
  absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(graph, plan);
  if (!lt.ok()) std::exit(1);
  const ArenaPlan arenas = PlanArenas(*lt, Options());
  return {arenas.devices[0], lt->num_copies()};
}

void Row(const std::string& name, const Graph& graph) {
  const int n = graph.num_nodes();
  const Plan plan = MustPlan(graph, MemoryOrderKind::kSubmitted);
  const Arena arena = PlanAndMeasure(graph, plan);
  const Plan aware_plan = MustPlan(graph, MemoryOrderKind::kMemoryAware);
  const Arena aware_arena = PlanAndMeasure(graph, aware_plan);

  const Csr preds = CollectDependencies(graph);
  const double topo_s = Best(3, [&] { Kahn(preds, n); });
  double lifetimes_s = 1e30;
  const double memory_s = Best(3, [&] {
    const double start = ThreadSeconds();
    absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(graph, plan);
    lifetimes_s = std::min(lifetimes_s, ThreadSeconds() - start);
    PlanArenas(*lt, Options());
  });
  absl::StatusOr<Dag> dag = InferDependencies(graph);
  if (!dag.ok()) std::exit(1);
  const int64_t submitted_peak = PeakLiveBytes(graph, dag->order);
  MemoryOrder aware;
  const double order_s =
      Best(3, [&] { aware = MemoryAwareOrder(graph, *dag); });

  // Spills of the memory-aware order under three quarters of its peak
  // (at least the largest node's arguments).
  absl::StatusOr<SpillPlan> unbounded =
      PlanSpills(graph, aware.order, std::numeric_limits<int64_t>::max());
  if (!unbounded.ok()) std::exit(1);
  int64_t budget = unbounded->peak_bytes * 3 / 4;
  for (NodeId v = 0; v < n; ++v) {
    int64_t bytes = 0;
    for (const BufferUse& u : graph.Uses(v)) {
      bytes += static_cast<int64_t>(graph.buffer_bytes(u.buffer));
    }
    budget = std::max(budget, bytes);
  }
  absl::StatusOr<SpillPlan> spills = PlanSpills(graph, aware.order, budget);
  if (!spills.ok()) std::exit(1);

  const DeviceArena& d = arena.device;
  std::printf(
      "%-12s %7d %7d %9lld %9.2f %7.4f %-12s %7.2f | %6.3f %6.3f | %8.2f "
      "%8.2f %6.2f %8.2f %7.1f | %8.2f %6.3f\n",
      name.c_str(), n, arena.copies, static_cast<long long>(d.conflicts),
      d.arena_bytes / 1048576.0,
      static_cast<double>(d.arena_bytes) /
          std::max<int64_t>(d.lower_bound_bytes, 1),
      ArenaHeuristicName(d.heuristic),
      static_cast<double>(d.no_reuse_bytes) /
          std::max<int64_t>(d.arena_bytes, 1),
      static_cast<double>(submitted_peak) /
          std::max<int64_t>(aware.peak_bytes, 1),
      static_cast<double>(d.arena_bytes) /
          std::max<int64_t>(aware_arena.device.arena_bytes, 1),
      topo_s * 1e3, memory_s * 1e3, memory_s / topo_s, lifetimes_s * 1e3,
      order_s / topo_s, spills->spilled_bytes / 1048576.0,
      static_cast<double>(spills->spilled_bytes) /
          std::max<int64_t>(spills->lower_bound_bytes, 1));
}

}  // namespace
}  // namespace weft::scheduler::memory

int main(int argc, char** argv) {
  using namespace weft::scheduler::memory;
  std::vector<int> sizes;
  std::string graphs = "mobilenet,nas,transformer,unet,random";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string kGraphs = "--graphs=";
    const std::string kAntichain = "--antichain_max_positions=";
    const std::string kMaxConflicts = "--max_conflicts=";
    if (arg.rfind(kGraphs, 0) == 0) {
      graphs = "," + arg.substr(kGraphs.size()) + ",";
    } else if (arg.rfind(kAntichain, 0) == 0) {
      Options().antichain_max_positions =
          std::atoi(arg.substr(kAntichain.size()).c_str());
    } else if (arg.rfind(kMaxConflicts, 0) == 0) {
      Options().max_conflicts =
          std::atoll(arg.substr(kMaxConflicts.size()).c_str());
    } else {
      sizes.push_back(std::atoi(arg.c_str()));
    }
  }
  graphs = "," + graphs + ",";
  auto wanted = [&](const char* name) {
    return graphs.find("," + std::string(name) + ",") != std::string::npos;
  };
  if (sizes.empty()) sizes = {1000, 10000, 100000};
  std::printf(
      "%-12s %7s %7s %9s %9s %7s %-12s %7s | %6s %6s | %8s %8s %6s %8s %7s "
      "| %8s %6s\n",
      "graph", "nodes", "copies", "conflicts", "arena_MB", "ar/lb", "winner",
      "nr/ar", "peak", "arena", "topo_ms", "mem_ms", "mem/tp", "life_ms",
      "ord/tp", "spill_MB", "sp/lb");
  std::printf("%88s order: submitted/aware\n", "");
  for (const int n : sizes) {
    if (wanted("mobilenet")) Row("mobilenet", MobileNetLike(n));
    if (wanted("nas")) Row("nas", NasLike(n));
    if (wanted("transformer")) Row("transformer", TransformerStack(n));
    if (wanted("unet")) Row("unet", UNet(n));
    if (wanted("random")) Row("random", RandomDag(n));
  }
  return 0;
}
