// Memory planning on DNN-shaped graphs and random DAGs (dnn_graphs.h).
//
// For each graph, planned for one device with the default options as a
// job (no simulation), prints, all measured in this run:
//   - arena/lb: the arena over its lower bound (target <= 1.02), and which
//     placement order won;
//   - noreuse/arena: the sum of the copy sizes over the arena;
//   - order: peak live bytes of the submitted order over that of the
//     memory-aware order (memory_order.h), the same for a breadth-first
//     order (the bare topological sort below, level by level, as a
//     framework that runs a model's layers in definition order would),
//     and the arena of a plan issued in the submitted order over that of
//     one issued in the memory-aware order;
//   - time: memory planning (lifetimes and arenas) over a bare topological
//     sort (Kahn) of the graph's dependency edges (target: <= 3x extra),
//     and the memory-aware order over the same sort; thread CPU time, best
//     of three;
//   - (with --seeds=N, the NAS-like and random graphs are built from N
//     seeds each, a row per seed: "random", "random#2", ...)
//   - spill: bytes spilled by next use (spill_planner.h) running the
//     memory-aware order under three quarters of its peak, and that over
//     the least any eviction choice spills for the order.
//
// With --spill, instead: spill fitting (scheduler/spill_fitting.h) of each
// graph planned (simulated) on 1 and 2 devices under 50% and 75% of the
// unbudgeted plan's largest arena (at least 1.1x the largest node's
// aligned arguments; rows where that reaches the arena are skipped):
//   - fitted: yes, or why not (RESOURCE_EXHAUSTED, shortened);
//   - ar/bud: the largest arena over the budget (when not fitted, the
//     arena the last round needed);
//   - spilled MiB, spills, fills and rounds (SpillReport);
//   - lb:sub, lb:mem: spilled bytes over PlanSpills' lower bound under the
//     same budget for the submitted order and for the memory-aware order
//     (lb=0: no eviction choice for that order need spill), on one
//     device only, and pk/bud the submitted order's peak live bytes over
//     the budget;
//   - free_us: the unbudgeted plan's estimated makespan; ord/fr and
//     fin/fr: the plan with the device order, and the plan kept, over it;
//     relaxed: whether the relaxed plan was kept;
//   - fit/pl: FitMemoryBudgets over the unbudgeted PlanGraph call (thread
//     CPU time, best of up to three), and pl_ms the latter.
//
// With --jobs, instead: each graph's job plan as weftd makes it for a job
// whose buffers, each by itself, exceed its devices' memory (no
// simulation; memory planned and fitted), on 1 and 2 devices whose memory
// is the job plan's largest arena (100%: reuse alone fits) and half of it
// (50%: spills, or the memory-aware order): planned (yes, or why not),
// the buffers' bytes over the device's memory (nr/mem), the largest arena
// over it (ar/mem), MiB spilled, and thread CPU time against the job plan
// without memory (job/bar) and per node.
//
//   bazel run -c opt //scheduler/memory:memory_bench -- [N ...]
//       [--graphs=mobilenet,nas,...] [--antichain_max_positions=N]
//       [--max_conflicts=N] [--max_large_conflicts=N] [--place_large_graphs]
//       [--improve_rounds=N] [--lower_top_work_per_copy=N]
//       [--local_clique_candidates=N] [--neighborhood_clique_neighbors=N]
//       [--spill | --jobs | --digest] [--seeds=N]
//
// With --digest, instead: a line per graph with a hash of its arena plans
// (offsets, arenas, bounds and winners, in the submitted and the
// memory-aware order): a change to memory planning that should not change
// its answers must leave these lines the same.
//
// The last three set ArenaOptions: the plan size up to which the lower
// bound may use the antichain (it costs seconds at 100k), the conflict
// graph size above which placement goes without one, and the rounds of
// re-placing the best assignment.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/memory/arena_planner.h"
#include "scheduler/memory/dnn_graphs.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/memory/memory_order.h"
#include "scheduler/memory/memory_plan.h"
#include "scheduler/memory/spill_planner.h"
#include "scheduler/planner.h"
#include "scheduler/spill_fitting.h"

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

// The arena options of the planner's default plans.
ArenaOptions& Options() {
  static ArenaOptions* options = [] {
    auto* o = new ArenaOptions;
    o->improve_rounds = PlannerOptions().arena_improve_rounds;
    return o;
  }();
  return *options;
}

Arena PlanAndMeasure(const Graph& graph, const Plan& plan) {
  absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(graph, plan);
  if (!lt.ok()) std::exit(1);
  const ArenaPlan arenas = PlanArenas(*lt, Options());
  return {arenas.devices[0], lt->num_copies()};
}

// "random" for the first seed, "random#2" for the second, ...
std::string SeedName(const std::string& name, int seed) {
  return seed == 1 ? name : absl::StrCat(name, "#", seed);
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
  const int64_t breadth_first_peak = PeakLiveBytes(graph, Kahn(preds, n));
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
      "%-12s %7d %7d %9lld %9.2f %7.4f %-12s %7.2f | %6.3f %6.3f %6.3f | "
      "%8.2f %8.2f %6.2f %8.2f %7.1f | %8.2f %6.3f\n",
      name.c_str(), n, arena.copies, static_cast<long long>(d.conflicts),
      d.arena_bytes / 1048576.0,
      static_cast<double>(d.arena_bytes) /
          std::max<int64_t>(d.lower_bound_bytes, 1),
      ArenaHeuristicName(d.heuristic),
      static_cast<double>(d.no_reuse_bytes) /
          std::max<int64_t>(d.arena_bytes, 1),
      static_cast<double>(submitted_peak) /
          std::max<int64_t>(aware.peak_bytes, 1),
      static_cast<double>(breadth_first_peak) /
          std::max<int64_t>(aware.peak_bytes, 1),
      static_cast<double>(d.arena_bytes) /
          std::max<int64_t>(aware_arena.device.arena_bytes, 1),
      topo_s * 1e3, memory_s * 1e3, memory_s / topo_s, lifetimes_s * 1e3,
      order_s / topo_s, spills->spilled_bytes / 1048576.0,
      static_cast<double>(spills->spilled_bytes) /
          std::max<int64_t>(spills->lower_bound_bytes, 1));
}

PlannerOptions SpillOptions(int devices, int64_t budget) {
  PlannerOptions options;
  options.num_devices = devices;
  options.explain = false;
  options.simulate = true;
  options.plan_memory = true;
  if (budget > 0) options.memory_budget_bytes.assign(devices, budget);
  return options;
}

// Why a fitting failed, in a few characters.
std::string Shorten(const absl::Status& status) {
  const std::string message(status.message());
  if (status.code() != absl::StatusCode::kResourceExhausted) {
    return "err:" + message.substr(0, 12);
  }
  if (message.find("after spilling") != std::string::npos) {
    return "RE:arena";
  }
  if (message.find("arguments") != std::string::npos ||
      message.find("node") != std::string::npos) {
    return "RE:node";
  }
  return "RE:" + message.substr(0, 12);
}

// The arena a failed fitting names ("... an arena of N bytes ..."), or 0.
int64_t ArenaOf(const absl::Status& status) {
  const std::string message(status.message());
  const std::string key = "an arena of ";
  const size_t at = message.find(key);
  if (at == std::string::npos) return 0;
  return std::atoll(message.c_str() + at + key.size());
}

void SpillRows(const std::string& name, const Graph& graph) {
  const int n = graph.num_nodes();
  absl::StatusOr<Dag> dag = InferDependencies(graph);
  if (!dag.ok()) std::exit(1);
  const MemoryOrder aware = MemoryAwareOrder(graph, *dag);
  const int64_t largest_node =
      static_cast<int64_t>(LargestNodeArgumentBytes(graph));
  for (const int devices : {1, 2}) {
    const PlannerOptions free_options = SpillOptions(devices, 0);
    absl::StatusOr<Plan> free_plan;
    const double plan_s =
        Best(3, [&] { free_plan = PlanGraph(graph, free_options); });
    if (!free_plan.ok()) {
      std::fprintf(stderr, "%s: %s\n", graph.name().c_str(),
                   std::string(free_plan.status().message()).c_str());
      std::exit(1);
    }
    const int64_t arena = free_plan->LargestArenaBytes();
    const double free_us = free_plan->estimated_makespan_us;
    for (const int percent : {50, 75}) {
      const int64_t budget =
          std::max(arena * percent / 100, largest_node * 11 / 10);
      if (budget >= arena) {
        std::printf("%-12s %6d %3d %4d%% %-9s (budget %.2f MiB >= arena)\n",
                    name.c_str(), n, devices, percent, "skipped",
                    budget / 1048576.0);
        continue;
      }
      PlannerOptions options = SpillOptions(devices, budget);
      PlannerOptions unfitted_options = options;
      unfitted_options.fit_memory = false;
      absl::StatusOr<Plan> unfitted = PlanGraph(graph, unfitted_options);
      if (!unfitted.ok()) {
        std::printf("%-12s %6d %3d %4d%% %-9s\n", name.c_str(), n, devices,
                    percent, Shorten(unfitted.status()).c_str());
        continue;
      }
      // Fitting, timed on a fresh copy of the plan each run (best of up to
      // three while under a few seconds).
      SpillReport report;
      absl::Status status;
      Plan fitted;
      double fit_s = 1e30;
      double spent = 0;
      for (int r = 0; r < 3 && spent < 3.0; ++r) {
        Plan plan = *unfitted;
        const double start = ThreadSeconds();
        status = FitMemoryBudgets(graph, options, &plan, &report);
        const double s = ThreadSeconds() - start;
        fit_s = std::min(fit_s, s);
        spent += s;
        fitted = std::move(plan);
      }
      const int64_t final_arena =
          status.ok() ? fitted.LargestArenaBytes() : ArenaOf(status);
      // Spilled bytes over PlanSpills' bound for an order, on one device.
      auto over_bound = [&](absl::Span<const NodeId> order) {
        if (devices != 1) return std::string("-");
        absl::StatusOr<SpillPlan> spills = PlanSpills(graph, order, budget);
        if (!spills.ok()) return std::string("err");
        if (spills->lower_bound_bytes == 0) return std::string("lb=0");
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.2f",
                      static_cast<double>(report.spilled_bytes) /
                          spills->lower_bound_bytes);
        return std::string(buf);
      };
      std::string peak = "-";
      if (devices == 1) {
        absl::StatusOr<SpillPlan> unbounded =
            PlanSpills(graph, dag->order, std::numeric_limits<int64_t>::max());
        if (unbounded.ok()) {
          char buf[32];
          std::snprintf(buf, sizeof(buf), "%.2f",
                        static_cast<double>(unbounded->peak_bytes) / budget);
          peak = buf;
        }
      }
      const std::string submitted_bound = over_bound(dag->order);
      const std::string aware_bound = over_bound(aware.order);
      const double ordered = report.ordered_makespan_us;
      const double final_us = status.ok() ? report.makespan_us : 0;
      auto ratio = [&](double us) {
        char buf[32];
        if (us <= 0 || free_us <= 0) return std::string("-");
        std::snprintf(buf, sizeof(buf), "%.3f", us / free_us);
        return std::string(buf);
      };
      std::printf(
          "%-12s %6d %3d %4d%% %-9s %6.3f %9.2f %6d %6d %4d %6s %6s %6s "
          "%9.0f %6s %6s %-4s %8.2f %7.1f\n",
          name.c_str(), n, devices, percent,
          status.ok() ? "yes" : Shorten(status).c_str(),
          static_cast<double>(final_arena) / budget,
          report.spilled_bytes / 1048576.0, report.spills, report.fills,
          report.rounds, peak.c_str(), submitted_bound.c_str(),
          aware_bound.c_str(), free_us, ratio(ordered).c_str(),
          ratio(final_us).c_str(),
          status.ok() ? (report.relaxed ? "yes" : "no") : "-", plan_s * 1e3,
          fit_s / plan_s);
      std::fflush(stdout);
    }
  }
}

// A job's plan as weftd makes it for a job whose buffers, each by itself,
// would not fit its devices: no simulation, memory planned and fitted to
// device_memory_bytes (server/job_manager.cc).
PlannerOptions JobOptions(int devices, int64_t device_bytes) {
  PlannerOptions options;
  options.num_devices = devices;
  options.explain = false;
  options.simulate = false;
  options.plan_memory_over_budget = device_bytes > 0;
  if (device_bytes > 0)
    options.device_memory_bytes.assign(devices, device_bytes);
  return options;
}

// --jobs: for each graph on 1 and 2 devices whose memory is the job plan's
// largest arena (fits with reuse alone) and half of it (spills, or another
// order), the job plan weftd makes, timed (thread CPU, best of up to
// three while under a few seconds) against the job plan without memory
// that weftd made before memory planning reached such graphs.
void JobRows(const std::string& name, const Graph& graph) {
  const int n = graph.num_nodes();
  const int64_t largest_node =
      static_cast<int64_t>(LargestNodeArgumentBytes(graph));
  for (const int devices : {1, 2}) {
    const PlannerOptions bare = JobOptions(devices, 0);
    absl::StatusOr<Plan> bare_plan;
    const double bare_s = Best(3, [&] { bare_plan = PlanGraph(graph, bare); });
    PlannerOptions measure = bare;
    measure.plan_memory = true;
    absl::StatusOr<Plan> free_plan = PlanGraph(graph, measure);
    if (!bare_plan.ok() || !free_plan.ok()) {
      std::fprintf(
          stderr, "%s: %s\n", graph.name().c_str(),
          std::string(
              (bare_plan.ok() ? free_plan : bare_plan).status().message())
              .c_str());
      std::exit(1);
    }
    int64_t no_reuse = 0;  // every buffer, each by itself
    for (const BufferSpec& b : graph.buffers()) no_reuse += b.size_bytes;
    const int64_t arena = free_plan->LargestArenaBytes();
    for (const int percent : {100, 50}) {
      const int64_t budget =
          std::max(arena * percent / 100, largest_node * 11 / 10);
      if (percent < 100 && budget >= arena) continue;
      const PlannerOptions options = JobOptions(devices, budget);
      absl::StatusOr<Plan> plan;
      double spent = 0, best = 1e30;
      for (int r = 0; r < 3 && spent < 3.0; ++r) {
        const double start = ThreadSeconds();
        plan = PlanGraph(graph, options);
        const double s = ThreadSeconds() - start;
        best = std::min(best, s);
        spent += s;
      }
      int64_t spilled = 0;
      int64_t largest = 0;
      if (plan.ok()) {
        for (const DeviceMemory& m : plan->memory) {
          spilled += m.spilled_bytes;
          largest = std::max(largest, m.arena_bytes);
        }
      }
      std::printf(
          "%-12s %7d %3d %4d%% %-9s %9.2f %7.3f %9.2f %8.2f %8.2f "
          "%7.1f %7.2f\n",
          name.c_str(), n, devices, percent,
          plan.ok() ? "yes" : Shorten(plan.status()).c_str(),
          static_cast<double>(no_reuse) / budget,
          plan.ok() ? static_cast<double>(largest) / budget : 0.0,
          spilled / 1048576.0, bare_s * 1e3, best * 1e3, best / bare_s,
          best * 1e6 / n);
      std::fflush(stdout);
    }
  }
}

// One line per graph: a hash of its arena plans (offsets, arenas, bounds,
// winners) in the submitted and the memory-aware order, with the default
// options, for telling whether a change to the planner changed its answers.
void DigestRow(const std::string& name, const Graph& graph) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over 64-bit words
  auto add = [&hash](uint64_t word) {
    for (int i = 0; i < 8; ++i) {
      hash ^= (word >> (8 * i)) & 0xff;
      hash *= 1099511628211ull;
    }
  };
  for (const MemoryOrderKind order :
       {MemoryOrderKind::kSubmitted, MemoryOrderKind::kMemoryAware}) {
    const Plan plan = MustPlan(graph, order);
    absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(graph, plan);
    if (!lt.ok()) std::exit(1);
    const ArenaPlan arenas = PlanArenas(*lt, Options());
    for (const DeviceArena& d : arenas.devices) {
      add(d.arena_bytes);
      add(d.lower_bound_bytes);
      add(d.peak_live_bytes);
      add(d.unimproved_arena_bytes);
      add(d.conflicts);
      add(static_cast<uint64_t>(d.heuristic));
    }
    for (const int64_t offset : arenas.offsets) add(offset);
  }
  std::printf("%-12s %7d %016llx\n", name.c_str(), graph.num_nodes(),
              static_cast<unsigned long long>(hash));
}

}  // namespace
}  // namespace weft::scheduler::memory

int main(int argc, char** argv) {
  using namespace weft::scheduler::memory;
  std::vector<int> sizes;
  std::string graphs = "mobilenet,nas,transformer,unet,random";
  bool spill = false;
  bool jobs = false;
  bool digest = false;
  int seeds = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string kGraphs = "--graphs=";
    const std::string kAntichain = "--antichain_max_positions=";
    const std::string kMaxConflicts = "--max_conflicts=";
    const std::string kMaxLarge = "--max_large_conflicts=";
    const std::string kImprove = "--improve_rounds=";
    const std::string kLocal = "--local_clique_candidates=";
    const std::string kNeighbors = "--neighborhood_clique_neighbors=";
    const std::string kSeeds = "--seeds=";
    const std::string kLowerTop = "--lower_top_work_per_copy=";
    if (arg == "--spill") {
      spill = true;
    } else if (arg == "--jobs") {
      jobs = true;
    } else if (arg == "--digest") {
      digest = true;
    } else if (arg == "--place_large_graphs") {
      Options().place_large_graphs = true;
    } else if (arg.rfind(kLowerTop, 0) == 0) {
      Options().lower_top_work_per_copy =
          std::atoll(arg.substr(kLowerTop.size()).c_str());
    } else if (arg.rfind(kSeeds, 0) == 0) {
      seeds = std::max(1, std::atoi(arg.substr(kSeeds.size()).c_str()));
    } else if (arg.rfind(kGraphs, 0) == 0) {
      graphs = "," + arg.substr(kGraphs.size()) + ",";
    } else if (arg.rfind(kAntichain, 0) == 0) {
      Options().antichain_max_positions =
          std::atoi(arg.substr(kAntichain.size()).c_str());
    } else if (arg.rfind(kImprove, 0) == 0) {
      Options().improve_rounds = std::atoi(arg.substr(kImprove.size()).c_str());
    } else if (arg.rfind(kNeighbors, 0) == 0) {
      Options().neighborhood_clique_neighbors =
          std::atoi(arg.substr(kNeighbors.size()).c_str());
    } else if (arg.rfind(kLocal, 0) == 0) {
      Options().local_clique_candidates =
          std::atoi(arg.substr(kLocal.size()).c_str());
    } else if (arg.rfind(kMaxLarge, 0) == 0) {
      Options().max_large_conflicts =
          std::atoll(arg.substr(kMaxLarge.size()).c_str());
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
  // Each wanted graph at each size, NAS-like and random ones from `seeds`
  // seeds each, to `row`.
  auto for_each_graph =
      [&](int seeds,
          void (*row)(const std::string&, const weft::scheduler::Graph&)) {
        for (const int n : sizes) {
          if (wanted("mobilenet")) row("mobilenet", MobileNetLike(n));
          for (int seed = 1; wanted("nas") && seed <= seeds; ++seed) {
            row(SeedName("nas", seed), NasLike(n, seed));
          }
          if (wanted("transformer")) row("transformer", TransformerStack(n));
          if (wanted("unet")) row("unet", UNet(n));
          for (int seed = 1; wanted("random") && seed <= seeds; ++seed) {
            row(SeedName("random", seed), RandomDag(n, seed));
          }
        }
      };
  if (spill) {
    std::printf(
        "%-12s %6s %3s %5s %-9s %6s %9s %6s %6s %4s %6s %6s %6s %9s %6s %6s "
        "%-4s %8s %7s\n",
        "graph", "nodes", "dev", "bud", "fitted", "ar/bud", "spill_MiB",
        "spills", "fills", "rnds", "pk/bud", "lb:sub", "lb:mem", "free_us",
        "ord/fr", "fin/fr", "rlx", "pl_ms", "fit/pl");
    for_each_graph(1, SpillRows);
    return 0;
  }
  if (digest) {
    for_each_graph(seeds, DigestRow);
    return 0;
  }
  if (jobs) {
    std::printf("%-12s %7s %3s %5s %-9s %9s %7s %9s %8s %8s %7s %7s\n", "graph",
                "nodes", "dev", "mem", "planned", "nr/mem", "ar/mem",
                "spill_MiB", "bare_ms", "job_ms", "job/bar", "us/node");
    for_each_graph(seeds, JobRows);
    return 0;
  }
  std::printf(
      "%-12s %7s %7s %9s %9s %7s %-12s %7s | %6s %6s %6s | %8s %8s %6s %8s "
      "%7s | %8s %6s\n",
      "graph", "nodes", "copies", "conflicts", "arena_MB", "ar/lb", "winner",
      "nr/ar", "peak", "bfs", "arena", "topo_ms", "mem_ms", "mem/tp", "life_ms",
      "ord/tp", "spill_MB", "sp/lb");
  std::printf("%88s order: submitted, breadth-first / aware\n", "");
  for_each_graph(seeds, Row);
  return 0;
}
