#include "scheduler/device_policy.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace weft::scheduler {

absl::StatusOr<DeviceAssignment> RoundRobinPolicy::Assign(
    const Graph& graph, const Dag& dag, const DeviceContext& context) const {
  if (context.num_devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.num_devices: need at least one device, got ",
                     context.num_devices));
  }
  DeviceAssignment out;
  out.device.assign(graph.num_nodes(), 0);
  out.choice.resize(graph.num_nodes());
  // Label -> (device, the first node with the label).
  absl::flat_hash_map<absl::string_view, std::pair<int, NodeId>> labels;
  int next = 0;
  for (NodeId v : dag.order) {
    const NodeSpec& node = graph.node(v);
    DeviceChoice& choice = out.choice[v];
    int device;
    if (node.device.has_value()) {
      device = *node.device;
      choice.why = DeviceChoice::Why::kPinned;
    } else if (auto it = node.stream_label.empty()
                             ? labels.end()
                             : labels.find(node.stream_label);
               it != labels.end()) {
      device = it->second.first;
      choice.why = DeviceChoice::Why::kLabel;
      choice.related = it->second.second;
    } else {
      device = next;
      next = (next + 1) % context.num_devices;
      choice.why = DeviceChoice::Why::kRoundRobin;
    }
    if (!node.stream_label.empty()) {
      labels.emplace(node.stream_label, std::make_pair(device, v));
    }
    out.device[v] = device;
  }
  return out;
}

absl::string_view DevicePolicyName(DevicePolicyKind kind) {
  switch (kind) {
    case DevicePolicyKind::kRoundRobin:
      return "ROUND_ROBIN";
    case DevicePolicyKind::kStreamAware:
      return "STREAM_AWARE";
    case DevicePolicyKind::kMinTransferSize:
      return "MIN_TRANSFER_SIZE";
    case DevicePolicyKind::kMinMinTransferTime:
      return "MINMIN_TRANSFER_TIME";
    case DevicePolicyKind::kMinMaxTransferTime:
      return "MINMAX_TRANSFER_TIME";
    case DevicePolicyKind::kMinFinishTime:
      return "MIN_FINISH_TIME";
  }
  return "UNKNOWN";
}

absl::StatusOr<std::unique_ptr<DevicePolicy>> CreateDevicePolicy(
    DevicePolicyKind kind) {
  switch (kind) {
    case DevicePolicyKind::kRoundRobin:
      return std::make_unique<RoundRobinPolicy>();
    case DevicePolicyKind::kStreamAware:
    case DevicePolicyKind::kMinTransferSize:
    case DevicePolicyKind::kMinMinTransferTime:
    case DevicePolicyKind::kMinMaxTransferTime:
    case DevicePolicyKind::kMinFinishTime:
      break;
  }
  return absl::UnimplementedError(
      absl::StrCat("options.device_policy: ", DevicePolicyName(kind),
                   " is not implemented yet; use ROUND_ROBIN"));
}

}  // namespace weft::scheduler
