// Plans against a real GPU: the schedule cases (scheduler/benchmark_graphs.h:
// GrCUDA's benchmark DAGs, fork/joins, random DAGs) planned for one device
// with the planner's default options and run by the executor on the CUDA
// backend.
//
// Part 1, makespan: each case runs once to warm up (memory pools, device
// graphs) and then `runs` times; printed are the plan's estimate, its lower
// bound, the median wall time of a job (from Executor::Start to its end
// being reported: uploads, kernels and output downloads, as the estimate
// counts them) and measured / estimate. The cases' kernels are `spin`s,
// which on CUDA take their node's occupancy of the device's multiprocessors
// (kernels.h SpinShape), so concurrent kernels share the GPU as the cost
// model says they do; transfers take what the host link really gives.
//
// Part 2, host overhead: the fork/joins and random DAGs with every cost set
// to zero, so a
// job's wall time is the host's and the driver's work per node: the median
// microseconds per node, issued node by node on streams and as device
// graphs.
//
// Without a GPU it prints why and exits 0.
//
//   bazel run -c opt //runtime/cuda:cuda_makespan_bench -- [--cases=SUBSTRING]
//       [--runs=N]
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/executor.h"
#include "runtime/timed_job.h"
#include "scheduler/benchmark_graphs.h"
#include "scheduler/graph.h"
#include "scheduler/planner.h"
#include "scheduler/planner_options.h"
#include "scheduler/topology.h"

namespace weft::runtime {
namespace {

struct Flags {
  std::string cases;  // keep the cases whose name contains this
  int runs = 3;
};

bool ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--cases=")) {
      flags.cases = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--runs=")) {
      if (!absl::SimpleAtoi(arg, &flags.runs) || flags.runs < 1) return false;
    } else {
      return false;
    }
  }
  return true;
}

// The wall time of one job, Start to on_done; negative if it failed.
double RunJob(Executor& executor, std::shared_ptr<const scheduler::Graph> graph,
              std::shared_ptr<const scheduler::Plan> plan, LaunchMode mode) {
  JobOptions options;
  options.launch_mode = mode;
  return RunTimedJob(executor, std::move(graph), std::move(plan), options);
}

// The median of `runs` jobs after one warm-up; negative if any failed.
double MedianJob(Executor& executor,
                 const std::shared_ptr<const scheduler::Graph>& graph,
                 const std::shared_ptr<const scheduler::Plan>& plan,
                 LaunchMode mode, int runs) {
  if (RunJob(executor, graph, plan, mode) < 0) return -1;
  std::vector<double> walls;
  for (int r = 0; r < runs; ++r) {
    const double us = RunJob(executor, graph, plan, mode);
    if (us < 0) return -1;
    walls.push_back(us);
  }
  std::sort(walls.begin(), walls.end());
  return walls[walls.size() / 2];
}

// A case planned with `options` and run both ways (the median job wall
// time of each); what runs is the plan's graph (spills and fills included,
// if any), as in weftd.
struct Timed {
  std::shared_ptr<const scheduler::Plan> plan;
  int nodes = 0;
  double streams_us = 0;
  double graphs_us = 0;
};
absl::StatusOr<Timed> PlanAndRun(Executor& executor,
                                 std::shared_ptr<const scheduler::Graph> graph,
                                 const scheduler::PlannerOptions& options,
                                 int runs) {
  absl::StatusOr<scheduler::Plan> planned = PlanGraph(*graph, options);
  if (!planned.ok()) return planned.status();
  Timed timed;
  timed.plan = std::make_shared<const scheduler::Plan>(*std::move(planned));
  if (timed.plan->graph != nullptr) graph = timed.plan->graph;
  timed.nodes = graph->num_nodes();
  timed.streams_us =
      MedianJob(executor, graph, timed.plan, LaunchMode::kStreams, runs);
  timed.graphs_us =
      MedianJob(executor, graph, timed.plan, LaunchMode::kDeviceGraphs, runs);
  if (timed.streams_us < 0 || timed.graphs_us < 0) {
    return absl::InternalError("a job failed");
  }
  return timed;
}

// `graph` with every node's cost zero.
scheduler::Graph ZeroCost(const scheduler::Graph& graph) {
  std::vector<scheduler::NodeSpec> nodes = graph.nodes();
  for (scheduler::NodeSpec& node : nodes) node.cost_us = 0;
  return scheduler::Graph(graph.name(), graph.buffers(), std::move(nodes));
}

class Ratios {
 public:
  void Add(double ratio) { ratios_.push_back(ratio); }
  void Print(const char* what) {
    if (ratios_.empty()) return;
    std::sort(ratios_.begin(), ratios_.end());
    std::printf("%s over %zu cases: min %.3f, median %.3f, max %.3f\n", what,
                ratios_.size(), ratios_.front(), ratios_[ratios_.size() / 2],
                ratios_.back());
  }

 private:
  std::vector<double> ratios_;
};

int Main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) {
    std::fprintf(stderr, "usage: %s [--cases=SUBSTRING] [--runs=N]\n", argv[0]);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create();
  if (!backend.ok()) {
    std::printf("no GPU: %s\n", backend.status().ToString().c_str());
    return 0;
  }
  const DeviceInfo device = (*backend)->device_info(0);
  Executor::Options executor_options;
  executor_options.backend = backend->get();
  auto executor = Executor::Create(executor_options).value();

  scheduler::PlannerOptions defaults;
  defaults.num_devices = 1;
  defaults.topology = scheduler::Topology::Default(1);
  defaults.explain = false;
  std::printf(
      "device 0: %s; plans: default options (%s), %d kernel slots, host link "
      "%.0f GB/s in the model; %d runs after a warm-up, median\n\n",
      device.name.c_str(),
      std::string(scheduler::DevicePolicyName(defaults.device_policy)).c_str(),
      defaults.max_concurrent_kernels, scheduler::Topology::kDefaultHostGbps,
      flags.runs);

  std::printf("%-18s %5s %12s %12s %12s %8s %12s %8s\n", "case", "nodes",
              "lower_bound", "estimate_us", "streams_us", "ratio", "graphs_us",
              "ratio");
  Ratios streams_ratio, graphs_ratio;
  struct Overhead {
    std::string name;
    int nodes;
    double streams_us;
    double graphs_us;
  };
  std::vector<Overhead> overheads;
  for (scheduler::BenchmarkCase& c : scheduler::AllScheduleCases()) {
    if (!absl::StrContains(c.name, flags.cases)) continue;
    auto graph = std::make_shared<const scheduler::Graph>(std::move(c.graph));
    absl::StatusOr<Timed> timed =
        PlanAndRun(*executor, graph, defaults, flags.runs);
    if (!timed.ok()) {
      std::printf("%-18s %s\n", c.name.c_str(),
                  timed.status().ToString().c_str());
      if (timed.status().code() == absl::StatusCode::kInternal) return 1;
      continue;
    }
    const double estimate = timed->plan->estimated_makespan_us;
    streams_ratio.Add(timed->streams_us / estimate);
    graphs_ratio.Add(timed->graphs_us / estimate);
    std::printf("%-18s %5d %12.1f %12.1f %12.1f %8.3f %12.1f %8.3f\n",
                c.name.c_str(), graph->num_nodes(), timed->plan->lower_bound_us,
                estimate, timed->streams_us, timed->streams_us / estimate,
                timed->graphs_us, timed->graphs_us / estimate);
    std::fflush(stdout);

    if (c.suite != scheduler::Suite::kSynthetic) continue;
    absl::StatusOr<Timed> zero = PlanAndRun(
        *executor, std::make_shared<const scheduler::Graph>(ZeroCost(*graph)),
        defaults, flags.runs);
    if (!zero.ok()) {
      if (zero.status().code() == absl::StatusCode::kInternal) return 1;
      continue;
    }
    overheads.push_back(
        {c.name, zero->nodes, zero->streams_us, zero->graphs_us});
  }
  streams_ratio.Print("\nmeasured / estimate, streams");
  graphs_ratio.Print("measured / estimate, device graphs");

  std::printf(
      "\nhost overhead: the same DAGs at zero cost (uploads and downloads "
      "still move their bytes), median job wall time per node\n");
  std::printf("%-18s %5s %14s %14s\n", "case", "nodes", "streams_us/node",
              "graphs_us/node");
  for (const Overhead& o : overheads) {
    std::printf("%-18s %5d %14.2f %14.2f\n", o.name.c_str(), o.nodes,
                o.streams_us / o.nodes, o.graphs_us / o.nodes);
  }
  return 0;
}

}  // namespace
}  // namespace weft::runtime

int main(int argc, char** argv) { return weft::runtime::Main(argc, argv); }
