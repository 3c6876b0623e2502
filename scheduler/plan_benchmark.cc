// Planner throughput on random layered DAGs.
//
// For each size N: a graph of N `spin` nodes in layers of `width`; every
// node writes its own buffer and reads one to three buffers written in the
// previous two layers. Prints the time of PlanGraph (2 devices, the
// default device policy unless --policy says otherwise) beside the time of a
// bare topological sort (Kahn) of the same dependency edges, all in the same
// run, as thread CPU time (best of three): a full plan without reasons (plan_s:
// devices, streams, events and the simulated times), the plan weftd makes for a
// job (job_s: no reasons, no simulation, PlannerOptions::simulate false;
// executing needs neither), and a full plan with reasons (why_s, as `weftctl
// plan` shows it); then the wall time of the full plan without reasons
// (planning runs on the calling thread only, so the two differ only by what a
// busy machine takes), and where its time went.
//
//   bazel run -c opt //scheduler:plan_benchmark -- [N ...] [--policy=K]
//   bazel run -c opt //scheduler:plan_benchmark -- --compare [N]
//   bazel run -c opt //scheduler:plan_benchmark -- --digest [N ...]
//   bazel run -c opt //scheduler:plan_benchmark -- --profile[_job] [N [K]]
//   bazel run -c opt //scheduler:plan_benchmark -- --small [N ...]
//
// K is a DevicePolicyKind number (0 ROUND_ROBIN ... 5 MIN_FINISH_TIME,
// 6 LOOKAHEAD_FINISH_TIME).
// --compare plans one graph of N nodes (default 10000; costs 1-100 us,
// 1 MB buffers) with every policy, with and without
// restrict_to_parent_devices, and prints the cross-device dependencies,
// events, simulated makespan and lower bound of each plan. --digest plans
// the benchmark graphs and a chain (default 1000 and 100000 nodes) with
// every policy, with and without reasons and as a job's plan (no
// simulation), and prints a hash of each plan's content
// (devices, streams, dependencies, events, estimated times, reasons):
// a change to the planner that should not change its answers must leave
// these lines the same. --profile plans one graph of N nodes (default
// 1000000) K times (default 10) without reasons and does nothing else, for
// a profiler to attach to, and prints the best time; --profile_job plans
// as weftd does for a job (no simulation either). --small prints the CPU
// time of a job's plan of a chain of 1, 2, 8 and 64 nodes (or of N nodes), with
// its memory planned as weftd plans it (the jobs of weftd's load benchmark):
// the fixed cost of planning, which small jobs pay on every submission.
//
// Linked with weftd's allocator (tcmalloc). Before each timed run the
// allocator's free pages go back to the system, as weftd's memory trimmer
// hands them back after a call on a large graph: no run reuses pages an
// earlier one faulted in, while a plan reuses the memory its own earlier
// stages freed, as in weftd.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/allocator.h"
#include "common/thread_time.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/plan_digest.h"
#include "scheduler/planner.h"

namespace weft::scheduler {
namespace {

Graph LayeredGraph(int n, int width, std::mt19937& rng,
                   uint64_t buffer_bytes = 1024) {
  std::vector<BufferSpec> buffers(n);
  std::vector<NodeSpec> nodes(n);
  std::uniform_int_distribution<int> fan_in(1, 3);
  std::uniform_real_distribution<double> cost(1, 100);
  for (int i = 0; i < n; ++i) {
    buffers[i].name = absl::StrCat("b", i);
    buffers[i].size_bytes = buffer_bytes;
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

int Compare(int n) {
  std::mt19937 rng(7);
  Graph graph = LayeredGraph(n, /*width=*/64, rng, /*buffer_bytes=*/1 << 20);
  std::printf("%-22s %8s %8s %8s %12s %12s\n", "policy", "parents", "cross",
              "events", "makespan_us", "bound_us");
  const char* names[] = {"ROUND_ROBIN",          "STREAM_AWARE",
                         "MIN_TRANSFER_SIZE",    "MINMIN_TRANSFER_TIME",
                         "MINMAX_TRANSFER_TIME", "MIN_FINISH_TIME"};
  for (int k = 0; k < 6; ++k) {
    for (bool parents : {false, true}) {
      PlannerOptions options;
      options.num_devices = 2;
      options.device_policy = static_cast<DevicePolicyKind>(k);
      options.restrict_to_parent_devices = parents;
      options.explain = false;
      absl::StatusOr<Plan> plan = PlanGraph(graph, options);
      if (!plan.ok()) {
        std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
        return 1;
      }
      std::vector<int> device(graph.num_nodes());
      for (const PlannedNode& pn : plan->nodes) device[pn.node] = pn.device;
      int64_t cross = 0;
      for (int i = 0; i < plan->num_nodes(); ++i) {
        for (NodeId d : plan->Deps(i)) {
          cross += device[d] != plan->nodes[i].device;
        }
      }
      std::printf("%-22s %8s %8lld %8d %12.0f %12.0f\n", names[k],
                  parents ? "yes" : "no", static_cast<long long>(cross),
                  plan->num_events, plan->estimated_makespan_us,
                  plan->lower_bound_us);
    }
  }
  return 0;
}

// The layered graph with every feature a plan can show: copy and
// collective nodes, stream labels, pinned nodes, explicit `after` edges,
// buffers read and written by several nodes.
Graph MixedGraph(int n, std::mt19937& rng) {
  Graph layered = LayeredGraph(n, /*width=*/48, rng, /*buffer_bytes=*/1 << 16);
  std::vector<BufferSpec> buffers(layered.num_buffers());
  for (int b = 0; b < layered.num_buffers(); ++b) {
    buffers[b].name = absl::StrCat("b", b);
    buffers[b].size_bytes = layered.buffer_bytes(b);
  }
  std::vector<NodeSpec> nodes(n);
  std::uniform_int_distribution<int> percent(0, 99);
  for (NodeId v = 0; v < n; ++v) {
    NodeSpec& node = nodes[v];
    node.name = absl::StrCat("n", v);
    node.op = "spin";
    node.cost_us = layered.cost_us(v);
    for (const BufferUse& use : layered.Uses(v)) node.args.push_back(use);
    const int roll = percent(rng);
    if (roll < 10) {
      node.engine = Engine::kCopy;
    } else if (roll < 12) {
      node.engine = Engine::kCollective;
    } else if (roll < 16) {
      node.stream_label = absl::StrCat("lane", roll % 3);
    } else if (roll < 19) {
      node.device = roll % 2;
    }
    if (v > 8 && percent(rng) < 5) node.after.push_back(v - 1 - roll % 8);
    // Every tenth node also updates an older node's buffer in place.
    if (v > 200 && v % 10 == 0) {
      node.args.push_back(BufferUse{v - 50 - roll, Access::kReadWrite});
    }
  }
  return Graph("mixed", std::move(buffers), std::move(nodes));
}

// A chain of n nodes, each updating one buffer in place after the one
// before it (the shape of the small jobs of weftd's load benchmark): a
// graph with a single topological order.
Graph ChainGraph(int n, std::mt19937& rng) {
  std::vector<BufferSpec> buffers(1);
  buffers[0].name = "x";
  buffers[0].size_bytes = 256;
  std::vector<NodeSpec> nodes(n);
  std::uniform_real_distribution<double> cost(1, 100);
  for (NodeId v = 0; v < n; ++v) {
    nodes[v].name = absl::StrCat("n", v);
    nodes[v].op = "spin";
    nodes[v].cost_us = cost(rng);
    nodes[v].args.push_back(
        BufferUse{0, v == 0 ? Access::kWrite : Access::kReadWrite});
  }
  return Graph("chain", std::move(buffers), std::move(nodes));
}

int PrintDigests(std::vector<int> sizes) {
  if (sizes.empty()) sizes = {1000, 100000};
  enum class Shape { kLayered, kMixed, kChain };
  const char* names[] = {"layered", "mixed", "chain"};
  for (int n : sizes) {
    for (Shape shape : {Shape::kLayered, Shape::kMixed, Shape::kChain}) {
      std::mt19937 rng(42);
      Graph graph = shape == Shape::kMixed ? MixedGraph(n, rng)
                    : shape == Shape::kChain
                        ? ChainGraph(n, rng)
                        : LayeredGraph(n, /*width=*/64, rng,
                                       /*buffer_bytes=*/1 << 20);
      // Every policy; each with and without reasons, and as weftd plans a
      // job (no reasons, no simulation).
      for (int k = 0; k <= 6; ++k) {
        for (int variant = 0; variant < 3; ++variant) {
          PlannerOptions options;
          options.num_devices = 3;
          options.device_policy = static_cast<DevicePolicyKind>(k);
          options.max_streams_per_device = 6;
          options.max_nodes_per_stream = 5000;
          options.explain = variant == 1;
          options.simulate = variant != 2;
          absl::StatusOr<Plan> plan = PlanGraph(graph, options);
          if (!plan.ok()) {
            std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
            return 1;
          }
          std::printf("%s nodes %d policy %d %s: %016llx\n",
                      names[static_cast<int>(shape)], n, k,
                      variant == 2   ? "job"
                      : variant == 1 ? "explain 1"
                                     : "explain 0",
                      static_cast<unsigned long long>(PlanDigest(*plan)));
        }
      }
    }
  }
  return 0;
}

// Planning only, for profilers.
int Profile(int n, int repeats, bool job) {
  std::mt19937 rng(42);
  Graph graph = LayeredGraph(n, /*width=*/64, rng);
  PlannerOptions options;
  options.num_devices = 2;
  options.explain = false;
  options.simulate = !job;
  double best = 1e30;
  PlanProfile best_profile;
  size_t streams = 0;
  int events = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    ReleaseFreeMemory();
    PlanProfile profile;
    const double start = ThreadSeconds();
    absl::StatusOr<Plan> plan = PlanGraph(graph, options, &profile);
    const double seconds = ThreadSeconds() - start;
    if (seconds < best) {
      best = seconds;
      best_profile = profile;
    }
    if (!plan.ok()) {
      std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
      return 1;
    }
    streams = plan->streams.size();
    events = plan->num_events;
  }
  std::printf(
      "%d nodes planned %d times (%zu streams, %d events), best %.4f s\n", n,
      repeats, streams, events, best);
  const PlanProfile& p = best_profile;
  std::printf(
      "of which dependencies %.4f, devices %.4f, streams %.4f, simulate "
      "%.4f, output %.4f, memory %.4f\n",
      p.dependencies_s, p.devices_s, p.streams_s, p.simulation_s, p.explain_s,
      p.memory_s);
  for (const auto& [name, seconds] : p.passes_s) {
    std::printf("  %-30s %.4f\n", name.c_str(), seconds);
  }
  return 0;
}

// --small: microseconds of CPU time per job plan of small chains (of
// `sizes` nodes; default 1, 2, 8 and 64).
int Small(std::vector<int> sizes) {
  if (sizes.empty()) sizes = {1, 2, 8, 64};
  std::printf("%8s %14s\n", "nodes", "us_per_plan");
  for (const int n : sizes) {
    std::mt19937 rng(3);
    const Graph graph = ChainGraph(n, rng);
    PlannerOptions options;
    options.num_devices = 2;
    options.explain = false;
    options.simulate = false;
    options.plan_memory = true;
    options.plan_memory_over_budget = true;
    constexpr int kPlans = 2000;
    double best = 1e30;
    for (int round = 0; round < 3; ++round) {
      const double start = ThreadSeconds();
      for (int k = 0; k < kPlans; ++k) {
        absl::StatusOr<Plan> plan = PlanGraph(graph, options);
        if (!plan.ok()) {
          std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
          return 1;
        }
      }
      best = std::min(best, (ThreadSeconds() - start) / kPlans);
    }
    std::printf("%8d %14.2f\n", n, best * 1e6);
  }
  return 0;
}

int Run(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--small") {
    std::vector<int> sizes;
    for (int i = 2; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
    return Small(std::move(sizes));
  }
  if (argc >= 2 && (std::string(argv[1]) == "--profile" ||
                    std::string(argv[1]) == "--profile_job")) {
    return Profile(argc >= 3 ? std::atoi(argv[2]) : 1000000,
                   argc >= 4 ? std::atoi(argv[3]) : 10,
                   std::string(argv[1]) == "--profile_job");
  }
  if (argc >= 2 && std::string(argv[1]) == "--compare") {
    return Compare(argc >= 3 ? std::atoi(argv[2]) : 10000);
  }
  if (argc >= 2 && std::string(argv[1]) == "--digest") {
    std::vector<int> sizes;
    for (int i = 2; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
    return PrintDigests(sizes);
  }
  std::vector<int> sizes;
  DevicePolicyKind policy = PlannerOptions().device_policy;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--policy=", 0) == 0) {
      policy = static_cast<DevicePolicyKind>(std::atoi(arg.c_str() + 9));
    } else {
      sizes.push_back(std::atoi(argv[i]));
    }
  }
  if (sizes.empty()) sizes = {1000, 10000, 100000, 1000000};
  std::printf("%10s %9s %9s %9s %7s %9s %7s %9s %7s %9s %8s %8s\n", "nodes",
              "edges", "topo_s", "plan_s", "ratio", "job_s", "ratio", "why_s",
              "ratio", "wall_s", "streams", "events");
  std::vector<PlanProfile> profiles;
  for (int n : sizes) {
    std::mt19937 rng(42);
    Graph graph = LayeredGraph(n, /*width=*/64, rng);
    Csr raw = CollectDependencies(graph);
    // Best of three for each figure, all on the same graph in this run.
    double topo = 1e30, planning = 1e30, job = 1e30, explained = 1e30,
           wall = 1e30;
    PlanProfile best_profile;
    size_t streams = 0;
    int events = 0;
    for (int rep = 0; rep < 3; ++rep) {
      ReleaseFreeMemory();
      double start = ThreadSeconds();
      std::vector<NodeId> order = BareTopologicalSort(raw);
      topo = std::min(topo, ThreadSeconds() - start);
      if (static_cast<int>(order.size()) != n) return 1;

      PlannerOptions options;
      options.num_devices = 2;
      options.device_policy = policy;
      // Full without reasons, for a job, full with reasons.
      for (int kind = 0; kind < 3; ++kind) {
        const bool explain = kind == 2;
        options.explain = explain;
        options.simulate = kind != 1;
        PlanProfile profile;
        ReleaseFreeMemory();
        start = ThreadSeconds();
        const auto wall_start = std::chrono::steady_clock::now();
        absl::StatusOr<Plan> plan = PlanGraph(graph, options, &profile);
        const double seconds = ThreadSeconds() - start;
        const double wall_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                          wall_start)
                .count();
        if (!plan.ok()) {
          std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
          return 1;
        }
        if (kind == 0) {
          wall = std::min(wall, wall_seconds);
          if (seconds < planning) {
            planning = seconds;
            best_profile = profile;
          }
        } else if (kind == 1) {
          job = std::min(job, seconds);
        } else {
          explained = std::min(explained, seconds);
        }
        streams = plan->streams.size();
        events = plan->num_events;
      }
    }
    profiles.push_back(best_profile);
    std::printf(
        "%10d %9zu %9.4f %9.4f %7.1f %9.4f %7.1f %9.4f %7.1f %9.4f %8zu %8d\n",
        n, raw.items.size(), topo, planning, planning / topo, job, job / topo,
        explained, explained / topo, wall, streams, events);
  }
  std::printf(
      "\nwithout reasons, CPU seconds per stage:\n%10s %12s %9s %9s %9s "
      "%9s\n",
      "nodes", "dependencies", "devices", "streams", "simulate", "output");
  for (size_t i = 0; i < sizes.size(); ++i) {
    const PlanProfile& p = profiles[i];
    std::printf("%10d %12.4f %9.4f %9.4f %9.4f %9.4f\n", sizes[i],
                p.dependencies_s, p.devices_s, p.streams_s, p.simulation_s,
                p.explain_s);
  }
  std::printf("\nstream passes at %d nodes, CPU seconds:\n", sizes.back());
  for (const auto& [name, seconds] : profiles.back().passes_s) {
    std::printf("  %-28s %9.4f\n", name.c_str(), seconds);
  }
  return 0;
}

}  // namespace
}  // namespace weft::scheduler

int main(int argc, char** argv) { return weft::scheduler::Run(argc, argv); }
