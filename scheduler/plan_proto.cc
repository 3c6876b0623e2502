#include "scheduler/plan_proto.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/passes/split_streams_pass.h"

namespace weft::scheduler {

absl::StatusOr<PlannerOptions> PlannerOptionsFromProto(
    const weft::v1::ScheduleOptions& proto, int num_devices,
    int default_max_streams_per_device) {
  PlannerOptions options;
  if (num_devices < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_devices: need at least one device, got ", num_devices));
  }
  options.num_devices = num_devices;
  switch (proto.has_device_policy() ? proto.device_policy()
                                    : weft::v1::LOOKAHEAD_FINISH_TIME) {
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
    case weft::v1::LOOKAHEAD_FINISH_TIME:
      options.device_policy = DevicePolicyKind::kLookaheadFinishTime;
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
  const double threshold = proto.data_threshold();
  if (!(threshold >= 0 && threshold <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.data_threshold: must be in [0, 1] (0: the default ",
        options.data_threshold, "), got ", threshold));
  }
  if (threshold != 0) options.data_threshold = threshold;
  options.restrict_to_parent_devices = proto.restrict_to_parent_devices();
  const int max_nodes = proto.max_nodes_per_stream();
  if (max_nodes < 0 ||
      (max_nodes > 0 && max_nodes < SplitStreamsPass::kMinTasksPerStream)) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.max_nodes_per_stream: must be at least ",
                     SplitStreamsPass::kMinTasksPerStream, " (0: the default ",
                     options.max_nodes_per_stream, "), got ", max_nodes));
  }
  if (max_nodes != 0) options.max_nodes_per_stream = max_nodes;
  options.bodies_on_one_device = proto.control_mode() != weft::v1::CONTROL_HOST;
  switch (proto.memory_order()) {
    case weft::v1::MEMORY_ORDER_AUTO:
      options.memory_order = MemoryOrderKind::kAuto;
      break;
    case weft::v1::MEMORY_ORDER_SUBMITTED:
      options.memory_order = MemoryOrderKind::kSubmitted;
      break;
    case weft::v1::MEMORY_ORDER_MEMORY_AWARE:
      options.memory_order = MemoryOrderKind::kMemoryAware;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("options.memory_order: unknown memory order ",
                       static_cast<int>(proto.memory_order())));
  }
  if (proto.memory_budget_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.memory_budget_bytes: must not be negative (0: no budget), "
        "got ",
        proto.memory_budget_bytes()));
  }
  if (proto.memory_budget_bytes() > 0) {
    options.memory_budget_bytes.assign(num_devices,
                                       proto.memory_budget_bytes());
  }
  return options;
}

weft::v1::Plan PlanToProto(const Graph& submitted, const Plan& plan) {
  // A plan with spills and fills is a plan of the graph holding them.
  const Graph& graph = plan.graph != nullptr ? *plan.graph : submitted;
  weft::v1::Plan proto;
  proto.mutable_nodes()->Reserve(static_cast<int>(plan.nodes.size()));
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const PlannedNode& pn = plan.nodes[i];
    weft::v1::PlannedNode* out = proto.add_nodes();
    out->set_name(graph.node(pn.node).name);
    out->set_device(pn.device);
    out->set_stream(pn.stream);
    if (static_cast<int>(i) < plan.deps.rows()) {
      for (NodeId d : plan.Deps(i)) out->add_deps(graph.node(d).name);
    }
    if (static_cast<int>(i) < plan.waits.rows()) {
      for (int e : plan.Waits(i)) out->add_wait_events(e);
    }
    out->set_signal_event(pn.signal_event);
    if (pn.peer_stream >= 0) out->set_peer_stream(pn.peer_stream);
    if (i < plan.reasons.size()) out->set_reason(plan.reasons[i]);
    const NodeEstimate estimate = plan.Estimate(i);
    out->set_estimated_start_us(estimate.start_us);
    out->set_estimated_end_us(estimate.end_us);
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
  for (const DeviceMemory& m : plan.memory) {
    weft::v1::DeviceMemory* out = proto.add_memory();
    out->set_device(m.device);
    out->set_arena_bytes(m.arena_bytes);
    out->set_peak_live_bytes(m.peak_live_bytes);
    out->set_lower_bound_bytes(m.lower_bound_bytes);
    out->set_budget_bytes(m.budget_bytes);
    out->set_spilled_bytes(m.spilled_bytes);
    out->set_orderings_added(m.orderings_added);
    out->set_budget_clamped(m.budget_clamped);
  }
  proto.mutable_buffers()->Reserve(static_cast<int>(plan.buffers.size()));
  for (const PlannedBuffer& b : plan.buffers) {
    weft::v1::PlannedBuffer* out = proto.add_buffers();
    out->set_name(graph.buffer(b.buffer).name);
    out->set_device(b.device);
    out->set_offset(b.offset);
    out->set_size_bytes(b.size_bytes);
  }
  proto.mutable_copies()->Reserve(static_cast<int>(plan.copies.size()));
  for (const PlannedCopy& copy : plan.copies) {
    weft::v1::PlannedCopy* out = proto.add_copies();
    out->set_buffer(graph.buffer(copy.buffer).name);
    out->set_writer(graph.node(plan.nodes[copy.after].node).name);
    out->set_reader(graph.node(plan.nodes[copy.before].node).name);
    out->set_device(copy.device);
    out->set_stream(copy.stream);
    out->set_event(copy.event);
  }
  for (NodeId v = 0; v < static_cast<NodeId>(plan.bodies.size()); ++v) {
    const std::vector<std::shared_ptr<const Plan>>& bodies = plan.bodies[v];
    const NodeSpec& node = graph.node(v);
    for (size_t b = 0; b < bodies.size(); ++b) {
      weft::v1::BodyPlan* out = proto.add_bodies();
      out->set_node(node.name);
      out->set_branch(static_cast<int32_t>(b));
      *out->mutable_plan() = PlanToProto(*node.control->bodies[b], *bodies[b]);
    }
  }
  return proto;
}

}  // namespace weft::scheduler
