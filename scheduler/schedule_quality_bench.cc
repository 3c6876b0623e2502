// Schedule quality: how close the planner's schedules come to the lower
// bound, and how they speed up with more devices.
//
// Plans every graph of AllScheduleCases (benchmark_graphs.h: GrCUDA's
// benchmark DAGs, fork/joins, random layered DAGs) on 1, 2, 4 and 8
// simulated devices (Topology::Default: 25 GB/s host links, 32 kernel slots
// per device) with every device policy, with the planner's default
// options, and with the defaults but copies between devices made on the
// readers' streams (no-eager: PlannerOptions::eager_copies off). For each plan
// it takes the cost model's simulated makespan over the plan's lower bound
// (lower_bound.h: no schedule on the cost model's machine beats it, so 1 is
// optimal and 1.05 close). It prints:
//
//   - the ratio per case, device count and policy ("n/a": a policy the
//     planner does not offer yet; "err": planning failed, see stderr);
//   - per policy, the mean and the worst ratio and how many plans are
//     within 1.05x of the bound;
//   - with the default options, each case's speedup on n devices over one
//     device (makespan(1) / makespan(n)) and the geometric means over
//     GrCUDA's multi-GPU cases and over all cases, beside the means GrCUDA
//     published for 2, 4 and 8 V100s.
//
//   bazel run -c opt //scheduler:schedule_quality_bench
//   bazel run -c opt //scheduler:schedule_quality_bench -- [--csv]
//       [--cases=SUBSTRING] [--devices=1,2,4,8]
//
// --cases keeps the cases whose name contains SUBSTRING (e.g. "B9M");
// --show prints the default plan of each case node by node instead;
// --devices sets the device counts (speedups need 1 among them);
// --seeds=21,22 builds the wide family's random DAGs from those seeds
// (above 3) instead of its own, to measure on graphs never tuned on; --csv
// prints the same figures as comma-separated rows tagged ratio, summary,
// speedup and speedup_mean.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/thread_time.h"
#include "scheduler/benchmark_graphs.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/device_policy.h"
#include "scheduler/lower_bound.h"
#include "scheduler/planner.h"
#include "scheduler/topology.h"

namespace weft::scheduler {
namespace {

// The simulated device's kernel slots.
constexpr int kKernelSlots = 32;
// A plan this close to its lower bound counts as good.
constexpr double kNearBound = 1.05;

struct Flags {
  std::string cases;
  std::vector<int> devices = {1, 2, 4, 8};
  bool csv = false;
  // Print the default plan of each case, node by node, instead.
  bool show = false;
  // WideScheduleCases instead of AllScheduleCases, with the defaults only.
  bool wide = false;
  // The wide family's random DAGs from these seeds instead (implies wide).
  std::vector<uint32_t> seeds;
  // Print the CPU time of each case's job plan instead (as weftd plans a
  // job: no reasons, no estimate; best of three).
  bool job_cost = false;
};

bool ParseDevices(absl::string_view list, std::vector<int>& devices) {
  devices.clear();
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    int n = 0;
    // Counts beyond the planner's limit show as "err".
    if (!absl::SimpleAtoi(item, &n) || n < 1) return false;
    devices.push_back(n);
  }
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  return !devices.empty();
}

bool ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--cases=")) {
      flags.cases = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--devices=")) {
      if (!ParseDevices(arg, flags.devices)) return false;
    } else if (arg == "--csv") {
      flags.csv = true;
    } else if (arg == "--show") {
      flags.show = true;
    } else if (arg == "--wide") {
      flags.wide = true;
    } else if (absl::ConsumePrefix(&arg, "--seeds=")) {
      flags.wide = true;
      for (absl::string_view item : absl::StrSplit(arg, ',')) {
        uint32_t seed = 0;
        if (!absl::SimpleAtoi(item, &seed) || seed <= 3) return false;
        flags.seeds.push_back(seed);
      }
      if (flags.seeds.empty()) return false;
    } else if (arg == "--job_cost") {
      flags.job_cost = true;
    } else {
      return false;
    }
  }
  return true;
}

// One column of the tables: the default options, or one policy.
struct Column {
  std::string name;
  std::optional<DevicePolicyKind> policy;  // empty: the defaults
  bool available = true;
  bool eager_copies = true;  // PlannerOptions::eager_copies
};

std::vector<Column> Columns() {
  // Short names, in DevicePolicyKind order.
  const char* const kNames[] = {"rr",     "stream", "minsize",  "minmin",
                                "minmax", "finish", "lookahead"};
  std::vector<Column> columns = {{"default", std::nullopt, true},
                                 {"no-eager", std::nullopt, true, false}};
  constexpr int kLast =
      static_cast<int>(DevicePolicyKind::kLookaheadFinishTime);
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kLast + 1);
  for (int k = 0; k <= kLast; ++k) {
    const auto kind = static_cast<DevicePolicyKind>(k);
    // A policy still being written has no implementation yet.
    columns.push_back({kNames[k], kind, CreateDevicePolicy(kind).ok()});
  }
  return columns;
}

// The default column sets only the machine and leaves everything else,
// the policy included, to PlannerOptions' defaults (reasons too: they cost
// time but do not change the plan).
PlannerOptions OptionsFor(const Column& column, int devices) {
  PlannerOptions options;
  options.num_devices = devices;
  options.max_concurrent_kernels = kKernelSlots;
  options.topology = Topology::Default(devices);
  options.eager_copies = column.eager_copies;
  if (column.policy.has_value()) {
    options.device_policy = *column.policy;
    options.explain = false;
    options.simulate = true;
  }
  return options;
}

struct Outcome {
  bool ok = false;
  double makespan_us = 0;
  double lower_bound_us = 0;
  double ratio() const { return makespan_us / lower_bound_us; }
};

// outcomes[case][device index][column].
using Outcomes = std::vector<std::vector<std::vector<Outcome>>>;

Outcome PlanOne(const BenchmarkCase& c, const Column& column, int devices) {
  Outcome outcome;
  if (!column.available) return outcome;
  absl::StatusOr<Plan> plan = PlanGraph(c.graph, OptionsFor(column, devices));
  if (!plan.ok()) {
    std::fprintf(stderr, "%s, %d devices, %s: %s\n", c.name.c_str(), devices,
                 column.name.c_str(), plan.status().ToString().c_str());
    return outcome;
  }
  outcome.ok = plan->lower_bound_us > 0;
  outcome.makespan_us = plan->estimated_makespan_us;
  outcome.lower_bound_us = plan->lower_bound_us;
  return outcome;
}

Outcomes PlanAll(const std::vector<BenchmarkCase>& cases,
                 const std::vector<Column>& columns, const Flags& flags) {
  Outcomes outcomes(cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    for (int devices : flags.devices) {
      std::vector<Outcome>& row = outcomes[c].emplace_back();
      for (const Column& column : columns) {
        row.push_back(PlanOne(cases[c], column, devices));
      }
    }
  }
  return outcomes;
}

std::string Fixed(double value, int decimals) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.*f", decimals, value);
  return text;
}

std::string Cell(const Column& column, const Outcome& outcome) {
  if (!column.available) return "n/a";
  if (!outcome.ok) return "err";
  return Fixed(outcome.ratio(), 3);
}

void PrintRatios(const std::vector<BenchmarkCase>& cases,
                 const std::vector<Column>& columns, const Flags& flags,
                 const Outcomes& outcomes) {
  if (flags.csv) {
    std::printf("ratio,case,devices,column,makespan_us,lower_bound_us,ratio\n");
  } else {
    std::printf("makespan / lower bound (%d kernel slots per device)\n",
                kKernelSlots);
    std::printf(
        "default: PlannerOptions' defaults; no-eager the same without eager "
        "copies;");
    for (const Column& column : columns) {
      if (column.policy.has_value()) {
        std::printf(" %s %s", column.name.c_str(),
                    std::string(DevicePolicyName(*column.policy)).c_str());
      }
    }
    std::printf("\n");
    std::printf("%-18s %4s", "case", "devs");
    for (const Column& column : columns) {
      std::printf(" %9s", column.name.c_str());
    }
    std::printf("\n");
  }
  for (size_t c = 0; c < cases.size(); ++c) {
    for (size_t d = 0; d < flags.devices.size(); ++d) {
      if (!flags.csv) {
        std::printf("%-18s %4d", cases[c].name.c_str(), flags.devices[d]);
      }
      for (size_t k = 0; k < columns.size(); ++k) {
        const Outcome& o = outcomes[c][d][k];
        const std::string cell = Cell(columns[k], o);
        if (flags.csv) {
          std::printf("ratio,%s,%d,%s,%.1f,%.1f,%s\n", cases[c].name.c_str(),
                      flags.devices[d], columns[k].name.c_str(), o.makespan_us,
                      o.lower_bound_us, cell.c_str());
        } else {
          std::printf(" %9s", cell.c_str());
        }
      }
      if (!flags.csv) std::printf("\n");
    }
  }
}

void PrintSummary(const std::vector<BenchmarkCase>& cases,
                  const std::vector<Column>& columns, const Flags& flags,
                  const Outcomes& outcomes) {
  if (flags.csv) {
    std::printf("summary,column,mean,worst,worst_case,within_1.05,plans\n");
  } else {
    std::printf("\nper policy, over all cases and device counts\n");
    std::printf("%-10s %8s %8s  %-24s %12s\n", "policy", "mean", "worst",
                "worst at", "within 1.05x");
  }
  for (size_t k = 0; k < columns.size(); ++k) {
    double sum = 0, worst = 0;
    int plans = 0, near = 0;
    std::string worst_at = "-";
    for (size_t c = 0; c < cases.size(); ++c) {
      for (size_t d = 0; d < flags.devices.size(); ++d) {
        const Outcome& o = outcomes[c][d][k];
        if (!o.ok) continue;
        const double ratio = o.ratio();
        sum += ratio;
        ++plans;
        near += ratio <= kNearBound;
        if (ratio > worst) {
          worst = ratio;
          worst_at = cases[c].name + " x" + std::to_string(flags.devices[d]);
        }
      }
    }
    const char* name = columns[k].name.c_str();
    if (plans == 0) {
      if (flags.csv) {
        std::printf("summary,%s,n/a,n/a,,0,0\n", name);
      } else {
        std::printf("%-10s %8s %8s\n", name, "n/a", "n/a");
      }
    } else if (flags.csv) {
      std::printf("summary,%s,%.3f,%.3f,%s,%d,%d\n", name, sum / plans, worst,
                  worst_at.c_str(), near, plans);
    } else {
      std::printf("%-10s %8.3f %8.3f  %-24s %7d / %d\n", name, sum / plans,
                  worst, worst_at.c_str(), near, plans);
    }
  }
}

// GrCUDA's mean multi-GPU speedups over one V100 (grcuda-policies.md §4);
// 0 where none was published.
double GrcudaSpeedup(int devices) {
  switch (devices) {
    case 2:
      return 1.53;
    case 4:
      return 2.21;
    case 8:
      return 2.62;
    default:
      return 0;
  }
}

void PrintSpeedups(const std::vector<BenchmarkCase>& cases, const Flags& flags,
                   const Outcomes& outcomes) {
  const auto one = std::find(flags.devices.begin(), flags.devices.end(), 1);
  if (one == flags.devices.end() || flags.devices.size() < 2) return;
  const size_t base = one - flags.devices.begin();
  constexpr size_t kDefault = 0;  // the default options' column
  const size_t n = flags.devices.size();
  // Sums of logs, for the geometric means: [0] multi-GPU cases, [1] all.
  std::vector<double> log_sum[2] = {std::vector<double>(n, 0),
                                    std::vector<double>(n, 0)};
  std::vector<int> count[2] = {std::vector<int>(n, 0), std::vector<int>(n, 0)};
  if (flags.csv) {
    std::printf("speedup,case,devices,speedup\n");
  } else {
    std::printf("\nspeedup over 1 device, default options\n%-18s", "case");
    for (size_t d = 0; d < n; ++d) {
      if (d != base) std::printf(" %7dx", flags.devices[d]);
    }
    std::printf("\n");
  }
  for (size_t c = 0; c < cases.size(); ++c) {
    const Outcome& alone = outcomes[c][base][kDefault];
    if (!flags.csv) std::printf("%-18s", cases[c].name.c_str());
    for (size_t d = 0; d < n; ++d) {
      if (d == base) continue;
      const Outcome& o = outcomes[c][d][kDefault];
      const bool ok = alone.ok && o.ok && o.makespan_us > 0;
      const double speedup = ok ? alone.makespan_us / o.makespan_us : 0;
      if (ok) {
        for (int set = 0; set < 2; ++set) {
          if (set == 0 && cases[c].suite != Suite::kGrcudaMultiGpu) continue;
          log_sum[set][d] += std::log(speedup);
          ++count[set][d];
        }
      }
      if (flags.csv) {
        std::printf("speedup,%s,%d,%.3f\n", cases[c].name.c_str(),
                    flags.devices[d], speedup);
      } else if (ok) {
        std::printf(" %8.3f", speedup);
      } else {
        std::printf(" %8s", "err");
      }
    }
    if (!flags.csv) std::printf("\n");
  }
  if (flags.csv) {
    std::printf("speedup_mean,set,devices,geomean,grcuda_v100\n");
  } else {
    std::printf("\ngeometric mean speedup, default options\n");
    std::printf("%7s %12s %12s %12s\n", "devices", "multi-GPU", "all cases",
                "GrCUDA V100");
  }
  for (size_t d = 0; d < n; ++d) {
    if (d == base) continue;
    // "-" where there is nothing to average or GrCUDA published nothing.
    std::string mean[2];
    for (int set = 0; set < 2; ++set) {
      mean[set] = count[set][d] > 0
                      ? Fixed(std::exp(log_sum[set][d] / count[set][d]), 3)
                      : "-";
    }
    const double grcuda = GrcudaSpeedup(flags.devices[d]);
    const std::string published = grcuda > 0 ? Fixed(grcuda, 2) : "-";
    if (flags.csv) {
      const char* sets[2] = {"multi_gpu", "all"};
      for (int set = 0; set < 2; ++set) {
        std::printf("speedup_mean,%s,%d,%s,%s\n", sets[set], flags.devices[d],
                    mean[set].c_str(), published.c_str());
      }
    } else {
      std::printf("%7d %12s %12s %12s\n", flags.devices[d], mean[0].c_str(),
                  mean[1].c_str(), published.c_str());
    }
  }
}

// The default plan of one case: every node's device, stream, transfer
// time, start and end.
void ShowPlan(const BenchmarkCase& c, int devices) {
  PlannerOptions options = OptionsFor(Column{"default", std::nullopt}, devices);
  options.explain = true;
  absl::StatusOr<Plan> plan = PlanGraph(c.graph, options);
  if (!plan.ok()) {
    std::printf("%s on %d: %s\n", c.name.c_str(), devices,
                plan.status().ToString().c_str());
    return;
  }
  std::printf(
      "%s on %d devices: makespan %.1f us, lower bound %.1f us "
      "(%.3f)\n",
      c.name.c_str(), devices, plan->estimated_makespan_us,
      plan->lower_bound_us, plan->estimated_makespan_us / plan->lower_bound_us);
  absl::StatusOr<Dag> dag = InferDependencies(c.graph);
  if (dag.ok()) {
    LowerBoundOptions bound;
    bound.num_devices = devices;
    bound.max_concurrent_kernels = options.max_concurrent_kernels;
    bound.copy_engines_per_device = options.copy_engines_per_device;
    const LowerBoundTerms t = ComputeLowerBound(c.graph, *dag, bound);
    std::printf(
        "  bound terms: critical path %.1f, kernel work %.1f, long kernels "
        "%.1f, copy work %.1f, uploads %.1f, downloads %.1f\n",
        t.critical_path_us, t.kernel_work_us, t.long_kernels_us, t.copy_work_us,
        t.uploads_us, t.downloads_us);
  }
  for (size_t i = 0; i < plan->nodes.size(); ++i) {
    const PlannedNode& pn = plan->nodes[i];
    const NodeEstimate e = plan->Estimate(static_cast<int>(i));
    std::printf("  %-14s d%d s%-3d xfer %9.1f  %10.1f .. %10.1f  %s\n",
                c.graph.node(pn.node).name.c_str(), pn.device, pn.stream,
                e.transfer_us, e.start_us, e.end_us, plan->reasons[i].c_str());
  }
}

// Each case's job plan on each device count, with the default options as
// weftd plans a job (no reasons, no estimate): CPU seconds, the best of
// three, the costliest cases and the total.
void PrintJobCosts(const std::vector<BenchmarkCase>& cases,
                   const Flags& flags) {
  struct Cost {
    double seconds;
    std::string label;
  };
  std::vector<Cost> costs;
  double total = 0;
  for (const BenchmarkCase& c : cases) {
    for (int devices : flags.devices) {
      PlannerOptions options =
          OptionsFor(Column{"default", std::nullopt}, devices);
      options.explain = false;
      options.simulate = false;
      double best = 0;
      for (int run = 0; run < 3; ++run) {
        const double start = ThreadSeconds();
        const absl::StatusOr<Plan> plan = PlanGraph(c.graph, options);
        const double seconds = ThreadSeconds() - start;
        if (!plan.ok()) {
          std::fprintf(stderr, "%s, %d devices: %s\n", c.name.c_str(), devices,
                       plan.status().ToString().c_str());
          break;
        }
        best = run == 0 ? seconds : std::min(best, seconds);
      }
      total += best;
      costs.push_back({best, c.name + " x" + std::to_string(devices)});
    }
  }
  std::sort(costs.begin(), costs.end(),
            [](const Cost& a, const Cost& b) { return a.seconds > b.seconds; });
  std::printf("job plans, default options, CPU ms (best of three)\n");
  for (size_t i = 0; i < costs.size() && i < 10; ++i) {
    std::printf("%-28s %9.2f\n", costs[i].label.c_str(),
                1e3 * costs[i].seconds);
  }
  std::printf("%zu job plans in %.3f s of CPU\n", costs.size(), total);
}

int Run(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) {
    std::fprintf(
        stderr,
        "usage: schedule_quality_bench [--cases=SUBSTRING] "
        "[--devices=1,2,4,8] [--csv] [--show] [--wide] [--seeds=S,S,...] "
        "[--job_cost]\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<BenchmarkCase> cases;
  for (BenchmarkCase& c :
       flags.wide ? (flags.seeds.empty() ? WideScheduleCases()
                                         : WideScheduleCases(flags.seeds))
                  : AllScheduleCases()) {
    if (absl::StrContains(c.name, flags.cases)) cases.push_back(std::move(c));
  }
  if (cases.empty()) {
    std::fprintf(stderr, "no case name contains '%s'\n", flags.cases.c_str());
    return 2;
  }
  if (flags.show) {
    for (const BenchmarkCase& c : cases) {
      for (int devices : flags.devices) ShowPlan(c, devices);
    }
    return 0;
  }
  if (flags.job_cost) {
    PrintJobCosts(cases, flags);
    return 0;
  }
  // The wide family is for the defaults; every policy on it takes long.
  std::vector<Column> columns = Columns();
  if (flags.wide) columns.resize(1);
  const Outcomes outcomes = PlanAll(cases, columns, flags);
  PrintRatios(cases, columns, flags, outcomes);
  PrintSummary(cases, columns, flags, outcomes);
  PrintSpeedups(cases, flags, outcomes);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  // On stderr in CSV mode, to keep stdout machine-readable.
  std::fprintf(flags.csv ? stderr : stdout,
               "\n%zu cases x %zu device counts x %zu columns in %.1f s\n",
               cases.size(), flags.devices.size(), columns.size(), seconds);
  return 0;
}

}  // namespace
}  // namespace weft::scheduler

int main(int argc, char** argv) { return weft::scheduler::Run(argc, argv); }
