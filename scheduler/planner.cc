#include "scheduler/planner.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
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
#include "scheduler/plan_search.h"
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

// The memory planner's options for a plan made with `options`.
memory::MemoryPlanOptions MemoryOptionsOf(const PlannerOptions& options) {
  memory::MemoryPlanOptions memory_options;
  memory_options.budget_bytes = options.memory_budget_bytes;
  memory_options.device_memory_bytes = options.device_memory_bytes;
  memory_options.improve_rounds = options.arena_improve_rounds;
  return memory_options;
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
  context.bodies_on_one_device = options.bodies_on_one_device;
  context.record_choices = options.explain;
  profile.devices_s = profile.streams_s = profile.simulation_s = 0;
  profile.bound_s = 0;
  profile.passes_s.clear();
  IssuePlan chosen;
  WEFT_RETURN_IF_ERROR(chosen.Make(
      graph, std::move(dag), levels, *policy, context, options, topology,
      /*simulate=*/options.simulate, profile, clock));
  // The lower bound, once: a graph's bound does not depend on its issue
  // order.
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
  if (PlanSearch::Applies(options, *chosen.dag)) {
    PlanSearch search(graph, levels, *policy, context, options, topology,
                      profile, clock);
    WEFT_RETURN_IF_ERROR(search.Run(bound, chosen));
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
    memory::MemoryPlanOptions memory_options = MemoryOptionsOf(options);
    std::vector<int64_t> unimproved;
    WEFT_RETURN_IF_ERROR(
        memory::PlanMemory(graph, memory_options, &plan, &unimproved));
    const bool over_budget = std::any_of(
        plan.memory.begin(), plan.memory.end(), [](const DeviceMemory& m) {
          return m.budget_bytes > 0 && m.arena_bytes > m.budget_bytes;
        });
    if (options.fit_memory && over_budget) {
      // Spill fitting decides on arenas placed without re-placement
      // rounds, as its candidates are (rounds only shrink an arena, so
      // this one is over budget too); the plan it keeps gets them after.
      // It reads no more of this plan's memory than the arenas' sizes.
      for (size_t d = 0; d < plan.memory.size(); ++d) {
        plan.memory[d].arena_bytes = unimproved[d];
      }
      WEFT_RETURN_IF_ERROR(FitMemoryBudgets(graph, options, &plan));
      if (options.arena_improve_rounds > 0) {
        memory_options.improve_rounds = options.arena_improve_rounds;
        WEFT_RETURN_IF_ERROR(memory::ImproveMemoryPlan(
            plan.graph != nullptr ? *plan.graph : graph, memory_options,
            &plan));
      }
    }
  }
  profile.memory_s = clock.Now() - start;
  // Control nodes' bodies: each planned once, with the same options, by
  // the node ids of the graph planned. A plan spill fitting made has them
  // already (it plans its graphs, Plan::graph, as any other).
  if (graph.has_control() && plan.bodies.empty()) {
    const Graph& planned = plan.graph != nullptr ? *plan.graph : graph;
    plan.bodies.resize(planned.num_nodes());
    for (const PlannedNode& pn : plan.nodes) {
      const NodeSpec& node = planned.node(pn.node);
      if (node.control == nullptr) continue;
      for (const std::shared_ptr<const Graph>& body : node.control->bodies) {
        WEFT_ASSIGN_OR_RETURN(Plan body_plan,
                              PlanBody(*body, options, pn.device));
        plan.bodies[pn.node].push_back(
            std::make_shared<const Plan>(std::move(body_plan)));
      }
    }
    // Bodies that run on other devices use the job's buffers there: with
    // the bodies' plans known, the arenas take those copies too (memory
    // planned again). A plan spill fitting made has its bodies already, and
    // its arenas hold those copies (its graphs are planned by this
    // function).
    if (!plan.memory.empty() && plan.graph == nullptr) {
      const std::vector<uint64_t> beyond = memory::BodyBytesBeyondPlan(
          graph, plan, std::max(options.num_devices, 1));
      if (std::any_of(beyond.begin(), beyond.end(),
                      [](uint64_t bytes) { return bytes > 0; })) {
        start = clock.Now();
        WEFT_RETURN_IF_ERROR(
            memory::PlanMemory(graph, MemoryOptionsOf(options), &plan));
        profile.memory_s += clock.Now() - start;
      }
    }
  }
  return plan;
}

namespace {

// Puts every node, stream, arena and placed buffer of `plan` (a plan for
// one device), and of its bodies' plans at any depth, on `device` of a
// machine of `num_devices`, and says so in the reasons.
void MoveOntoDevice(Plan& plan, int device, int num_devices) {
  plan.num_devices = num_devices;
  for (PlannedNode& pn : plan.nodes) pn.device = device;
  for (PlannedStream& ps : plan.streams) ps.device = device;
  for (PlannedCopy& copy : plan.copies) copy.device = device;
  for (DeviceMemory& m : plan.memory) m.device = device;
  for (PlannedBuffer& b : plan.buffers) b.device = device;
  // "device 0 (why); stream reason on device 0" becomes "device D
  // (planned as for one device); stream reason on device D".
  const std::string on = absl::StrCat(" on device ", device);
  for (std::string& reason : plan.reasons) {
    const size_t end = reason.find("; ");
    std::string rest = end == std::string::npos ? "" : reason.substr(end);
    reason = absl::StrCat("device ", device, " (planned as for one device)",
                          absl::StrReplaceAll(rest, {{" on device 0", on}}));
  }
  for (std::vector<std::shared_ptr<const Plan>>& bodies : plan.bodies) {
    for (std::shared_ptr<const Plan>& body : bodies) {
      Plan moved = *body;
      MoveOntoDevice(moved, device, num_devices);
      body = std::make_shared<const Plan>(std::move(moved));
    }
  }
}

// `graph` planned with `options` as for a machine of one device (that
// device's busy streams, budget and memory), then moved onto `device`,
// bodies' plans at any depth included. INVALID_ARGUMENT for a device out
// of range.
absl::StatusOr<Plan> PlanOnOneDevice(const Graph& graph,
                                     const PlannerOptions& options,
                                     int device) {
  if (device < 0 || device >= std::max(options.num_devices, 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", device, " is not one of the ",
                     options.num_devices, " devices planned for"));
  }
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
  WEFT_ASSIGN_OR_RETURN(Plan plan, PlanGraph(graph, one));
  MoveOntoDevice(plan, device, std::max(options.num_devices, 1));
  return plan;
}

}  // namespace

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
  return PlanOnOneDevice(body, options, device);
}

}  // namespace weft::scheduler
