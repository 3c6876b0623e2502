#include "scheduler/planner.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <queue>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/thread_time.h"
#include "scheduler/cost_model.h"
#include "scheduler/data_location.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/device_policy.h"
#include "scheduler/eager_copies.h"
#include "scheduler/huge_pages.h"
#include "scheduler/lower_bound.h"
#include "scheduler/memory/memory_order.h"
#include "scheduler/memory/memory_plan.h"
#include "scheduler/passes/split_streams_pass.h"
#include "scheduler/passes/stream_context.h"
#include "scheduler/passes/stream_pipeline.h"
#include "scheduler/plan_reasons.h"
#include "scheduler/spill_fitting.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler {
namespace {

absl::Status ValidateOptions(const Graph& graph,
                             const PlannerOptions& options) {
  if (options.num_devices < 1 ||
      options.num_devices > DataLocations::kMaxDevices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.num_devices: need between 1 and ", DataLocations::kMaxDevices,
        " devices, got ", options.num_devices));
  }
  if (options.max_streams_per_device < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.max_streams_per_device: must be at least 1, got ",
                     options.max_streams_per_device));
  }
  if (!options.busy_streams.empty() &&
      static_cast<int>(options.busy_streams.size()) != options.num_devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.busy_streams: has ", options.busy_streams.size(),
                     " entries for ", options.num_devices, " devices"));
  }
  if (options.topology.has_value() &&
      options.topology->num_devices() < options.num_devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.topology: describes ", options.topology->num_devices(),
        " devices, the plan has ", options.num_devices));
  }
  if (!(options.data_threshold >= 0 && options.data_threshold <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.data_threshold: must be in [0, 1], got ",
                     options.data_threshold));
  }
  if (options.max_nodes_per_stream != 0 &&
      options.max_nodes_per_stream < SplitStreamsPass::kMinTasksPerStream) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.max_nodes_per_stream: must be 0 (no limit) or at least ",
        SplitStreamsPass::kMinTasksPerStream, ", got ",
        options.max_nodes_per_stream));
  }
  if (options.max_concurrent_kernels < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.max_concurrent_kernels: must be at least 1, got ",
                     options.max_concurrent_kernels));
  }
  if (options.copy_engines_per_device < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.copy_engines_per_device: must be at least 1, got ",
        options.copy_engines_per_device));
  }
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    const int pin = graph.pin(v);
    if (pin != -1 && (pin < 0 || pin >= options.num_devices)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph.nodes[", v, "].device: device ", pin, " is outside [0, ",
          options.num_devices, ") (", options.num_devices, " devices)"));
    }
  }
  return absl::OkStatus();
}

// The cost model's simulation of the planned streams and events, by issue
// position. Borrows streams.waits for the time of the simulation.
absl::Status SimulateStreams(const Graph& graph, const Dag& dag,
                             StreamContext& streams,
                             const std::vector<PlannedCopy>& copies,
                             const Topology& topology,
                             const PlannerOptions& options,
                             ScheduleTimes* times) {
  const int n = dag.num_nodes();
  Schedule schedule;
  schedule.node = dag.order;
  // Filled in one pass, without zeroing first.
  ReserveHuge(schedule.device, n);
  ReserveHuge(schedule.stream, n);
  ReserveHuge(schedule.signal, n);
  for (const NodeId v : dag.order) {
    schedule.device.push_back(streams.device[v]);
    schedule.stream.push_back(streams.stream_of[v]);
    schedule.signal.push_back(streams.signal[v]);
  }
  if (!streams.peer_stream.empty()) {
    schedule.peer_stream.resize(n);
    schedule.peer_device.resize(n);
    for (int i = 0; i < n; ++i) {
      const int32_t t = streams.peer_stream[dag.order[i]];
      schedule.peer_stream[i] = t;
      schedule.peer_device[i] = t >= 0 ? streams.streams[t].device : -1;
    }
  }
  schedule.waits = std::move(streams.waits);
  schedule.copies = copies;
  schedule.num_streams = static_cast<int>(streams.streams.size());
  schedule.num_events = streams.num_events;
  schedule.num_devices = options.num_devices;
  SimulationOptions simulation;
  simulation.topology = &topology;
  simulation.max_concurrent_kernels = options.max_concurrent_kernels;
  simulation.copy_engines_per_device = options.copy_engines_per_device;
  const absl::Status simulated =
      SimulateSchedule(graph, schedule, simulation, times);
  streams.waits = std::move(schedule.waits);
  return simulated;
}

// A topological order that takes, among the nodes whose predecessors are
// all taken, the one with the longest path from its start to the end of
// the graph (HEFT's upward rank; ties in program order).
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

// A number in [0, 1) from (seed, v), the same on every machine.
double UnitHash(uint64_t seed, uint64_t v) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + v + 0x632be59bd9b4e5ffULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

// Reissues `dag` by estimated start (`start_us`, by NodeId), ties in the
// current order, and relabels the reachability index for it. Leaves `dag`
// as it is if that order is not topological.
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

// True when `dag` has a single topological order: each node in its order
// depends directly on the one before it. Any other walk or issue order of
// such a graph is the same order.
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

// The thread CPU clock of PlanProfile, read only when a profile is asked
// for: each read is a system call, and a job's plan of a few nodes takes
// less time than the thirty reads of a profiled plan.
class StageClock {
 public:
  explicit StageClock(PlanProfile* profile) : profile_(profile) {}
  double Now() const { return profile_ != nullptr ? ThreadSeconds() : 0; }
  // Where the stages' times go; null when nobody asked.
  PlanProfile* profile() const { return profile_; }

 private:
  PlanProfile* const profile_;
};

// LOOKAHEAD_FINISH_TIME tries a second issue order on graphs of at most
// this many nodes.
constexpr int kMaxRankedNodes = 1 << 16;
// Then, on graphs of at most kMaxSearchedNodes nodes, up to kSearchRounds
// orders by perturbed ranks (SearchOrders), as many as place at most
// kSearchNodes nodes in all: 256 on graphs of up to 128 nodes, 32 at
// 1,024, 16 at 2,048; then nodes move to other devices (ImproveByMoves),
// placing at most kMoveNodes nodes in all. Both stop once
// the plan is within kGoodEnough of the lower bound.
constexpr int kMaxSearchedNodes = 2048;
constexpr int kSearchRounds = 256;
constexpr int kSearchNodes = 32768;
constexpr int64_t kMoveNodes = 4096;
constexpr double kGoodEnough = 1.01;
// The search over orders also stops after this many rounds in a row
// without a better plan.
constexpr int kStallRounds = 64;

// One issue order of a graph, placed, with its streams and events, and
// simulated on the cost model when asked. Not thread-safe.
struct IssuePlan {
  // Places `dag_in`'s nodes (in context.walk_order, if set), reissues them
  // by estimated start if `issue_by_start`, and plans the streams.
  absl::Status Make(const Graph& graph, Dag dag_in, const CostLevels& levels,
                    const DevicePolicy& policy, const DeviceContext& context,
                    const PlannerOptions& options, const Topology& topology,
                    bool simulate, PlanProfile& profile,
                    const StageClock& clock, bool issue_by_start = false) {
    dag = std::make_unique<Dag>(std::move(dag_in));
    double start = clock.Now();
    WEFT_ASSIGN_OR_RETURN(devices, policy.Assign(graph, *dag, context));
    if (issue_by_start && !devices.start_us.empty()) {
      IssueByStart(devices.start_us, *dag);
    }
    std::vector<int> copy_sources =
        CopySourceDevices(graph, dag->order, devices.device);
    profile.devices_s += clock.Now() - start;

    start = clock.Now();
    StreamOptions stream_options;
    stream_options.mode = options.stream_mode;
    stream_options.max_streams_per_device = options.max_streams_per_device;
    stream_options.max_nodes_per_stream = options.max_nodes_per_stream;
    stream_options.record_choices = options.explain;
    streams = std::make_unique<StreamContext>(
        graph, *dag, levels, std::move(devices.device), stream_options);
    streams->peer_device = std::move(copy_sources);
    if (clock.profile() == nullptr) {
      WEFT_RETURN_IF_ERROR(RunStreamPipeline(*streams));
    } else {
      std::vector<std::pair<std::string, double>> passes;
      WEFT_RETURN_IF_ERROR(RunStreamPipeline(*streams, &passes));
      if (profile.passes_s.size() != passes.size()) {
        profile.passes_s = std::move(passes);
      } else {
        for (size_t i = 0; i < passes.size(); ++i) {
          profile.passes_s[i].second += passes[i].second;
        }
      }
    }
    if (context.eager_copies) {
      WEFT_ASSIGN_OR_RETURN(copies, PlanEagerCopies(graph, *dag, *streams));
    }
    profile.streams_s += clock.Now() - start;
    if (!simulate) return absl::OkStatus();
    start = clock.Now();
    const absl::Status simulated = Simulate(graph, topology, options);
    profile.simulation_s += clock.Now() - start;
    return simulated;
  }

  absl::Status Simulate(const Graph& graph, const Topology& topology,
                        const PlannerOptions& options) {
    return SimulateStreams(graph, *dag, *streams, copies, topology, options,
                           &times);
  }

  // Heap-held: the stream context refers to the dag.
  std::unique_ptr<Dag> dag;
  DeviceAssignment devices;  // its devices moved into `streams`
  std::unique_ptr<StreamContext> streams;
  std::vector<PlannedCopy> copies;  // eager copies, by ascending `before`
  ScheduleTimes times;
};

// Places the graph again in up to kSearchRounds orders, as many as place
// kSearchNodes nodes in all, each by the best order's priorities so far
// with every node's scaled by a factor drawn from 5% to 20% either side of
// 1 (the same on every run), keeping each plan the cost model finishes
// earlier, until one finishes by `good_enough` or kStallRounds rounds in a
// row find none better. List scheduling by exact
// ranks packs one part of a graph onto every device before the next and
// leaves gaps that a slightly different order fills; starting each
// perturbation from the best order so far climbs where independent ones
// only sample.
absl::Status SearchOrders(const Graph& graph, const CostLevels& levels,
                          const DevicePolicy& policy, DeviceContext context,
                          const PlannerOptions& options,
                          const Topology& topology, double good_enough,
                          PlanProfile& profile, const StageClock& clock,
                          IssuePlan& chosen) {
  const int n = graph.num_nodes();
  const int rounds = std::min(kSearchRounds, kSearchNodes / std::max(n, 1));
  std::vector<double> best(levels.bottom_us), key(n);
  std::vector<NodeId> order;
  int last_better = 0;
  for (int round = 1; round <= rounds; ++round) {
    if (chosen.times.makespan_us <= good_enough ||
        round - last_better > kStallRounds) {
      break;
    }
    const double amplitude = 0.05 * (1 + (round - 1) % 4);
    for (NodeId v = 0; v < n; ++v) {
      key[v] = best[v] * (1 + amplitude * (2 * UnitHash(round, v) - 1));
    }
    order = PriorityOrder(key, *chosen.dag);
    context.walk_order = &order;
    IssuePlan candidate;
    WEFT_RETURN_IF_ERROR(candidate.Make(
        graph, Dag(*chosen.dag), levels, policy, context, options, topology,
        /*simulate=*/true, profile, clock, /*issue_by_start=*/true));
    if (candidate.times.makespan_us < chosen.times.makespan_us) {
      chosen = std::move(candidate);
      best.swap(key);
      last_better = round;
    }
  }
  return absl::OkStatus();
}

// Moves nodes of `chosen` to other devices, each alone and then with each
// of its predecessors on its device (a writer and its reader, where either
// alone would add a crossing), keeping each move after which the cost
// model finishes the plan earlier (every other node stays on its device;
// the walk places them in `chosen`'s issue order and issues them by
// estimated start), until a pass over every node
// finds none, the moves have placed kMoveNodes nodes in all or the plan
// finishes by `good_enough`. List
// scheduling places a node where it finishes first as it meets it, and
// cannot see that, say, running a short kernel beside its reader saves the
// copies that a later node waits for on a busy device-to-device engine.
absl::Status ImproveByMoves(const Graph& graph, const CostLevels& levels,
                            const DevicePolicy& policy, DeviceContext context,
                            const PlannerOptions& options,
                            const Topology& topology, double good_enough,
                            PlanProfile& profile, const StageClock& clock,
                            IssuePlan& chosen) {
  const int n = graph.num_nodes();
  std::vector<int> fixed(chosen.streams->device.begin(),
                         chosen.streams->device.end());
  context.fixed_devices = &fixed;
  int64_t budget = kMoveNodes;
  bool improved = true;
  while (improved && budget >= n && chosen.times.makespan_us > good_enough) {
    improved = false;
    const std::vector<NodeId> walk = chosen.dag->order;
    context.walk_order = &walk;
    auto movable = [&](NodeId v) {
      return graph.pin(v) < 0 && !graph.has_label(v);
    };
    // Moves `group` (on one device) to device d; keeps the move if the
    // plan finishes earlier.
    std::vector<NodeId> group;
    auto try_move = [&](int d, bool& moved) -> absl::Status {
      const int home = fixed[group[0]];
      for (const NodeId u : group) fixed[u] = d;
      budget -= n;
      IssuePlan candidate;
      WEFT_RETURN_IF_ERROR(candidate.Make(graph, Dag(*chosen.dag), levels,
                                          policy, context, options, topology,
                                          /*simulate=*/true, profile, clock,
                                          /*issue_by_start=*/true));
      if (candidate.times.makespan_us < chosen.times.makespan_us) {
        chosen = std::move(candidate);
        moved = improved = true;
      } else {
        for (const NodeId u : group) fixed[u] = home;
      }
      return absl::OkStatus();
    };
    for (const NodeId v : walk) {
      if (!movable(v)) continue;
      // The node alone, then with each predecessor on its device (a
      // writer and its reader move together where either alone would add
      // a crossing).
      const std::vector<NodeId> preds(chosen.dag->Preds(v).begin(),
                                      chosen.dag->Preds(v).end());
      for (int k = -1; k < static_cast<int>(preds.size()); ++k) {
        group.assign(1, v);
        if (k >= 0) {
          if (!movable(preds[k]) || fixed[preds[k]] != fixed[v]) continue;
          group.push_back(preds[k]);
        }
        bool moved = false;
        const int home = fixed[v];
        for (int d = 0; d < options.num_devices && !moved; ++d) {
          if (d == home) continue;
          if (budget < n || chosen.times.makespan_us <= good_enough) {
            return absl::OkStatus();
          }
          WEFT_RETURN_IF_ERROR(try_move(d, moved));
        }
        if (moved) break;
      }
    }
  }
  return absl::OkStatus();
}

// Reissues `chosen` in the order its simulation starts its nodes, where
// that differs from its issue order, keeping the result if the cost model
// finishes it no later. The simulation books each unit's work in issue
// order, filling gaps left by earlier bookings: a node issued after one
// that waits long may start first. A device whose clock runs in real time
// cannot book into a gap that has passed by the time the waiting node has
// booked, so it runs such a plan later than estimated; issued by start,
// every node books before those that start after it.
absl::Status IssueBySimulatedStart(const Graph& graph, const CostLevels& levels,
                                   const DevicePolicy& policy,
                                   DeviceContext context,
                                   const PlannerOptions& options,
                                   const Topology& topology,
                                   PlanProfile& profile,
                                   const StageClock& clock, IssuePlan& chosen) {
  const std::vector<double>& start = chosen.times.start_us;
  const int n = chosen.dag->num_nodes();
  if (static_cast<int>(start.size()) != n ||
      std::is_sorted(start.begin(), start.end())) {
    return absl::OkStatus();
  }
  std::vector<double> by_node(n);
  for (int i = 0; i < n; ++i) by_node[chosen.dag->order[i]] = start[i];
  Dag dag(*chosen.dag);
  IssueByStart(by_node, dag);
  if (dag.order == chosen.dag->order) return absl::OkStatus();
  const std::vector<NodeId> walk = dag.order;
  const std::vector<int> fixed(chosen.streams->device.begin(),
                               chosen.streams->device.end());
  context.walk_order = &walk;
  context.fixed_devices = &fixed;
  IssuePlan reissued;
  WEFT_RETURN_IF_ERROR(reissued.Make(graph, std::move(dag), levels, policy,
                                     context, options, topology,
                                     /*simulate=*/true, profile, clock));
  if (reissued.times.makespan_us <= chosen.times.makespan_us) {
    chosen = std::move(reissued);
  }
  return absl::OkStatus();
}

}  // namespace

// Simulated plans of graphs up to this many nodes get memory planning by
// default (Plan.memory, Plan.buffers).
constexpr int kMaxAutoMemoryPlanNodes = 20000;

absl::StatusOr<Plan> PlanGraph(const Graph& graph,
                               const PlannerOptions& options) {
  return PlanGraph(graph, options, nullptr);
}

absl::StatusOr<Plan> PlanGraph(const Graph& graph,
                               const PlannerOptions& options,
                               PlanProfile* profile_out) {
  const StageClock clock(profile_out);
  PlanProfile ignored;
  PlanProfile& profile = profile_out != nullptr ? *profile_out : ignored;
  WEFT_RETURN_IF_ERROR(ValidateOptions(graph, options));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<DevicePolicy> policy,
                        CreateDevicePolicy(options.device_policy));

  double start = clock.Now();
  CostLevels levels;
  WEFT_ASSIGN_OR_RETURN(Dag dag, InferDependencies(graph, &levels));
  if (options.memory_order == MemoryOrderKind::kMemoryAware) {
    memory::IssueInMemoryOrder(graph, &dag);
  }
  profile.dependencies_s = clock.Now() - start;

  start = clock.Now();
  const Topology topology = options.topology.has_value()
                                ? *options.topology
                                : Topology::Default(options.num_devices);
  DeviceContext context;
  context.num_devices = options.num_devices;
  context.busy_streams = options.busy_streams;
  context.topology = &topology;
  context.data_threshold = options.data_threshold;
  context.restrict_to_parent_devices = options.restrict_to_parent_devices;
  context.max_concurrent_kernels = options.max_concurrent_kernels;
  context.copy_engines_per_device = options.copy_engines_per_device;
  // SINGLE mode keeps one stream per device: copies run on it.
  const bool eager_copies =
      options.eager_copies && options.stream_mode != StreamMode::kSingle;
  context.eager_copies = eager_copies;
  context.record_choices = options.explain;
  profile.devices_s = profile.streams_s = profile.simulation_s = 0;
  profile.bound_s = 0;
  profile.passes_s.clear();
  IssuePlan chosen;
  WEFT_RETURN_IF_ERROR(chosen.Make(
      graph, std::move(dag), levels, *policy, context, options, topology,
      /*simulate=*/options.simulate, profile, clock));
  // LOOKAHEAD_FINISH_TIME on a small graph: also places the nodes by rank
  // and issues them by their estimated start, then searches (SearchOrders,
  // ImproveByMoves) and keeps whichever plan the cost model finishes
  // first. A graph with one order (a chain, a single node) has no other to
  // try.
  double lower_bound_us = -1;  // not computed yet
  auto bound = [&] {
    if (lower_bound_us < 0) {
      LowerBoundOptions bound_options;
      bound_options.num_devices = options.num_devices;
      bound_options.topology = &topology;
      bound_options.max_concurrent_kernels = options.max_concurrent_kernels;
      bound_options.copy_engines_per_device = options.copy_engines_per_device;
      lower_bound_us =
          ComputeLowerBound(graph, *chosen.dag, bound_options).bound_us;
    }
    return lower_bound_us;
  };
  if (options.device_policy == DevicePolicyKind::kLookaheadFinishTime &&
      options.memory_order != MemoryOrderKind::kMemoryAware &&
      graph.num_nodes() <= kMaxRankedNodes && !HasOneOrder(*chosen.dag)) {
    if (!options.simulate) {
      start = clock.Now();
      WEFT_RETURN_IF_ERROR(chosen.Simulate(graph, topology, options));
      profile.simulation_s += clock.Now() - start;
    }
    const std::vector<NodeId> walk = RankOrder(levels, *chosen.dag);
    context.walk_order = &walk;
    IssuePlan ranked;
    WEFT_RETURN_IF_ERROR(ranked.Make(graph, Dag(*chosen.dag), levels, *policy,
                                     context, options, topology,
                                     /*simulate=*/true, profile, clock,
                                     /*issue_by_start=*/true));
    if (ranked.times.makespan_us < chosen.times.makespan_us) {
      chosen = std::move(ranked);
    }
    const int n = graph.num_nodes();
    if (n <= kMaxSearchedNodes) {
      // The bound the search stops at: a graph's bound does not depend on
      // its issue order.
      start = clock.Now();
      const double good_enough = kGoodEnough * bound();
      profile.bound_s += clock.Now() - start;
      WEFT_RETURN_IF_ERROR(SearchOrders(graph, levels, *policy, context,
                                        options, topology, good_enough, profile,
                                        clock, chosen));
      if (options.num_devices > 1) {
        WEFT_RETURN_IF_ERROR(ImproveByMoves(graph, levels, *policy, context,
                                            options, topology, good_enough,
                                            profile, clock, chosen));
      }
    }
    WEFT_RETURN_IF_ERROR(IssueBySimulatedStart(graph, levels, *policy, context,
                                               options, topology, profile,
                                               clock, chosen));
  }
  Dag& dag_out = *chosen.dag;
  StreamContext& streams = *chosen.streams;
  ScheduleTimes& times = chosen.times;
  const int n = dag_out.num_nodes();

  // The plan, in one pass.
  start = clock.Now();
  Plan plan;
  plan.num_devices = options.num_devices;
  plan.num_events = streams.num_events;
  // A job plan may have been simulated to choose its issue order; it
  // still reports no estimate (PlannerOptions::simulate).
  plan.estimated_makespan_us = options.simulate ? times.makespan_us : 0;
  plan.critical_path_us = levels.critical_path_us;
  if (options.simulate) {
    plan.lower_bound_us = bound();
  }
  plan.streams.reserve(streams.streams.size());
  for (size_t s = 0; s < streams.streams.size(); ++s) {
    const LogicalStream& ls = streams.streams[s];
    PlannedStream ps;
    ps.id = static_cast<int>(s);
    ps.device = ls.device;
    ps.label = ls.label;
    ps.engine = ls.engine;
    plan.streams.push_back(std::move(ps));
  }
  // Written once, in order, into storage advised for huge pages. The
  // lists move over whole when issue order is node order (no `after` edge
  // points forward), and are gathered row by row otherwise.
  ReserveHuge(plan.nodes, n);
  const bool has_peers = !streams.peer_stream.empty();
  for (int i = 0; i < n; ++i) {
    const NodeId v = dag_out.order[i];
    plan.nodes.push_back({v, streams.device[v], streams.stream_of[v],
                          streams.signal[v],
                          has_peers ? streams.peer_stream[v] : -1});
  }
  plan.waits = std::move(streams.waits);
  plan.copies = std::move(chosen.copies);
  bool in_node_order = true;
  for (int i = 0; i < n && in_node_order; ++i) {
    in_node_order = dag_out.order[i] == i;
  }
  if (in_node_order) {
    plan.deps = std::move(dag_out.preds);
  } else {
    ReserveHuge(plan.deps.offsets, n + 1);
    ReserveHuge(plan.deps.items, dag_out.preds.items.size());
    for (const NodeId v : dag_out.order) {
      plan.deps.AppendRow(dag_out.Preds(v));
    }
  }
  if (options.simulate) {
    ReserveHuge(plan.estimates, n);
    for (int i = 0; i < n; ++i) {
      const double begin = times.start_us[i];
      plan.estimates.push_back({begin, begin + graph.cost_us(dag_out.order[i]),
                                times.transfer_us[i]});
    }
  }
  if (options.explain) {
    plan.reasons.resize(n);
    for (int i = 0; i < n; ++i) {
      const PlannedNode& pn = plan.nodes[i];
      const NodeId v = pn.node;
      std::string& reason = plan.reasons[i];
      reason.reserve(128);
      AppendDeviceReason(graph, pn, chosen.devices.choice[v], options, &reason);
      reason.append("; ");
      AppendStreamReason(graph, pn, streams.streams[pn.stream],
                         streams.choice[v], options, &reason);
      if (pn.peer_stream >= 0) {
        absl::StrAppend(&reason, "; peer copy stream ", pn.peer_stream,
                        " on device ", plan.streams[pn.peer_stream].device,
                        " (its input is up to date there)");
      }
    }
  }
  profile.explain_s = clock.Now() - start;

  // Memory: arenas for plans that are simulated (not yet for job plans);
  // on large graphs only when the options ask about memory, since it costs
  // far more than the rest of the plan there.
  start = clock.Now();
  const std::vector<memory::DeviceBudget> budgets =
      memory::DeviceBudgets(options.memory_budget_bytes,
                            options.device_memory_bytes, options.num_devices);
  WEFT_RETURN_IF_ERROR(memory::CheckNodeBudgets(graph, plan, budgets));
  if (options.plan_memory ||
      (options.simulate &&
       (graph.num_nodes() <= kMaxAutoMemoryPlanNodes ||
        options.memory_order == MemoryOrderKind::kMemoryAware ||
        !options.memory_budget_bytes.empty())) ||
      (options.plan_memory_over_budget &&
       memory::ExceedsBudgetsWithoutReuse(graph, plan, budgets))) {
    memory::MemoryPlanOptions memory_options;
    memory_options.budget_bytes = options.memory_budget_bytes;
    memory_options.device_memory_bytes = options.device_memory_bytes;
    WEFT_RETURN_IF_ERROR(memory::PlanMemory(graph, memory_options, &plan));
    if (options.fit_memory) {
      WEFT_RETURN_IF_ERROR(FitMemoryBudgets(graph, options, &plan));
    }
  }
  profile.memory_s = clock.Now() - start;
  // Control nodes' bodies: each planned once, with the same options.
  if (graph.has_control()) {
    plan.bodies.resize(graph.num_nodes());
    for (const PlannedNode& pn : plan.nodes) {
      const NodeSpec& node = graph.node(pn.node);
      if (node.control == nullptr) continue;
      for (const std::shared_ptr<const Graph>& body : node.control->bodies) {
        WEFT_ASSIGN_OR_RETURN(Plan body_plan,
                              PlanBody(*body, options, pn.device));
        plan.bodies[pn.node].push_back(
            std::make_shared<const Plan>(std::move(body_plan)));
      }
    }
  }
  return plan;
}

absl::StatusOr<Plan> PlanBody(const Graph& body,
                              const PlannerOptions& body_options, int device) {
  // A body's buffers keep allocations of their own (the enclosing plan
  // does not move them): nothing to fit.
  PlannerOptions options = body_options;
  options.fit_memory = false;
  bool pinned = false;
  for (NodeId v = 0; v < body.num_nodes() && !pinned; ++v) {
    pinned = body.pin(v) >= 0;
  }
  if (!options.bodies_on_one_device || pinned || options.num_devices == 1) {
    return PlanGraph(body, options);
  }
  // Planned as for a machine of one device, then moved onto `device`.
  PlannerOptions one = options;
  one.num_devices = 1;
  one.topology.reset();
  one.busy_streams.clear();
  if (static_cast<size_t>(device) < options.busy_streams.size()) {
    one.busy_streams.push_back(options.busy_streams[device]);
  }
  one.memory_budget_bytes.clear();
  if (static_cast<size_t>(device) < options.memory_budget_bytes.size()) {
    one.memory_budget_bytes.push_back(options.memory_budget_bytes[device]);
  }
  one.device_memory_bytes.clear();
  if (static_cast<size_t>(device) < options.device_memory_bytes.size()) {
    one.device_memory_bytes.push_back(options.device_memory_bytes[device]);
  }
  WEFT_ASSIGN_OR_RETURN(Plan plan, PlanGraph(body, one));
  plan.num_devices = options.num_devices;
  for (PlannedNode& pn : plan.nodes) pn.device = device;
  for (PlannedStream& ps : plan.streams) ps.device = device;
  for (DeviceMemory& m : plan.memory) m.device = device;
  for (PlannedBuffer& b : plan.buffers) b.device = device;
  return plan;
}

}  // namespace weft::scheduler
