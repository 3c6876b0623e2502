// Simulated makespan of executed jobs against the plan's estimate.
//
// Plans graphs with PlanGraph, runs each plan on a fresh simulated machine
// that matches the planner's model (same topology, same kernel work queues
// per device, one copy at a time per copy engine, unpaced clock), and
// compares the makespan the job's trace shows with
// plan.estimated_makespan_us. The measured makespan runs from the job's
// first piece of device work to the end of its last, on the device clock:
// uploads, kernels, copies between devices and the output downloads that
// end the job, as the cost model's makespan does (last_node_us is the end
// of the last graph node alone, for comparison).
//
// Default run: random layered DAGs of `spin` nodes with costs and buffers
// (each node writes a buffer of its own and reads one to three written in
// the two layers above it; the first layer reads host-initialized inputs;
// no outputs), on 2 devices, under several device policies, the
// planner's default one (a default-constructed PlannerOptions') last. Shapes
// vary the buffer sizes (up to tens of MiB, where transfers weigh as much
// as kernels) and the nodes' occupancy (a share of the device, so that
// kernels pack side by side). The host_MiB column is the host memory the
// simulated devices hold at the end (SimBackend::materialized_bytes):
// spins never need contents, and uploads keep only their data, so only the
// inputs' few bytes of data have any.
//
// --schedule_cases: every case of scheduler::AllScheduleCases() (GrCUDA's
// benchmark DAGs, fork/joins, random DAGs; benchmark_graphs.h) with the
// planner's default options on 1, 2, 4 and 8 devices (--devices), taking
// minutes rather than seconds. Host memory: an upload of initial data
// stages the data alone and the simulated device keeps only that (zeros
// after it take none), so a case's large host-initialized buffers cost
// next to nothing (init_MiB is their size, data_B the bytes staged). The
// job's results come back as HostBuffers (runtime/host_buffer.h) that
// store an output's bytes up to the end of its data: the cases' kernels
// write no contents, so their outputs (out_MiB in all) take next to no
// host memory either. A case whose staged data and outputs stored in full
// would exceed --max_staged_mib (default 8192, above the largest case's
// outputs) is skipped and named; the rest print estimate, measured, ratio, the
// simulated devices' host memory (host_MiB) and the process's peak
// resident memory during the run (peak_MiB, Linux), and at the end
// min / median / max and the worst deviation. --cases=SUBSTRING keeps the
// cases whose name contains it; --all runs both sets; --wide runs the
// cases of scheduler::WideScheduleCases() instead (graphs the schedule
// cases do not include, as schedule_quality_bench --wide). --paced runs the
// schedule cases on a paced clock (time_scale 1, as weftd's simulated
// devices run) and also prints each job's wall time, from starting it to
// its end being reported (the duration a daemon reports for the job),
// against the estimate: as the first job of a fresh simulated machine
// warmed up as weftd warms its executor at start (warm_up.h), for the same
// job run again on that machine (as a daemon's long-lived executor runs
// it), and as the first job of a fresh machine not warmed up.
//
// --trace_dir=DIR writes each schedule case's trace (its first run) to
// DIR/<case>_<N>dev.json, for ui.perfetto.dev or chrome://tracing.
//
// Under any run whose measured makespan is not exactly the estimate, a
// line names the first divergence: the node that ends earliest in the
// estimate among those whose traced end differs from it.
//
// WEFT_BENCH_FAST_LINKS=1 makes every copy of the random DAGs (nearly)
// free on both sides, to compare the kernel schedules alone.
// WEFT_BENCH_LAUNCH_MODE=graphs runs every job as device graphs
// (LaunchMode::kDeviceGraphs; the last node is then the last graph).
//
//   bazel run -c opt //runtime:makespan_bench
//   bazel run -c opt //runtime:makespan_bench -- --schedule_cases
//       [--cases=SUBSTRING] [--devices=1,2,4,8] [--max_staged_mib=N]
//       [--paced] [--trace_dir=DIR]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/peak_resident.h"
#include "runtime/executor.h"
#include "runtime/measured_run.h"
#include "runtime/sim/sim_backend.h"
#include "runtime/trace.h"
#include "scheduler/benchmark_graphs.h"
#include "scheduler/graph.h"
#include "scheduler/planner.h"
#include "scheduler/planner_options.h"
#include "scheduler/topology.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::BufferSpec;
using scheduler::BufferUse;

struct Shape {
  int nodes;
  int width;
  uint32_t seed;
  // Buffer sizes, uniform in [min_bytes, max_bytes].
  uint64_t min_bytes = 16 << 10;
  uint64_t max_bytes = 1 << 20;
  // Node occupancies, drawn uniformly from these (empty: all 1).
  std::vector<double> occupancies;
};

scheduler::Graph RandomGraph(const Shape& shape) {
  std::mt19937 rng(shape.seed);
  std::uniform_real_distribution<double> cost(10, 200);
  std::uniform_int_distribution<int> fan_in(1, 3);
  std::uniform_int_distribution<uint64_t> size(shape.min_bytes,
                                               shape.max_bytes);
  std::uniform_int_distribution<size_t> occupancy(
      0, shape.occupancies.empty() ? 0 : shape.occupancies.size() - 1);
  std::vector<BufferSpec> buffers;
  std::vector<scheduler::NodeSpec> nodes(shape.nodes);
  // Inputs with initial data, read by the first layer.
  const int inputs = std::max(1, shape.width / 4);
  for (int i = 0; i < inputs; ++i) {
    BufferSpec b;
    b.name = absl::StrCat("in", i);
    b.size_bytes = size(rng);
    b.init = BufferSpec::Init::kData;
    b.data = "input";
    buffers.push_back(b);
  }
  for (int i = 0; i < shape.nodes; ++i) {
    BufferSpec out;
    out.name = absl::StrCat("b", i);
    out.size_bytes = size(rng);
    const int out_id = static_cast<int>(buffers.size());
    buffers.push_back(out);
    scheduler::NodeSpec& node = nodes[i];
    node.name = absl::StrCat("n", i);
    node.op = "spin";
    node.cost_us = cost(rng);
    if (!shape.occupancies.empty()) {
      node.occupancy = shape.occupancies[occupancy(rng)];
    }
    const int layer = i / shape.width;
    const int k = fan_in(rng);
    for (int a = 0; a < k; ++a) {
      int read = 0;
      if (layer == 0) {
        read = std::uniform_int_distribution<int>(0, inputs - 1)(rng);
      } else {
        const int lo = std::max(0, (layer - 2) * shape.width);
        const int hi = layer * shape.width - 1;
        read = inputs + std::uniform_int_distribution<int>(lo, hi)(rng);
      }
      node.args.push_back(BufferUse{read, Access::kRead});
    }
    node.args.push_back(BufferUse{out_id, Access::kWrite});
  }
  return scheduler::Graph(absl::StrCat("random", shape.seed),
                          std::move(buffers), std::move(nodes));
}

std::string PolicyName(scheduler::DevicePolicyKind kind) {
  return std::string(scheduler::DevicePolicyName(kind));
}

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Measured / estimate ratios and the worst deviation from 1.
class Summary {
 public:
  void Add(double estimate_us, double measured_us, const std::string& label) {
    const double ratio = measured_us / estimate_us;
    ratios_.push_back(ratio);
    if (std::abs(ratio - 1) > worst_) {
      worst_ = std::abs(ratio - 1);
      worst_us_ = measured_us - estimate_us;
      worst_label_ = label;
    }
    if (measured_us == estimate_us) ++exact_;
  }
  bool empty() const { return ratios_.empty(); }
  void Print(const char* what) {
    if (ratios_.empty()) {
      std::printf("%s: nothing measured\n", what);
      return;
    }
    std::sort(ratios_.begin(), ratios_.end());
    std::printf(
        "%s: measured / estimate over %zu runs (%d exact): min %.4f, median "
        "%.4f, max %.4f; worst deviation %.4f%%",
        what, ratios_.size(), exact_, ratios_.front(),
        ratios_[ratios_.size() / 2], ratios_.back(), 100 * worst_);
    if (!worst_label_.empty()) {
      std::printf(" (%+.3g us, %s)", worst_us_, worst_label_.c_str());
    }
    std::printf("\n");
  }

 private:
  std::vector<double> ratios_;
  double worst_ = 0;
  double worst_us_ = 0;
  std::string worst_label_;
  int exact_ = 0;
};

struct Flags {
  bool random_shapes = true;
  bool schedule_cases = false;
  std::string cases;  // keep the schedule cases whose name contains this
  std::vector<int> devices = {1, 2, 4, 8};
  // Schedule cases whose host staging (see StagedBytes) exceeds this are
  // skipped.
  uint64_t max_staged_bytes = uint64_t{8} << 30;
  bool paced = false;
  // Where each schedule case's trace (its first run) is written, as
  // Chrome/Perfetto JSON; empty: nowhere.
  std::string trace_dir;
  // The schedule cases of scheduler::WideScheduleCases() instead.
  bool wide = false;
};

bool ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--schedule_cases") {
      flags.schedule_cases = true;
      flags.random_shapes = false;
    } else if (arg == "--all") {
      flags.schedule_cases = true;
      flags.random_shapes = true;
    } else if (arg == "--wide") {
      flags.schedule_cases = true;
      flags.random_shapes = false;
      flags.wide = true;
    } else if (absl::ConsumePrefix(&arg, "--cases=")) {
      flags.cases = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--devices=")) {
      flags.devices.clear();
      for (absl::string_view item : absl::StrSplit(arg, ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(item, &n) || n < 1) return false;
        flags.devices.push_back(n);
      }
      if (flags.devices.empty()) return false;
    } else if (arg == "--paced") {
      flags.paced = true;
    } else if (absl::ConsumePrefix(&arg, "--trace_dir=")) {
      if (arg.empty()) return false;
      flags.trace_dir = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--max_staged_mib=")) {
      uint64_t mib = 0;
      if (!absl::SimpleAtoi(arg, &mib)) return false;
      flags.max_staged_bytes = mib * kMiB;
    } else {
      return false;
    }
  }
  return true;
}

int RunRandomShapes() {
  const std::vector<double> partial = {0.125, 0.25, 0.5, 1.0};
  const std::vector<Shape> shapes = {
      {200, 8, 1},
      {500, 16, 2},
      {1000, 32, 3},
      {2000, 16, 4},
      {2000, 64, 5},
      // Large buffers: transfers of tens of MiB.
      {100, 8, 6, 16 * kMiB, 64 * kMiB},
      {200, 16, 7, 8 * kMiB, 32 * kMiB},
      // Partial occupancy: kernels share devices.
      {500, 16, 8, 16 << 10, 1 << 20, partial},
      {2000, 64, 9, 16 << 10, 1 << 20, partial},
      // Both.
      {200, 16, 10, 8 * kMiB, 32 * kMiB, partial},
  };
  const std::vector<scheduler::DevicePolicyKind> policies = {
      scheduler::DevicePolicyKind::kRoundRobin,
      scheduler::DevicePolicyKind::kMinTransferSize,
      scheduler::DevicePolicyKind::kMinFinishTime,
      // The planner's default.
      scheduler::PlannerOptions().device_policy,
  };
  constexpr int kDevices = 2;
  scheduler::Topology topology = scheduler::Topology::Default(kDevices);
  if (std::getenv("WEFT_BENCH_FAST_LINKS") != nullptr) {
    topology = scheduler::Topology::FromMatrix(
                   std::vector<std::vector<double>>(
                       kDevices + 1, std::vector<double>(kDevices + 1, 1e9)))
                   .value();
  }
  std::printf("%6s %5s %7s %5s %-18s %12s %12s %8s %12s %8s\n", "nodes",
              "width", "MiB", "occ", "policy", "estimate_us", "measured_us",
              "ratio", "lower_bound", "host_MiB");
  Summary summary;
  for (const Shape& shape : shapes) {
    auto graph = std::make_shared<const scheduler::Graph>(RandomGraph(shape));
    for (scheduler::DevicePolicyKind policy : policies) {
      scheduler::PlannerOptions options;
      options.num_devices = kDevices;
      options.device_policy = policy;
      options.topology = topology;
      options.explain = false;
      // The simulated machine: each copy engine moves one copy at a time.
      options.copy_engines_per_device = 1;
      const std::string sizes =
          absl::StrCat(shape.max_bytes / kMiB > 0 ? shape.max_bytes / kMiB : 1);
      const char* occupancy = shape.occupancies.empty() ? "1" : "mixed";
      absl::StatusOr<scheduler::Plan> plan = PlanGraph(*graph, options);
      if (!plan.ok()) {
        std::printf("%6d %5d %7s %5s %-18s %s\n", shape.nodes, shape.width,
                    sizes.c_str(), occupancy, PolicyName(policy).c_str(),
                    plan.status().ToString().c_str());
        continue;
      }
      auto shared = std::make_shared<const scheduler::Plan>(*std::move(plan));
      const MeasuredRun measured =
          RunMeasured(graph, shared, topology, options.max_concurrent_kernels,
                      /*paced=*/false, /*trace_path=*/"");
      if (measured.makespan_us < 0) return 1;
      const double ratio = measured.makespan_us / shared->estimated_makespan_us;
      summary.Add(shared->estimated_makespan_us, measured.makespan_us,
                  absl::StrCat("seed ", shape.seed, " ", PolicyName(policy)));
      std::printf("%6d %5d %7s %5s %-18s %12.1f %12.1f %8.4f %12.1f %8.1f\n",
                  shape.nodes, shape.width, sizes.c_str(), occupancy,
                  PolicyName(policy).c_str(), shared->estimated_makespan_us,
                  measured.makespan_us, ratio, shared->lower_bound_us,
                  static_cast<double>(measured.host_bytes) / kMiB);
      if (measured.makespan_us != shared->estimated_makespan_us) {
        std::printf("  %s\n",
                    FirstDivergence(*graph, *shared, measured).c_str());
      }
    }
  }
  if (summary.empty()) return 1;
  summary.Print("random DAGs");
  return 0;
}

// Host memory a job of `graph` may take in the executor: the data of every
// host-initialized buffer, staged for its upload (the zeros after it are
// the upload's tail and take none, on the host or the simulated device),
// and at most every output's full size for its download (a HostBuffer
// stores up to the end of the data). `initial` is the host-initialized
// buffers' size, for the table.
struct Staged {
  uint64_t initial = 0;
  uint64_t data = 0;
  uint64_t outputs = 0;
  uint64_t total() const { return data + outputs; }
};

Staged StagedBytes(const scheduler::Graph& graph) {
  Staged staged;
  for (const BufferSpec& buffer : graph.buffers()) {
    if (buffer.init == BufferSpec::Init::kData) {
      staged.initial += buffer.size_bytes;
      staged.data += std::min<uint64_t>(buffer.data.size(), buffer.size_bytes);
    }
    if (buffer.output) staged.outputs += buffer.size_bytes;
  }
  return staged;
}

int RunScheduleCases(const Flags& flags) {
  const scheduler::PlannerOptions defaults;
  std::printf(
      "schedule cases, default options (%s), Topology::Default, %d kernel "
      "slots per device\n",
      PolicyName(defaults.device_policy).c_str(),
      defaults.max_concurrent_kernels);
  std::printf("%-16s %3s %5s %8s %6s %8s %12s %12s %8s %12s %12s %8s %8s %7s\n",
              "case", "dev", "nodes", "init_MiB", "data_B", "out_MiB",
              "estimate_us", "measured_us", "ratio", "last_node_us",
              "lower_bound", "host_MiB", "peak_MiB", "wall_s");
  Summary summary;
  Summary wall;       // paced: the job's wall time against the estimate
  Summary warm_wall;  // paced: the same job's run again
  Summary cold_wall;  // paced: the job's wall time, no warm-up
  std::vector<std::string> skipped;
  uint64_t max_host = 0;
  uint64_t max_peak = 0;
  const absl::Time all_start = absl::Now();
  for (scheduler::BenchmarkCase& c : flags.wide
                                         ? scheduler::WideScheduleCases()
                                         : scheduler::AllScheduleCases()) {
    if (!absl::StrContains(c.name, flags.cases)) continue;
    const Staged staged = StagedBytes(c.graph);
    if (staged.total() > flags.max_staged_bytes) {
      skipped.push_back(c.name);
      std::printf(
          "%-16s skipped: its outputs may need %.0f MiB of host memory and its "
          "initial data %.0f bytes (limit %.0f MiB)\n",
          c.name.c_str(), static_cast<double>(staged.outputs) / kMiB,
          static_cast<double>(staged.data),
          static_cast<double>(flags.max_staged_bytes) / kMiB);
      continue;
    }
    auto graph = std::make_shared<const scheduler::Graph>(std::move(c.graph));
    for (int devices : flags.devices) {
      scheduler::PlannerOptions options;
      options.num_devices = devices;
      options.topology = scheduler::Topology::Default(devices);
      options.explain = false;  // reasons only; the plan is the same
      absl::StatusOr<scheduler::Plan> plan = PlanGraph(*graph, options);
      if (!plan.ok()) {
        std::printf("%-16s %3d %s\n", c.name.c_str(), devices,
                    plan.status().ToString().c_str());
        continue;
      }
      auto shared = std::make_shared<const scheduler::Plan>(*std::move(plan));
      ResetPeakResident();
      const absl::Time start = absl::Now();
      std::string trace_path;
      if (!flags.trace_dir.empty()) {
        trace_path = absl::StrCat(flags.trace_dir, "/",
                                  absl::StrReplaceAll(c.name, {{" ", "_"}}),
                                  "_", devices, "dev.json");
      }
      const MeasuredRun measured =
          RunMeasured(graph, shared, *options.topology,
                      options.max_concurrent_kernels, flags.paced, trace_path);
      const double wall_s = absl::ToDoubleSeconds(absl::Now() - start);
      const uint64_t peak = PeakResidentBytes();
      max_peak = std::max(max_peak, peak);
      max_host = std::max(max_host, measured.host_bytes);
      if (measured.makespan_us < 0) return 1;
      const double ratio = measured.makespan_us / shared->estimated_makespan_us;
      summary.Add(shared->estimated_makespan_us, measured.makespan_us,
                  absl::StrCat(c.name, " on ", devices, " devices"));
      std::printf(
          "%-16s %3d %5d %8.1f %6llu %8.1f %12.1f %12.1f %8.4f %12.1f %12.1f "
          "%8.3f %8.0f %7.2f\n",
          c.name.c_str(), devices, graph->num_nodes(),
          static_cast<double>(staged.initial) / kMiB,
          static_cast<unsigned long long>(staged.data),
          static_cast<double>(staged.outputs) / kMiB,
          shared->estimated_makespan_us, measured.makespan_us, ratio,
          measured.last_node_us, shared->lower_bound_us,
          static_cast<double>(measured.host_bytes) / kMiB,
          static_cast<double>(peak) / kMiB, wall_s);
      if (flags.paced) {
        wall.Add(shared->estimated_makespan_us, measured.wall_us,
                 absl::StrCat(c.name, " on ", devices, " devices"));
        warm_wall.Add(shared->estimated_makespan_us, measured.warm_wall_us,
                      absl::StrCat(c.name, " on ", devices, " devices"));
        cold_wall.Add(shared->estimated_makespan_us, measured.cold_wall_us,
                      absl::StrCat(c.name, " on ", devices, " devices"));
        std::printf(
            "  paced: job wall time %.1f us (%.4f of the estimate); run "
            "again %.1f us (%.4f); without warm-up %.1f us (%.4f)\n",
            measured.wall_us, measured.wall_us / shared->estimated_makespan_us,
            measured.warm_wall_us,
            measured.warm_wall_us / shared->estimated_makespan_us,
            measured.cold_wall_us,
            measured.cold_wall_us / shared->estimated_makespan_us);
      }
      if (measured.makespan_us != shared->estimated_makespan_us) {
        std::printf("  %s\n",
                    FirstDivergence(*graph, *shared, measured).c_str());
      }
      std::fflush(stdout);
    }
  }
  if (summary.empty()) return 1;
  summary.Print("schedule cases");
  if (flags.paced) {
    wall.Print("schedule cases, paced job wall time");
    warm_wall.Print("schedule cases, paced job wall time, run again");
    cold_wall.Print("schedule cases, paced job wall time, without warm-up");
  }
  std::printf(
      "host memory: at most %llu bytes held by the simulated devices, %.0f "
      "MiB peak resident in one run; %.0f s in all\n",
      static_cast<unsigned long long>(max_host),
      static_cast<double>(max_peak) / kMiB,
      absl::ToDoubleSeconds(absl::Now() - all_start));
  if (!skipped.empty()) {
    std::printf("skipped %zu cases whose outputs exceed the host limit: %s\n",
                skipped.size(), absl::StrJoin(skipped, ", ").c_str());
  }
  return 0;
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) {
    std::fprintf(stderr,
                 "usage: makespan_bench [--schedule_cases | --all | --wide] "
                 "[--cases=SUBSTRING] [--devices=1,2,4,8] "
                 "[--max_staged_mib=N] [--paced] [--trace_dir=DIR]\n");
    return 2;
  }
  if (flags.random_shapes) {
    if (int rc = RunRandomShapes(); rc != 0) return rc;
  }
  if (flags.schedule_cases) return RunScheduleCases(flags);
  return 0;
}

}  // namespace
}  // namespace weft::runtime

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return weft::runtime::Main(argc, argv);
}
