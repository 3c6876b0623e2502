#include "runtime/kernel_launch_builder.h"

#include <cstdint>
#include <variant>

namespace weft::runtime {

KernelLaunch BuildKernelLaunch(
    const scheduler::Graph& graph, const scheduler::NodeSpec& node,
    absl::FunctionRef<DevicePtr(scheduler::BufferId)> address_of) {
  KernelLaunch launch;
  launch.op = node.op;
  launch.cost_us = node.cost_us;
  launch.occupancy_units = scheduler::OccupancyUnits(node.occupancy);
  launch.engine = node.engine;
  if (node.kernel.has_value()) {
    launch.user_kernel = &*node.kernel;
    launch.module = &graph.module(node.kernel->module);
  }
  launch.args.reserve(node.args.size());
  for (const scheduler::Arg& arg : node.args) {
    if (const auto* use = std::get_if<scheduler::BufferUse>(&arg)) {
      const scheduler::BufferSpec& spec = graph.buffer(use->buffer);
      launch.args.push_back(DeviceBufferArg{
          address_of(use->buffer), spec.size_bytes, spec.dtype, use->access});
    } else if (const auto* f = std::get_if<float>(&arg)) {
      launch.args.push_back(*f);
    } else if (const auto* d = std::get_if<double>(&arg)) {
      launch.args.push_back(*d);
    } else if (const auto* i = std::get_if<int32_t>(&arg)) {
      launch.args.push_back(*i);
    } else if (const auto* l = std::get_if<int64_t>(&arg)) {
      launch.args.push_back(*l);
    }
  }
  return launch;
}

}  // namespace weft::runtime
