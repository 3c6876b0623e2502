// Device selection: which device runs each node.
//
// One DevicePolicy class per policy; CreateDevicePolicy picks one. Rules
// common to every policy: a pinned node (NodeSpec::device) keeps its pin;
// an unpinned node with a stream label goes to the device of the first node
// (in issue order) carrying that label, so that a label names one stream.
// Policies see nodes in issue order (Dag::order), the order in which an
// online scheduler such as GrCUDA would meet them.
//
// Implemented: ROUND_ROBIN (GrCUDA): each node that is neither pinned nor
// bound by its label goes to the next device in turn; pinned and
// label-bound nodes do not advance the turn. The other policies answer
// UNIMPLEMENTED for now.
#ifndef WEFT_SCHEDULER_DEVICE_POLICY_H_
#define WEFT_SCHEDULER_DEVICE_POLICY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/planner_options.h"

namespace weft::scheduler {

// Why a node went to its device.
struct DeviceChoice {
  enum class Why : uint8_t { kPinned, kLabel, kRoundRobin };
  Why why = Why::kRoundRobin;
  // kLabel: the first node carrying the label, which chose the device.
  NodeId related = -1;
};

struct DeviceAssignment {
  std::vector<int> device;           // by NodeId
  std::vector<DeviceChoice> choice;  // by NodeId
};

// What a policy may look at besides the graph.
struct DeviceContext {
  int num_devices = 1;
  // Busy streams per device from other running jobs; empty: all idle.
  std::vector<int> busy_streams;
};

// One device-selection policy. Implementations are stateless between calls
// and thread-safe.
class DevicePolicy {
 public:
  virtual ~DevicePolicy() = default;
  virtual DevicePolicyKind kind() const = 0;
  // REQUIRES: every pin in `graph` is below context.num_devices.
  virtual absl::StatusOr<DeviceAssignment> Assign(
      const Graph& graph, const Dag& dag,
      const DeviceContext& context) const = 0;
};

// GrCUDA's ROUND_ROBIN (see the file comment).
class RoundRobinPolicy final : public DevicePolicy {
 public:
  DevicePolicyKind kind() const override {
    return DevicePolicyKind::kRoundRobin;
  }
  absl::StatusOr<DeviceAssignment> Assign(
      const Graph& graph, const Dag& dag,
      const DeviceContext& context) const override;
};

// The wire name of a policy, e.g. "ROUND_ROBIN".
absl::string_view DevicePolicyName(DevicePolicyKind kind);

// UNIMPLEMENTED for policies not built yet.
absl::StatusOr<std::unique_ptr<DevicePolicy>> CreateDevicePolicy(
    DevicePolicyKind kind);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_DEVICE_POLICY_H_
