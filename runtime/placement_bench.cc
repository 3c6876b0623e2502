// Device memory and per-job cost of arena placement
// (Executor::Options::place_buffers) on DNN-shaped graphs
// (scheduler/memory/dnn_graphs.h).
//
// Each graph is planned once as weftd plans a job (PlanGraph without the
// simulation, then PlanMemory, timed apart), then run on fresh simulated
// devices (unpaced, instantaneous copies; spins never materialise
// contents) with placement and without. Printed per graph: the bytes of
// all buffer copies (no reuse), the planned arenas, the memory pools' high
// water over the runs (what the devices held at most), and the median wall
// time of a warm job. Under it, the same graph planned with half its
// largest arena as every device's budget (spill_fitting.h) and run on
// devices of that size: what it spilled, its high water and job time.
//
// The generators' first tensor is host data. On the simulator its upload
// keeps only its data and zero fills take no host work, placed or not
// (sim_memory.h). WEFT_BENCH_NO_DATA=1 makes that tensor
// zero-initialised too, leaving no contents at all.
//
//   bazel run -c opt //runtime:placement_bench -- [nodes] [runs] [devices]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/executor.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/memory/dnn_graphs.h"
#include "scheduler/memory/memory_plan.h"
#include "scheduler/planner.h"

namespace weft::runtime {
namespace {

struct Result {
  uint64_t high_water = 0;  // over the devices, summed
  double job_us = 0;        // median
};

Result Run(std::shared_ptr<const scheduler::Graph> graph,
           std::shared_ptr<const scheduler::Plan> plan, int devices, bool place,
           int runs, uint64_t memory_bytes = uint64_t{64} << 30) {
  SimBackend::Options sim;
  sim.num_devices = devices;
  sim.time_scale = 0;
  sim.host_to_device_gbps = 0;  // instantaneous
  sim.device_to_host_gbps = 0;
  sim.device_to_device_gbps = 0;
  sim.memory_bytes = memory_bytes;
  auto backend = SimBackend::Create(sim).value();
  Executor::Options options;
  options.backend = backend.get();
  options.place_buffers = place;
  auto executor = Executor::Create(options).value();
  std::vector<double> us;
  for (int run = 0; run <= runs; ++run) {  // run 0 warms the pools up
    absl::Notification done;
    absl::Status status;
    JobCallbacks callbacks;
    callbacks.on_done = [&](absl::Status s, scheduler::NodeId, HostBuffers) {
      status = std::move(s);
      done.Notify();
    };
    const absl::Time start = absl::Now();
    if (!executor->Start(graph, plan, std::move(callbacks)).ok()) {
      std::fprintf(stderr, "start failed\n");
      std::exit(1);
    }
    done.WaitForNotification();
    if (!status.ok()) {
      std::fprintf(stderr, "%s: run failed: %s\n", graph->name().c_str(),
                   status.ToString().c_str());
      std::exit(1);
    }
    if (run > 0) us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  Result result;
  for (const DeviceLoad& d : executor->Load()) {
    result.high_water += d.memory.peak_in_use_bytes;
  }
  std::sort(us.begin(), us.end());
  result.job_us = us[us.size() / 2];
  return result;
}

double MiB(uint64_t bytes) { return bytes / 1048576.0; }

// Half the largest arena (room for the largest node and a tenth) as every
// device's budget: the job plan spills and fills, and runs on devices of
// the budget's size (plus the pool's size-class rounding).
void BenchSpills(std::shared_ptr<const scheduler::Graph> graph,
                 const scheduler::Plan& placed_plan,
                 scheduler::PlannerOptions planner, int runs,
                 const Result& placed) {
  int64_t arena = 0;
  for (const scheduler::DeviceMemory& m : placed_plan.memory) {
    arena = std::max(arena, m.arena_bytes);
  }
  const int64_t budget = std::max(
      arena / 2, static_cast<int64_t>(
                     scheduler::memory::LargestNodeArgumentBytes(*graph)) *
                     11 / 10);
  if (budget >= arena) {
    std::printf("  budget: half the arena is below a node's arguments\n");
    return;
  }
  planner.memory_budget_bytes.assign(planner.num_devices, budget);
  planner.plan_memory = true;
  const absl::Time start = absl::Now();
  absl::StatusOr<scheduler::Plan> fitted =
      scheduler::PlanGraph(*graph, planner);
  const double fit_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (!fitted.ok()) {
    std::printf("  budget %.1f MiB: %s\n", MiB(budget),
                fitted.status().ToString().c_str());
    return;
  }
  int64_t spilled = 0;
  int64_t fitted_arena = 0;
  for (const scheduler::DeviceMemory& m : fitted->memory) {
    spilled += m.spilled_bytes;
    fitted_arena = std::max(fitted_arena, m.arena_bytes);
  }
  const int moves = fitted->graph == nullptr
                        ? 0
                        : fitted->graph->num_nodes() - graph->num_nodes();
  auto run_graph = fitted->graph != nullptr ? fitted->graph : graph;
  auto shared = std::make_shared<const scheduler::Plan>(*std::move(fitted));
  const Result result =
      Run(run_graph, shared, planner.num_devices, true, runs,
          static_cast<uint64_t>(budget) + static_cast<uint64_t>(budget) / 8);
  std::printf(
      "  budget %.1f MiB per device: largest arena %.1f MiB, %.1f MiB "
      "spilled by %d spills and fills, high water %.1f MiB, job %.0f us "
      "(%.2fx placed), job plan %.1f ms\n",
      MiB(budget), MiB(fitted_arena), MiB(spilled), moves,
      MiB(result.high_water), result.job_us,
      result.job_us / std::max(placed.job_us, 1.0), fit_ms);
}

void Bench(const std::string& name, scheduler::Graph built, int devices,
           int runs) {
  if (std::getenv("WEFT_BENCH_NO_DATA") != nullptr) {
    std::vector<scheduler::BufferSpec> buffers = built.buffers();
    for (scheduler::BufferSpec& b : buffers) {
      b.init = scheduler::BufferSpec::Init::kZero;
      b.data.clear();
    }
    built = scheduler::Graph(built.name(), std::move(buffers), built.nodes());
  }
  auto graph = std::make_shared<const scheduler::Graph>(std::move(built));
  scheduler::PlannerOptions planner;
  planner.num_devices = devices;
  planner.explain = false;
  planner.simulate = false;
  scheduler::Plan plan = scheduler::PlanGraph(*graph, planner).value();
  const absl::Time memory_start = absl::Now();
  const absl::Status planned = scheduler::memory::PlanMemory(*graph, {}, &plan);
  const double memory_ms =
      absl::ToDoubleMilliseconds(absl::Now() - memory_start);
  if (!planned.ok()) {
    std::fprintf(stderr, "%s\n", planned.ToString().c_str());
    std::exit(1);
  }
  uint64_t copies = 0;
  for (const scheduler::PlannedBuffer& b : plan.buffers) {
    copies += b.size_bytes;
  }
  uint64_t arenas = 0;
  for (const scheduler::DeviceMemory& m : plan.memory) {
    arenas += m.arena_bytes;
  }
  auto shared = std::make_shared<const scheduler::Plan>(std::move(plan));
  const Result separate = Run(graph, shared, devices, false, runs);
  const Result placed = Run(graph, shared, devices, true, runs);
  std::printf(
      "%-18s %6d %10.1f %10.1f %12.1f %12.1f %7.2fx %10.0f %10.0f %9.1f\n",
      name.c_str(), graph->num_nodes(), MiB(copies), MiB(arenas),
      MiB(separate.high_water), MiB(placed.high_water),
      static_cast<double>(separate.high_water) /
          std::max<uint64_t>(placed.high_water, 1),
      separate.job_us, placed.job_us, memory_ms);
  BenchSpills(graph, *shared, planner, runs, placed);
}

}  // namespace
}  // namespace weft::runtime

int main(int argc, char** argv) {
  using namespace weft::scheduler::memory;  // NOLINT: the generators
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 500;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 7;
  const int devices = argc > 3 ? std::atoi(argv[3]) : 2;
  std::printf(
      "%d devices; MiB summed over devices; job: median wall us of %d warm "
      "runs; memory plan: PlanMemory ms\n",
      devices, runs);
  std::printf("%-18s %6s %10s %10s %12s %12s %8s %10s %10s %9s\n", "graph",
              "nodes", "no_reuse", "arenas", "hw_separate", "hw_placed",
              "ratio", "job_sep", "job_place", "mem_plan");
  weft::runtime::Bench("mobilenet", MobileNetLike(nodes), devices, runs);
  weft::runtime::Bench("transformer", TransformerStack(nodes), devices, runs);
  weft::runtime::Bench("unet", UNet(nodes), devices, runs);
  weft::runtime::Bench("nas", NasLike(nodes), devices, runs);
  weft::runtime::Bench("random_dag", RandomDag(nodes), devices, runs);
  return 0;
}
