#include "scheduler/planner.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/cost_model.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/device_policy.h"
#include "scheduler/status_macros.h"
#include "scheduler/stream_assignment.h"

namespace weft::scheduler {
namespace {

absl::Status ValidateOptions(const Graph& graph,
                             const PlannerOptions& options) {
  if (options.num_devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.num_devices: need at least one device, got ",
                     options.num_devices));
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
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    const auto& pin = graph.node(v).device;
    if (pin.has_value() && (*pin < 0 || *pin >= options.num_devices)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph.nodes[", v, "].device: device ", *pin, " is outside [0, ",
          options.num_devices, ") (", options.num_devices, " devices)"));
    }
  }
  return absl::OkStatus();
}

std::string Quoted(const Graph& graph, NodeId v) {
  return absl::StrCat("'", graph.node(v).name, "'");
}

std::string DeviceReason(const Graph& graph, const PlannedNode& pn,
                         const DeviceChoice& choice) {
  switch (choice.why) {
    case DeviceChoice::Why::kPinned:
      return absl::StrCat("device ", pn.device, " (pinned)");
    case DeviceChoice::Why::kLabel:
      return absl::StrCat(
          "device ", pn.device, " (label '", graph.node(pn.node).stream_label,
          "' is on the device of ", Quoted(graph, choice.related), ")");
    case DeviceChoice::Why::kRoundRobin:
      return absl::StrCat("device ", pn.device, " (round robin)");
  }
  return absl::StrCat("device ", pn.device);
}

std::string StreamReason(const Graph& graph, const Plan& plan,
                         const PlannedNode& pn, const StreamChoice& choice,
                         int max_streams) {
  const PlannedStream& stream = plan.streams[pn.stream];
  const std::string kind =
      stream.engine == Engine::kCompute
          ? std::string("stream")
          : absl::StrCat(EngineName(stream.engine), " stream");
  switch (choice.why) {
    case StreamChoice::Why::kSingle:
      return absl::StrCat("stream ", pn.stream,
                          " (single-stream mode: one stream per device)");
    case StreamChoice::Why::kLabel:
      return absl::StrCat(kind, " ", pn.stream, " (stream label '",
                          stream.label, "')");
    case StreamChoice::Why::kChain:
      return absl::StrCat(kind, " ", pn.stream, " continues after ",
                          Quoted(graph, choice.related),
                          " (its highest-ranked successor)");
    case StreamChoice::Why::kRecycled:
      return absl::StrCat(kind, " ", pn.stream, " recycled (its last node ",
                          Quoted(graph, choice.related), " is an ancestor)");
    case StreamChoice::Why::kNew:
      return absl::StrCat("new ", kind, " ", pn.stream,
                          " (no recyclable stream on device ", pn.device, ")");
    case StreamChoice::Why::kSoftCap:
      return absl::StrCat(
          kind, " ", pn.stream, " shared at the cap of ", max_streams,
          " streams per device (",
          choice.related < 0
              ? std::string("idle until then")
              : absl::StrCat("after ", Quoted(graph, choice.related),
                             ", expected to finish first"),
          ")");
  }
  return absl::StrCat(kind, " ", pn.stream);
}

}  // namespace

absl::StatusOr<Plan> PlanGraph(const Graph& graph,
                               const PlannerOptions& options) {
  WEFT_RETURN_IF_ERROR(ValidateOptions(graph, options));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<DevicePolicy> policy,
                        CreateDevicePolicy(options.device_policy));
  WEFT_ASSIGN_OR_RETURN(Dag dag, InferDependencies(graph));

  DeviceContext context;
  context.num_devices = options.num_devices;
  context.busy_streams = options.busy_streams;
  WEFT_ASSIGN_OR_RETURN(DeviceAssignment devices,
                        policy->Assign(graph, dag, context));
  const CostLevels levels = ComputeCostLevels(graph, dag);

  Plan plan;
  plan.num_devices = options.num_devices;
  plan.nodes.resize(dag.num_nodes());
  for (int i = 0; i < dag.num_nodes(); ++i) {
    PlannedNode& pn = plan.nodes[i];
    pn.node = dag.order[i];
    pn.device = devices.device[pn.node];
    auto deps = dag.Preds(pn.node);
    pn.deps.assign(deps.begin(), deps.end());
  }
  StreamOptions stream_options;
  stream_options.mode = options.stream_mode;
  stream_options.max_streams_per_device = options.max_streams_per_device;
  WEFT_ASSIGN_OR_RETURN(
      std::vector<StreamChoice> streams,
      AssignStreams(graph, dag, levels, stream_options, &plan));
  WEFT_RETURN_IF_ERROR(SimulatePlan(graph, &plan));
  plan.critical_path_us = levels.critical_path_us;
  plan.lower_bound_us = LowerBound(levels, options.num_devices);

  for (PlannedNode& pn : plan.nodes) {
    pn.reason =
        absl::StrCat(DeviceReason(graph, pn, devices.choice[pn.node]), "; ",
                     StreamReason(graph, plan, pn, streams[pn.node],
                                  options.max_streams_per_device));
  }
  return plan;
}

absl::StatusOr<PlannerOptions> PlannerOptionsFromProto(
    const weft::v1::ScheduleOptions& proto, int num_devices,
    int default_max_streams_per_device) {
  PlannerOptions options;
  if (num_devices < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_devices: need at least one device, got ", num_devices));
  }
  options.num_devices = num_devices;
  switch (proto.device_policy()) {
    case weft::v1::ROUND_ROBIN:
      options.device_policy = DevicePolicyKind::kRoundRobin;
      break;
    case weft::v1::STREAM_AWARE:
      options.device_policy = DevicePolicyKind::kStreamAware;
      break;
    case weft::v1::MIN_TRANSFER_SIZE:
      options.device_policy = DevicePolicyKind::kMinTransferSize;
      break;
    case weft::v1::MINMIN_TRANSFER_TIME:
      options.device_policy = DevicePolicyKind::kMinMinTransferTime;
      break;
    case weft::v1::MINMAX_TRANSFER_TIME:
      options.device_policy = DevicePolicyKind::kMinMaxTransferTime;
      break;
    case weft::v1::MIN_FINISH_TIME:
      options.device_policy = DevicePolicyKind::kMinFinishTime;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("options.device_policy: unknown device policy ",
                       static_cast<int>(proto.device_policy())));
  }
  switch (proto.stream_mode()) {
    case weft::v1::MULTI:
      options.stream_mode = StreamMode::kMulti;
      break;
    case weft::v1::SINGLE:
      options.stream_mode = StreamMode::kSingle;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("options.stream_mode: unknown stream mode ",
                       static_cast<int>(proto.stream_mode())));
  }
  if (proto.max_streams_per_device() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.max_streams_per_device: must not be negative, got ",
        proto.max_streams_per_device()));
  }
  options.max_streams_per_device = proto.max_streams_per_device() == 0
                                       ? default_max_streams_per_device
                                       : proto.max_streams_per_device();
  if (options.max_streams_per_device < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.max_streams_per_device: the default must be at least 1, "
        "got ",
        options.max_streams_per_device));
  }
  return options;
}

weft::v1::Plan PlanToProto(const Graph& graph, const Plan& plan) {
  weft::v1::Plan proto;
  proto.mutable_nodes()->Reserve(static_cast<int>(plan.nodes.size()));
  for (const PlannedNode& pn : plan.nodes) {
    weft::v1::PlannedNode* out = proto.add_nodes();
    out->set_name(graph.node(pn.node).name);
    out->set_device(pn.device);
    out->set_stream(pn.stream);
    for (NodeId d : pn.deps) out->add_deps(graph.node(d).name);
    for (int e : pn.wait_events) out->add_wait_events(e);
    out->set_signal_event(pn.signal_event);
    out->set_reason(pn.reason);
    out->set_estimated_start_us(pn.estimated_start_us);
    out->set_estimated_end_us(pn.estimated_end_us);
  }
  for (const PlannedStream& ps : plan.streams) {
    weft::v1::PlannedStream* out = proto.add_streams();
    out->set_id(ps.id);
    out->set_device(ps.device);
    out->set_label(ps.label);
    switch (ps.engine) {
      case Engine::kCompute:
        out->set_engine(weft::v1::COMPUTE);
        break;
      case Engine::kCopy:
        out->set_engine(weft::v1::COPY);
        break;
      case Engine::kCollective:
        out->set_engine(weft::v1::COLLECTIVE);
        break;
      case Engine::kHost:
        out->set_engine(weft::v1::HOST);
        break;
    }
  }
  proto.set_num_events(plan.num_events);
  proto.set_estimated_makespan_us(plan.estimated_makespan_us);
  proto.set_critical_path_us(plan.critical_path_us);
  proto.set_lower_bound_us(plan.lower_bound_us);
  proto.set_num_devices(plan.num_devices);
  return proto;
}

}  // namespace weft::scheduler
