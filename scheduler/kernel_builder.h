// User kernels of a weft.v1.Graph (graph_builder.h): its modules (CUDA C++
// or PTX, with NVRTC options) and the kernel launches of its nodes
// (module, kernel, grid, block, shared memory), checked against
// GraphLimits. Every rejection is INVALID_ARGUMENT naming the field.
#ifndef WEFT_SCHEDULER_KERNEL_BUILDER_H_
#define WEFT_SCHEDULER_KERNEL_BUILDER_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/graph.h"
#include "scheduler/graph_builder.h"
#include "weft/v1/weft.pb.h"

namespace weft::scheduler {

// The graph's modules, in order; `ids` maps each name (viewing `proto`)
// to its ModuleId.
absl::StatusOr<std::vector<ModuleSpec>> BuildModules(
    const weft::v1::Graph& proto, const GraphLimits& limits,
    absl::flat_hash_map<absl::string_view, ModuleId>& ids);

// One node's kernel launch at `field`, its module looked up in
// `module_ids`.
absl::StatusOr<KernelSpec> BuildKernel(
    const weft::v1::KernelLaunch& launch, const std::string& field,
    const GraphLimits& limits,
    const absl::flat_hash_map<absl::string_view, ModuleId>& module_ids);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_KERNEL_BUILDER_H_
