#include "scheduler/plan_search.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "scheduler/huge_pages.h"
#include "scheduler/issue_orders.h"
#include "scheduler/passes/stream_pipeline.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler {
namespace {

// LOOKAHEAD_FINISH_TIME tries a second issue order on graphs of at most
// this many nodes.
constexpr int kMaxRankedNodes = 1 << 16;
// Then, on graphs of at most kMaxSearchedNodes nodes, up to kSearchRounds
// orders by perturbed ranks (SearchOrders), as many as place at most
// kSearchNodes nodes in all: 1,024 on graphs of up to 32 nodes, 256 at
// 128, 32 at 1,024, 16 at 2,048; then nodes move to other devices
// (ImproveByMoves), placing at most kMoveNodes nodes in all. Both stop once the
// plan is within kGoodEnough of the lower bound.
constexpr int kMaxSearchedNodes = 2048;
constexpr int kSearchRounds = 1024;
constexpr int kSearchNodes = 32768;
// A plan still above kGoodEnough of the bound is searched for again
// without eager copies, with a quarter of the budget for orders.
constexpr int kLazySearchShare = 4;
constexpr int kMaxLazySearchNodes = 128;
constexpr int64_t kMoveNodes = 4096;
constexpr double kGoodEnough = 1.01;
// The search over orders also stops after this many rounds in a row
// without a better plan, once its plan is within kCloseEnough of the
// bound (further from it, the whole budget is spent).
constexpr int kStallRounds = 64;
constexpr double kCloseEnough = 1.05;

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

// Whether some buffer comes with data from the host.
bool UsesHostData(const Graph& graph) {
  for (BufferId b = 0; b < graph.num_buffers(); ++b) {
    if (graph.has_initial_data(b)) return true;
  }
  return false;
}

// A number in [0, 1) from (seed, v), the same on every machine.
double UnitHash(uint64_t seed, uint64_t v) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + v + 0x632be59bd9b4e5ffULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

}  // namespace

absl::Status IssuePlan::Make(
    const Graph& graph, Dag dag_in, const CostLevels& levels,
    const DevicePolicy& policy, const DeviceContext& context,
    const PlannerOptions& options, const Topology& topology, bool simulate,
    PlanProfile& profile, const StageClock& clock, bool issue_by_start) {
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
  // No later stage reads the passes' vector clocks (the largest array of
  // a plan): freed now, their pages take the eager copies and the plan.
  streams->clocks = ClockArena();
  streams->clock_of = std::vector<int32_t>();
  if (context.eager_copies) {
    WEFT_ASSIGN_OR_RETURN(
        copies,
        PlanEagerCopies(graph, *dag, *streams, context.bodies_on_one_device));
  }
  profile.streams_s += clock.Now() - start;
  if (!simulate) return absl::OkStatus();
  start = clock.Now();
  const absl::Status simulated = Simulate(graph, topology, options);
  profile.simulation_s += clock.Now() - start;
  return simulated;
}

absl::Status IssuePlan::Simulate(const Graph& graph, const Topology& topology,
                                 const PlannerOptions& options) {
  return SimulateStreams(graph, *dag, *streams, copies, topology, options,
                         &times);
}

PlanSearch::PlanSearch(const Graph& graph, const CostLevels& levels,
                       const DevicePolicy& policy, const DeviceContext& context,
                       const PlannerOptions& options, const Topology& topology,
                       PlanProfile& profile, const StageClock& clock)
    : graph_(graph),
      levels_(levels),
      policy_(policy),
      context_(context),
      options_(options),
      topology_(topology),
      profile_(profile),
      clock_(clock) {}

bool PlanSearch::Applies(const PlannerOptions& options, const Dag& dag) {
  return options.device_policy == DevicePolicyKind::kLookaheadFinishTime &&
         options.memory_order != MemoryOrderKind::kMemoryAware &&
         dag.num_nodes() <= kMaxRankedNodes && !HasOneOrder(dag);
}

absl::Status PlanSearch::Run(absl::FunctionRef<double()> lower_bound_us,
                             IssuePlan& chosen) {
  if (!options_.simulate) {
    const double start = clock_.Now();
    WEFT_RETURN_IF_ERROR(chosen.Simulate(graph_, topology_, options_));
    profile_.simulation_s += clock_.Now() - start;
  }
  // By rank, issued by estimated start.
  const std::vector<NodeId> walk = RankOrder(levels_, *chosen.dag);
  DeviceContext context = context_;
  context.walk_order = &walk;
  IssuePlan ranked;
  WEFT_RETURN_IF_ERROR(
      Place(Dag(*chosen.dag), context, /*issue_by_start=*/true, ranked));
  if (ranked.times.makespan_us < chosen.times.makespan_us) {
    chosen = std::move(ranked);
  }
  if (graph_.num_nodes() > kMaxSearchedNodes) {
    return IssueBySimulatedStart(context_, chosen);
  }
  const double start = clock_.Now();
  const double bound = lower_bound_us();
  const double good_enough = kGoodEnough * bound;
  profile_.bound_s += clock_.Now() - start;
  // The search from `plan`, placing nodes as `base` says, with 1 /
  // `budget_share` of the budget for orders.
  auto search = [&](const DeviceContext& base, int budget_share,
                    IssuePlan& plan) {
    WEFT_RETURN_IF_ERROR(SearchOrders(base, good_enough, kCloseEnough * bound,
                                      budget_share, plan));
    if (options_.num_devices > 1) {
      WEFT_RETURN_IF_ERROR(ImproveByMoves(base, good_enough, plan));
    }
    return IssueBySimulatedStart(base, plan);
  };
  // Uploads queued by earliest start, placed by that walk.
  if (chosen.times.makespan_us > good_enough && UsesHostData(graph_)) {
    const std::vector<NodeId> by_start =
        EarliestStartOrder(graph_, *chosen.dag, chosen.streams->device, levels_,
                           topology_, options_.num_devices);
    DeviceContext early = context_;
    early.walk_order = &by_start;
    IssuePlan other;
    WEFT_RETURN_IF_ERROR(
        Place(Dag(*chosen.dag), early, /*issue_by_start=*/true, other));
    if (other.times.makespan_us < chosen.times.makespan_us) {
      chosen = std::move(other);
    }
  }
  WEFT_RETURN_IF_ERROR(search(context_, 1, chosen));
  // Still short of the bound: the same search with each copy between
  // devices made on its reader's stream once the reader's inputs are
  // ready. Eager copies start data moving at once but take the copy
  // engine in the order their writers end, which can hold back a copy
  // that a node on the critical path waits for.
  if (options_.num_devices > 1 && context_.eager_copies &&
      graph_.num_nodes() <= kMaxLazySearchNodes &&
      chosen.times.makespan_us > good_enough) {
    DeviceContext lazy = context_;
    lazy.eager_copies = false;
    lazy.walk_order = &walk;
    IssuePlan other;
    WEFT_RETURN_IF_ERROR(
        Place(Dag(*chosen.dag), lazy, /*issue_by_start=*/true, other));
    lazy.walk_order = nullptr;
    WEFT_RETURN_IF_ERROR(search(lazy, kLazySearchShare, other));
    if (other.times.makespan_us < chosen.times.makespan_us) {
      chosen = std::move(other);
    }
  }
  return absl::OkStatus();
}

absl::Status PlanSearch::Place(Dag dag, const DeviceContext& context,
                               bool issue_by_start, IssuePlan& out) const {
  return out.Make(graph_, std::move(dag), levels_, policy_, context, options_,
                  topology_, /*simulate=*/true, profile_, clock_,
                  issue_by_start);
}

// Places the graph again in up to kSearchRounds / budget_share orders, as
// many as place kSearchNodes / budget_share nodes in all, each by the best
// order's priorities so far with every node's scaled by a factor drawn from 5%
// to 20% either side of 1 (the same on every run), keeping each plan the cost
// model finishes earlier, until one finishes by `good_enough` or, once the best
// finishes by `close_enough`, kStallRounds rounds in a row find none better.
// List scheduling by exact ranks packs one part of a graph onto every device
// before the next and leaves gaps that a slightly different order fills;
// starting each perturbation from the best order so far climbs where
// independent ones only sample.
absl::Status PlanSearch::SearchOrders(const DeviceContext& base,
                                      double good_enough, double close_enough,
                                      int budget_share,
                                      IssuePlan& chosen) const {
  const int n = graph_.num_nodes();
  const int rounds = std::min(kSearchRounds / budget_share,
                              kSearchNodes / budget_share / std::max(n, 1));
  std::vector<double> best(levels_.bottom_us), key(n);
  std::vector<NodeId> order;
  DeviceContext context = base;
  context.walk_order = &order;
  int last_better = 0;
  // The orders placed since the chosen plan last changed: placing one
  // again from the same plan gives the same candidate (a chain has a
  // single order, a narrow graph few), so it is not placed.
  absl::flat_hash_set<std::vector<NodeId>> tried;
  for (int round = 1; round <= rounds; ++round) {
    if (chosen.times.makespan_us <= good_enough ||
        (round - last_better > kStallRounds &&
         chosen.times.makespan_us <= close_enough)) {
      break;
    }
    const double amplitude = 0.05 * (1 + (round - 1) % 4);
    for (NodeId v = 0; v < n; ++v) {
      key[v] = best[v] * (1 + amplitude * (2 * UnitHash(round, v) - 1));
    }
    order = PriorityOrder(key, *chosen.dag);
    if (!tried.insert(order).second) continue;
    ++profile_.orders_placed;
    IssuePlan candidate;
    WEFT_RETURN_IF_ERROR(
        Place(Dag(*chosen.dag), context, /*issue_by_start=*/true, candidate));
    if (candidate.times.makespan_us < chosen.times.makespan_us) {
      chosen = std::move(candidate);
      best.swap(key);
      last_better = round;
      tried.clear();
    }
  }
  return absl::OkStatus();
}

// Moves nodes of `chosen` to other devices, each alone and then with each
// of its predecessors on its device (a writer and its reader, where either
// alone would add a crossing), or, where none of those finishes earlier,
// swaps it with the node of another device nearest to it in issue order
// (neither its predecessor nor its successor), keeping each move after
// which the cost model finishes the plan earlier (every other node stays
// on its device; the walk places them in `chosen`'s issue order and issues
// them by estimated start), until a pass over every node finds none, the
// moves have placed kMoveNodes nodes in all or the plan finishes by
// `good_enough`. A swap keeps both devices' load where a move alone would
// pile work on one. List scheduling places a node where it finishes first as
// it meets it, and cannot see that, say, running a short kernel beside its
// reader saves the copies that a later node waits for on a busy
// device-to-device engine.
absl::Status PlanSearch::ImproveByMoves(const DeviceContext& base,
                                        double good_enough,
                                        IssuePlan& chosen) const {
  const int n = graph_.num_nodes();
  std::vector<int> fixed(chosen.streams->device.begin(),
                         chosen.streams->device.end());
  std::vector<NodeId> walk;
  DeviceContext context = base;
  context.fixed_devices = &fixed;
  context.walk_order = &walk;
  auto movable = [&](NodeId v) {
    return graph_.pin(v) < 0 && !graph_.has_label(v);
  };
  int64_t budget = kMoveNodes;
  bool improved = true;
  // Puts each node of `to` on its device; keeps that if the plan finishes
  // earlier, else puts them back.
  std::vector<std::pair<NodeId, int>> to, from;
  auto try_assign = [&](bool& moved) -> absl::Status {
    from.clear();
    for (const auto& [u, d] : to) {
      from.emplace_back(u, fixed[u]);
      fixed[u] = d;
    }
    budget -= n;
    IssuePlan candidate;
    WEFT_RETURN_IF_ERROR(
        Place(Dag(*chosen.dag), context, /*issue_by_start=*/true, candidate));
    if (candidate.times.makespan_us < chosen.times.makespan_us) {
      chosen = std::move(candidate);
      moved = improved = true;
    } else {
      for (const auto& [u, d] : from) fixed[u] = d;
    }
    return absl::OkStatus();
  };
  auto out_of_budget = [&] {
    return budget < n || chosen.times.makespan_us <= good_enough;
  };
  std::vector<int32_t> pos(n);  // issue positions as the pass began
  while (improved && budget >= n && chosen.times.makespan_us > good_enough) {
    improved = false;
    walk = chosen.dag->order;
    for (int i = 0; i < n; ++i) pos[walk[i]] = i;
    for (const NodeId v : walk) {
      if (!movable(v)) continue;
      const int home = fixed[v];
      // The node alone, then with each predecessor on its device.
      // Copies: a kept move replaces chosen's DAG.
      const std::vector<NodeId> preds(chosen.dag->Preds(v).begin(),
                                      chosen.dag->Preds(v).end());
      const std::vector<NodeId> succs(chosen.dag->Succs(v).begin(),
                                      chosen.dag->Succs(v).end());
      bool moved = false;
      for (int k = -1; k < static_cast<int>(preds.size()) && !moved; ++k) {
        if (k >= 0 && (!movable(preds[k]) || fixed[preds[k]] != home)) {
          continue;
        }
        for (int d = 0; d < options_.num_devices && !moved; ++d) {
          if (d == home) continue;
          if (out_of_budget()) return absl::OkStatus();
          to.assign(1, {v, d});
          if (k >= 0) to.emplace_back(preds[k], d);
          WEFT_RETURN_IF_ERROR(try_assign(moved));
        }
      }
      // Nothing moved: v swaps devices with the node of each other device
      // nearest to it in issue order, neither its predecessor nor its
      // successor.
      for (int d = 0; d < options_.num_devices && !moved; ++d) {
        if (d == home) continue;
        NodeId partner = -1;
        int nearest = n + 1;
        for (NodeId u = 0; u < n; ++u) {
          if (fixed[u] != d || !movable(u) ||
              std::find(preds.begin(), preds.end(), u) != preds.end() ||
              std::find(succs.begin(), succs.end(), u) != succs.end()) {
            continue;
          }
          if (std::abs(pos[u] - pos[v]) < nearest) {
            nearest = std::abs(pos[u] - pos[v]);
            partner = u;
          }
        }
        if (partner < 0) continue;
        if (out_of_budget()) return absl::OkStatus();
        to = {{v, d}, {partner, home}};
        WEFT_RETURN_IF_ERROR(try_assign(moved));
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
absl::Status PlanSearch::IssueBySimulatedStart(const DeviceContext& base,
                                               IssuePlan& chosen) const {
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
  DeviceContext context = base;
  context.walk_order = &walk;
  context.fixed_devices = &fixed;
  IssuePlan reissued;
  WEFT_RETURN_IF_ERROR(
      Place(std::move(dag), context, /*issue_by_start=*/false, reissued));
  if (reissued.times.makespan_us <= chosen.times.makespan_us) {
    chosen = std::move(reissued);
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
