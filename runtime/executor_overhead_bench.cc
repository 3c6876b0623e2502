// Host overhead of the executor per node, beside StarPU on the same DAG.
//
// The DAG: a fork node, layers of zero-cost `spin` nodes where each node
// depends on one to three random nodes of the two layers above it, and a
// join node after the last layer. Weft plans it once (PlanGraph, two
// devices), then runs it on two simulated devices with an unpaced clock
// and instantaneous copies, so the wall time of a run is the host's work:
// validating the plan, issuing every node with its waits and signals,
// handling every completion and reporting it. Printed: microseconds per
// node (wall time / nodes) for several runs after a warm-up, and the CPU
// time of all threads per node. WEFT_BENCH_SIM_WORKERS sets the simulator's
// worker threads (SimBackend::Options::worker_threads).
//
// Built with StarPU (the :executor_overhead_bench_starpu target, which
// needs Debian's libstarpu-dev), the same run then submits the same DAG to
// StarPU as empty CPU tasks with explicit dependencies
// (starpu_task_declare_deps_array) and prints its microseconds per task and
// the ratio. StarPU's time counts submission and execution; creating the
// tasks and declaring their dependencies (the analogue of building the
// graph and planning it, which Weft's figure leaves out) is printed apart.
//
//   bazel run -c opt //runtime:executor_overhead_bench -- [nodes] [runs]
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/executor.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/graph.h"
#include "scheduler/planner.h"

#ifdef WEFT_BENCH_WITH_STARPU
#include <starpu.h>
#endif

namespace weft::runtime {
namespace {

// CPU time of the whole process (all threads), in microseconds.
double ProcessCpuUs() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 +
         usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
}

// Predecessors of every node, in a topological order (by index).
struct Dag {
  std::vector<std::vector<int>> preds;
  int edges = 0;
};

Dag LayeredForkJoin(int n, int width, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> fan_in(1, 3);
  Dag dag;
  dag.preds.resize(n);
  // Node 0 forks, node n - 1 joins, layers in between.
  const int inner = n - 2;
  for (int i = 1; i <= inner; ++i) {
    const int layer = (i - 1) / width;
    std::vector<int>& p = dag.preds[i];
    if (layer == 0) {
      p.push_back(0);
    } else {
      const int lo = 1 + std::max(0, (layer - 2) * width);
      const int hi = layer * width;  // last node of the previous layer
      std::uniform_int_distribution<int> pick(lo, hi);
      const int k = fan_in(rng);
      for (int e = 0; e < k; ++e) p.push_back(pick(rng));
      std::sort(p.begin(), p.end());
      p.erase(std::unique(p.begin(), p.end()), p.end());
    }
  }
  const int last_layer = (inner - 1) / width;
  for (int i = 1 + last_layer * width; i <= inner; ++i) {
    dag.preds[n - 1].push_back(i);
  }
  for (const auto& p : dag.preds) dag.edges += static_cast<int>(p.size());
  return dag;
}

scheduler::Graph ToGraph(const Dag& dag) {
  std::vector<scheduler::NodeSpec> nodes(dag.preds.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].name = absl::StrCat("n", i);
    nodes[i].op = "spin";
    nodes[i].cost_us = 0;
    nodes[i].after.assign(dag.preds[i].begin(), dag.preds[i].end());
  }
  return scheduler::Graph("overhead", {}, std::move(nodes));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Weft: microseconds per node of each run.
std::vector<double> RunWeft(const Dag& dag, int runs) {
  const int n = static_cast<int>(dag.preds.size());
  auto graph = std::make_shared<const scheduler::Graph>(ToGraph(dag));
  scheduler::PlannerOptions planner;
  planner.num_devices = 2;
  const absl::Time plan_start = absl::Now();
  absl::StatusOr<scheduler::Plan> planned = PlanGraph(*graph, planner);
  if (!planned.ok()) {
    std::fprintf(stderr, "planning failed: %s\n",
                 planned.status().ToString().c_str());
    std::exit(1);
  }
  auto plan = std::make_shared<const scheduler::Plan>(*std::move(planned));
  const int waits = static_cast<int>(plan->waits.items.size());
  std::printf(
      "weft plan: %zu streams, %d events, %d waits (planning %.0f ms,"
      " not counted)\n",
      plan->streams.size(), plan->num_events, waits,
      absl::ToDoubleMilliseconds(absl::Now() - plan_start));

  SimBackend::Options sim;
  sim.num_devices = 2;
  sim.time_scale = 0;
  sim.host_to_device_gbps = 0;  // instantaneous
  sim.device_to_host_gbps = 0;
  sim.device_to_device_gbps = 0;
  if (const char* workers = std::getenv("WEFT_BENCH_SIM_WORKERS")) {
    sim.worker_threads = std::atoi(workers);
  }
  auto backend = SimBackend::Create(sim).value();
  Executor::Options options;
  options.backend = backend.get();
  if (const char* window = std::getenv("WEFT_BENCH_WINDOW")) {
    options.max_in_flight_per_job = std::atoi(window);
  }
  auto executor = Executor::Create(options).value();

  std::vector<double> per_node;
  double cpu_us = 0;
  for (int run = 0; run <= runs; ++run) {  // run 0 warms the pools up
    absl::Notification done;
    absl::Status status;
    int finished = 0;
    JobCallbacks callbacks;
    callbacks.on_node = [&finished](scheduler::NodeId, NodeEventKind kind,
                                    const absl::Status&) {
      finished += kind == NodeEventKind::kFinished;
    };
    callbacks.on_done = [&](absl::Status s, scheduler::NodeId, HostBuffers) {
      status = std::move(s);
      done.Notify();
    };
    const absl::Time start = absl::Now();
    const double cpu_start = ProcessCpuUs();
    if (!executor->Start(graph, plan, std::move(callbacks)).ok()) {
      std::fprintf(stderr, "start failed\n");
      std::exit(1);
    }
    done.WaitForNotification();
    const double us = absl::ToDoubleMicroseconds(absl::Now() - start);
    if (run > 0) cpu_us += ProcessCpuUs() - cpu_start;
    if (!status.ok() || finished != n) {
      std::fprintf(stderr, "run failed: %s (%d of %d finished)\n",
                   status.ToString().c_str(), finished, n);
      std::exit(1);
    }
    if (run > 0) per_node.push_back(us / n);
  }
  std::printf(
      "weft  cpu us/node (all threads, mean): %.3f with %d simulator"
      " threads\n",
      cpu_us / runs / n, backend->worker_threads());
  return per_node;
}

#ifdef WEFT_BENCH_WITH_STARPU
void EmptyTask(void* /*buffers*/[], void* /*arg*/) {}

// StarPU: microseconds per task of each run (submission to completion),
// and the time spent creating tasks and declaring dependencies.
std::vector<double> RunStarpu(const Dag& dag, int runs,
                              std::vector<double>* create_per_task) {
  const int n = static_cast<int>(dag.preds.size());
  if (starpu_init(nullptr) != 0) {
    std::fprintf(stderr, "starpu_init failed\n");
    std::exit(1);
  }
  std::printf("starpu: %d CPU workers, scheduler %s\n",
              starpu_cpu_worker_get_count(),
              getenv("STARPU_SCHED") ? getenv("STARPU_SCHED") : "default");
  starpu_codelet codelet;
  starpu_codelet_init(&codelet);
  codelet.cpu_funcs[0] = EmptyTask;
  codelet.nbuffers = 0;
  codelet.name = "empty";
  std::vector<double> per_task;
  std::vector<starpu_task*> tasks(n);
  std::vector<starpu_task*> deps;
  for (int run = 0; run <= runs; ++run) {
    const absl::Time create_start = absl::Now();
    for (int i = 0; i < n; ++i) {
      starpu_task* task = starpu_task_create();
      task->cl = &codelet;
      task->destroy = 0;  // dependents refer to it; freed below
      tasks[i] = task;
      deps.clear();
      for (int p : dag.preds[i]) deps.push_back(tasks[p]);
      starpu_task_declare_deps_array(task, deps.size(), deps.data());
    }
    const absl::Time start = absl::Now();
    for (int i = 0; i < n; ++i) {
      if (starpu_task_submit(tasks[i]) != 0) {
        std::fprintf(stderr, "starpu_task_submit failed\n");
        std::exit(1);
      }
    }
    starpu_task_wait_for_all();
    const absl::Time end = absl::Now();
    for (starpu_task* task : tasks) starpu_task_destroy(task);
    if (run > 0) {
      per_task.push_back(absl::ToDoubleMicroseconds(end - start) / n);
      create_per_task->push_back(
          absl::ToDoubleMicroseconds(start - create_start) / n);
    }
  }
  starpu_shutdown();
  return per_task;
}
#endif

int Main(int argc, char** argv) {
  if (std::getenv("WEFT_BENCH_DEADLOCK_DETECTION") == nullptr) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  const int n = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  if (n < 3 || runs < 1) {
    std::fprintf(stderr, "usage: executor_overhead_bench [nodes>=3] [runs]\n");
    return 2;
  }
  const Dag dag = LayeredForkJoin(n, /*width=*/64, /*seed=*/7);
  std::printf(
      "DAG: %d nodes, %d edges (fork, layers of 64, 1-3 deps per"
      " node, join)\n",
      n, dag.edges);
  std::vector<double> weft = RunWeft(dag, runs);
  std::printf("weft  us/node:");
  for (double v : weft) std::printf(" %.3f", v);
  std::printf("   median %.3f\n", Median(weft));
#ifdef WEFT_BENCH_WITH_STARPU
  std::vector<double> create;
  std::vector<double> starpu = RunStarpu(dag, runs, &create);
  std::printf("starpu us/task:");
  for (double v : starpu) std::printf(" %.3f", v);
  std::printf("   median %.3f (plus %.3f creating tasks and deps)\n",
              Median(starpu), Median(create));
  std::printf("weft / starpu: %.3f\n", Median(weft) / Median(starpu));
#else
  std::printf(
      "(StarPU comparison: bazel run -c opt "
      "//runtime:executor_overhead_bench_starpu)\n");
#endif
  return 0;
}

}  // namespace
}  // namespace weft::runtime

int main(int argc, char** argv) { return weft::runtime::Main(argc, argv); }
