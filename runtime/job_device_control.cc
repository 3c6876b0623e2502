// Job's control nodes the device decides (ControlMode kDevice and kAuto):
// a loop becomes a DeviceLoop and a case..of a DeviceCase, their bodies
// device graphs built from the bodies' plans, launched on the node's
// stream with the bodies on a stream leased for them alone.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/device_graph.h"
#include "runtime/job.h"
#include "runtime/kernel_launch_builder.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

using scheduler::BufferId;
using scheduler::BufferUse;
using scheduler::NodeId;
using scheduler::PlannedNode;

absl::Status Job::EnqueueDeviceControl(int index, int device,
                                       StreamHandle stream) {
  Backend* backend = env_->backend;
  const PlannedNode& pn = plan_->nodes[index];
  const scheduler::NodeSpec& node = graph_->node(pn.node);
  const scheduler::ControlSpec& control = *node.control;
  const bool loop = control.kind == scheduler::ControlSpec::Kind::kWhile;
  auto cannot = [&](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat(
        loop ? "loop '" : "case..of '", node.name, "' cannot evaluate its ",
        loop ? "condition" : "selector", " on the device: ", why));
  };
  if (!backend->supports_device_loops()) {
    return cannot("this backend has no device control nodes");
  }
  // The bodies: device ops, all on one device.
  const std::vector<std::shared_ptr<const scheduler::Plan>>& plans =
      plan_->bodies[pn.node];
  int d = -1;
  for (size_t b = 0; b < control.bodies.size(); ++b) {
    const scheduler::Graph& body = *control.bodies[b];
    for (const PlannedNode& bn : plans[b]->nodes) {
      const scheduler::NodeSpec& spec = body.node(bn.node);
      if (d < 0) d = bn.device;
      if (bn.device != d) {
        return cannot(loop ? "its body is planned on more than one device"
                           : "its branches are planned on more than one "
                             "device");
      }
      if (spec.control != nullptr || spec.engine == scheduler::Engine::kHost) {
        return cannot(absl::StrCat("body node '", spec.name,
                                   "' runs on the host or holds control"));
      }
      if (!backend->supports_device_graph_op(spec.op)) {
        return cannot(absl::StrCat("body node '", spec.name, "' runs op '",
                                   spec.op, "', which device graphs lack"));
      }
    }
  }
  if (d < 0) return cannot("its bodies are empty");
  // A stream of the bodies' device for the node, ordered after the node's
  // own, and another for the bodies.
  StreamHandle control_stream = stream;
  if (d != device) {
    WEFT_ASSIGN_OR_RETURN(control_stream, streams_.Acquire(d));
    WEFT_RETURN_IF_ERROR(streams_.Enter(control_stream));
  }
  // The bodies' stream is the node's alone until it ends: leased from the
  // pool apart from the job's streams (nothing else of the job may queue
  // or wait there), in the job's error scope.
  WEFT_ASSIGN_OR_RETURN(std::optional<StreamHandle> fresh,
                        env_->stream_pools[d]->AcquireUnshared());
  if (!fresh.has_value()) {
    return cannot(absl::StrCat("no free stream on device ", d));
  }
  const StreamHandle body_stream = *fresh;
  loop_streams_[index] = {body_stream, d};
  if (absl::Status s = backend->SetErrorScope(body_stream, id_); !s.ok()) {
    return s;
  }
  (*env_->stream_scopes)[body_stream.value] = id_;
  if (!(control_stream == stream)) {
    WEFT_RETURN_IF_ERROR(OrderAfter(stream, device, control_stream));
  }
  // Everything the node uses (its bodies' buffers and its condition or
  // selector), current on the bodies' device before it starts.
  const std::vector<BufferUse> uses = graph_->BufferUses(pn.node);
  for (const BufferUse& use : uses) {
    WEFT_RETURN_IF_ERROR(buffers_->Allocate(use.buffer, d));
    WEFT_RETURN_IF_ERROR(
        buffers_->MakeCurrent(use.buffer, d, d, control_stream));
  }
  // Each body as one device graph, in its plan's order.
  std::vector<DeviceGraph> graphs(control.bodies.size());
  for (size_t b = 0; b < control.bodies.size(); ++b) {
    const scheduler::Graph& body = *control.bodies[b];
    const scheduler::Plan& body_plan = *plans[b];
    graphs[b].device = d;
    absl::flat_hash_map<NodeId, int> position;
    for (int i = 0; i < body_plan.num_nodes(); ++i) {
      const NodeId v = body_plan.nodes[i].node;
      DeviceGraphNode n;
      n.kind = DeviceGraphNodeKind::kKernel;
      n.launch = BuildKernelLaunch(body, body.node(v), [&](BufferId buffer) {
        return buffers_->ptr(buffer, d);
      });
      for (NodeId dep : body_plan.Deps(i)) n.deps.push_back(position[dep]);
      position[v] = i;
      graphs[b].nodes.push_back(std::move(n));
    }
  }
  const BufferId value = control.condition;
  auto result = std::make_shared<std::atomic<int64_t>>(loop ? 0 : -1);
  if (loop) {
    DeviceLoop device_loop;
    device_loop.name = node.name;
    device_loop.body = &graphs[0];
    device_loop.condition = buffers_->ptr(value, d);
    device_loop.dtype = graph_->buffer(value).dtype;
    device_loop.max_iterations = control.max_iterations;
    device_loop.iterations = result;
    WEFT_RETURN_IF_ERROR(
        backend->LaunchDeviceLoop(device_loop, control_stream, body_stream));
  } else {
    DeviceCase device_case;
    device_case.name = node.name;
    for (DeviceGraph& g : graphs) device_case.branches.push_back(&g);
    device_case.selector = buffers_->ptr(value, d);
    device_case.dtype = graph_->buffer(value).dtype;
    device_case.taken = result;
    WEFT_RETURN_IF_ERROR(
        backend->LaunchDeviceCase(device_case, control_stream, body_stream));
  }
  buffers_->MarkWritten(uses, d, control_stream);
  if (!(control_stream == stream)) {
    WEFT_RETURN_IF_ERROR(OrderAfter(control_stream, d, stream));
  }
  const uint64_t id = id_;
  const auto* post = &env_->post;
  WEFT_RETURN_IF_ERROR(backend->AddHostCallback(
      stream, [post, id, index, result](absl::Status status) {
        (*post)(id, [index, status = std::move(status),
                     value = result->load()](Job& job) {
          job.OnDeviceControlDone(index, status, value);
        });
      }));
  ++in_flight_;
  return absl::OkStatus();
}

void Job::OnDeviceControlDone(int index, absl::Status status, int64_t result) {
  if (auto it = loop_streams_.find(index); it != loop_streams_.end()) {
    const auto [stream, device] = it->second;
    loop_streams_.erase(it);
    env_->backend->ReleaseErrorScope(stream, id_);
    env_->stream_pools[device]->Release(stream, status.ok());
  }
  const scheduler::NodeSpec& node = graph_->node(plan_->nodes[index].node);
  const bool loop = node.control->kind == scheduler::ControlSpec::Kind::kWhile;
  if (callbacks_.on_control) {
    if (loop && result > 0) {
      callbacks_.on_control(node.name, ControlEventKind::kIteration, result,
                            absl::StrCat(result, " iterations, on the device"));
    } else if (!loop && status.ok()) {
      callbacks_.on_control(
          node.name, ControlEventKind::kBranch, result,
          result >= 0 ? absl::StrCat("branch ", result, ", on the device")
                      : absl::StrCat("the selector picks none of ",
                                     node.control->bodies.size(),
                                     " branches, on the device"));
    }
  }
  if (!status.ok() && !IsOwnCancellation(status) &&
      status.code() != absl::StatusCode::kFailedPrecondition) {
    status = absl::Status(
        status.code(),
        loop ? absl::StrCat("loop '", node.name, "' iteration ", result,
                            " (on the device): ", status.message())
             : absl::StrCat("case..of '", node.name, "' branch ", result,
                            " (on the device): ", status.message()));
  }
  OnNodeDone(index, std::move(status));
}

}  // namespace weft::runtime
