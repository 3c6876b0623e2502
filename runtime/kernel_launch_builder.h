// Builds the Backend::Launch request of a graph node: its op (or user
// kernel), cost and arguments, with each buffer argument resolved to the
// buffer's copy on the launching device. Shared by the node-by-node issue
// path (job.cc) and the device-graph builder (job_graph.cc), so both hand
// a backend exactly the same launch for the same node.
#ifndef WEFT_RUNTIME_KERNEL_LAUNCH_BUILDER_H_
#define WEFT_RUNTIME_KERNEL_LAUNCH_BUILDER_H_

#include "absl/functional/function_ref.h"
#include "runtime/backend.h"
#include "scheduler/graph.h"

namespace weft::runtime {

// The launch of `node` (a node of `graph`, not a host-engine op), where
// `address_of(buffer)` is the device address of a buffer's copy on the
// launching device. Pointers into `graph` (user kernel, module) stay valid
// as long as `graph` does.
KernelLaunch BuildKernelLaunch(
    const scheduler::Graph& graph, const scheduler::NodeSpec& node,
    absl::FunctionRef<DevicePtr(scheduler::BufferId)> address_of);

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_KERNEL_LAUNCH_BUILDER_H_
