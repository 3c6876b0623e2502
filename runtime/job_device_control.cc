// Job's control nodes whose bodies run as device graphs, built once from
// the bodies' plans and run on a stream leased for them alone: decided by
// the device (ControlMode kDevice and kAuto: a loop becomes a DeviceLoop
// and a case..of a DeviceCase), or driven by the host (the condition comes
// back after every iteration and the host relaunches the body's graph).
#include <atomic>
#include <functional>
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

absl::StatusOr<Job::DeviceBodies> Job::PrepareDeviceBodies(
    int index, int device, StreamHandle stream, bool device_decides) {
  Backend* backend = env_->backend;
  const PlannedNode& pn = plan_->nodes[index];
  const scheduler::NodeSpec& node = graph_->node(pn.node);
  const scheduler::ControlSpec& control = *node.control;
  const bool loop = control.kind == scheduler::ControlSpec::Kind::kWhile;
  auto cannot = [&](absl::string_view why) {
    return absl::FailedPreconditionError(
        device_decides ? absl::StrCat(loop ? "loop '" : "case..of '", node.name,
                                      "' cannot evaluate its ",
                                      loop ? "condition" : "selector",
                                      " on the device: ", why)
                       : absl::StrCat("the bodies of '", node.name,
                                      "' cannot run as device graphs: ", why));
  };
  if (device_decides && !backend->supports_device_loops()) {
    return cannot("this backend has no device control nodes");
  }
  if (!device_decides && !backend->supports_device_graphs()) {
    return cannot("this backend has no device graphs");
  }
  // The bodies: device ops, all on one device; control nodes in them
  // only where the device decides them too.
  const std::vector<std::shared_ptr<const scheduler::Plan>>& plans =
      plan_->bodies[pn.node];
  const bool nested =
      device_decides && backend->supports_nested_device_control();
  const std::function<absl::Status(absl::string_view)> cannot_fn = cannot;
  int d = -1;
  const absl::string_view spread =
      loop ? "its body is planned on more than one device"
           : "its branches are planned on more than one device";
  for (size_t b = 0; b < control.bodies.size(); ++b) {
    WEFT_RETURN_IF_ERROR(CheckDeviceBody(*control.bodies[b], *plans[b], nested,
                                         spread, d, cannot_fn));
  }
  if (d < 0) return cannot("its bodies are empty");
  DeviceBodies bodies;
  bodies.device = d;
  // A stream of the bodies' device for the node, ordered after the node's
  // own, and another for the bodies.
  bodies.stream = stream;
  if (d != device) {
    WEFT_ASSIGN_OR_RETURN(bodies.stream, streams_.Acquire(d));
    WEFT_RETURN_IF_ERROR(streams_.Enter(bodies.stream));
  }
  // The bodies' stream is the node's alone until it ends: leased from the
  // pool apart from the job's streams (nothing else of the job may queue
  // or wait there), in the job's error scope.
  WEFT_ASSIGN_OR_RETURN(std::optional<StreamHandle> fresh,
                        env_->stream_pools[d]->AcquireUnshared());
  if (!fresh.has_value()) {
    return cannot(absl::StrCat("no free stream on device ", d));
  }
  bodies.body_stream = *fresh;
  loop_streams_[index] = {bodies.body_stream, d};
  WEFT_RETURN_IF_ERROR(backend->SetErrorScope(bodies.body_stream, id_));
  (*env_->stream_scopes)[bodies.body_stream.value] = id_;
  if (!(bodies.stream == stream)) {
    WEFT_RETURN_IF_ERROR(OrderAfter(stream, device, bodies.stream));
  }
  // Everything the node uses (its bodies' buffers and its condition or
  // selector), current on the bodies' device before it starts.
  for (const BufferUse& use : graph_->BufferUses(pn.node)) {
    WEFT_RETURN_IF_ERROR(buffers_->Allocate(use.buffer, d));
    WEFT_RETURN_IF_ERROR(
        buffers_->MakeCurrent(use.buffer, d, d, bodies.stream));
  }
  // Each body as one device graph, in its plan's order.
  for (size_t b = 0; b < control.bodies.size(); ++b) {
    bodies.graphs.push_back(
        BuildDeviceBody(*control.bodies[b], *plans[b], d, bodies.nested));
  }
  return bodies;
}

absl::Status Job::CheckDeviceBody(
    const scheduler::Graph& body, const scheduler::Plan& plan, bool nested,
    absl::string_view spread, int& device,
    const std::function<absl::Status(absl::string_view)>& cannot) const {
  Backend* backend = env_->backend;
  for (const PlannedNode& bn : plan.nodes) {
    const scheduler::NodeSpec& spec = body.node(bn.node);
    if (spec.control != nullptr) {
      if (!nested) {
        return cannot(
            absl::StrCat("body node '", spec.name, "' holds control"));
      }
      for (size_t k = 0; k < spec.control->bodies.size(); ++k) {
        WEFT_RETURN_IF_ERROR(CheckDeviceBody(*spec.control->bodies[k],
                                             *plan.bodies[bn.node][k], nested,
                                             spread, device, cannot));
      }
      continue;
    }
    if (device < 0) device = bn.device;
    if (bn.device != device) return cannot(spread);
    if (spec.engine == scheduler::Engine::kHost) {
      return cannot(
          absl::StrCat("body node '", spec.name, "' runs on the host"));
    }
    if (!backend->supports_device_graph_op(spec.op)) {
      return cannot(absl::StrCat("body node '", spec.name, "' runs op '",
                                 spec.op, "', which device graphs lack"));
    }
  }
  return absl::OkStatus();
}

DeviceGraph Job::BuildDeviceBody(const scheduler::Graph& body,
                                 const scheduler::Plan& plan, int device,
                                 std::vector<NestedDeviceControl>& nested) {
  DeviceGraph graph;
  graph.device = device;
  absl::flat_hash_map<NodeId, int> position;
  for (int i = 0; i < plan.num_nodes(); ++i) {
    const NodeId v = plan.nodes[i].node;
    const scheduler::NodeSpec& spec = body.node(v);
    std::vector<int> deps;
    for (NodeId dep : plan.Deps(i)) deps.push_back(position[dep]);
    if (spec.control != nullptr) {
      const scheduler::ControlSpec& c = *spec.control;
      auto control = std::make_shared<DeviceGraphControl>();
      control->loop = c.kind == scheduler::ControlSpec::Kind::kWhile;
      control->name = spec.name;
      control->value = buffers_->ptr(c.condition, device);
      control->dtype = graph_->buffer(c.condition).dtype;
      control->max_iterations = c.max_iterations;
      control->result->store(control->loop ? 0 : -1);
      for (size_t k = 0; k < c.bodies.size(); ++k) {
        control->bodies.push_back(
            BuildDeviceBody(*c.bodies[k], *plan.bodies[v][k], device, nested));
      }
      nested.push_back({spec.name, control->loop, control->result});
      position[v] = graph.AddControl(std::move(control), std::move(deps));
      continue;
    }
    position[v] = graph.AddKernel(
        BuildKernelLaunch(
            body, spec,
            [&](BufferId buffer) { return buffers_->ptr(buffer, device); }),
        std::move(deps));
  }
  return graph;
}

absl::Status Job::EnqueueDeviceControl(int index, int device,
                                       StreamHandle stream) {
  absl::StatusOr<DeviceBodies> prepared =
      PrepareDeviceBodies(index, device, stream, /*device_decides=*/true);
  if (!prepared.ok()) {
    ReleaseLeasedStream(index, false);
    return prepared.status();
  }
  absl::Status launched = LaunchDeviceControl(index, device, stream, *prepared);
  if (!launched.ok()) ReleaseLeasedStream(index, false);
  return launched;
}

absl::Status Job::LaunchDeviceControl(int index, int device,
                                      StreamHandle stream,
                                      DeviceBodies& bodies) {
  Backend* backend = env_->backend;
  const PlannedNode& pn = plan_->nodes[index];
  const scheduler::NodeSpec& node = graph_->node(pn.node);
  const scheduler::ControlSpec& control = *node.control;
  const bool loop = control.kind == scheduler::ControlSpec::Kind::kWhile;
  const int d = bodies.device;
  const BufferId value = control.condition;
  auto result = std::make_shared<std::atomic<int64_t>>(loop ? 0 : -1);
  if (loop) {
    DeviceLoop device_loop;
    device_loop.name = node.name;
    device_loop.body = &bodies.graphs[0];
    device_loop.condition = buffers_->ptr(value, d);
    device_loop.dtype = graph_->buffer(value).dtype;
    device_loop.max_iterations = control.max_iterations;
    device_loop.iterations = result;
    WEFT_RETURN_IF_ERROR(backend->LaunchDeviceLoop(device_loop, bodies.stream,
                                                   bodies.body_stream));
  } else {
    DeviceCase device_case;
    device_case.name = node.name;
    for (DeviceGraph& g : bodies.graphs) device_case.branches.push_back(&g);
    device_case.selector = buffers_->ptr(value, d);
    device_case.dtype = graph_->buffer(value).dtype;
    device_case.taken = result;
    WEFT_RETURN_IF_ERROR(backend->LaunchDeviceCase(device_case, bodies.stream,
                                                   bodies.body_stream));
  }
  buffers_->MarkWritten(graph_->BufferUses(pn.node), d, bodies.stream);
  if (!(bodies.stream == stream)) {
    WEFT_RETURN_IF_ERROR(OrderAfter(bodies.stream, d, stream));
  }
  const uint64_t id = id_;
  const auto* post = &env_->post_completion;
  WEFT_RETURN_IF_ERROR(backend->AddHostCallback(
      stream,
      [post, id, index, result, nested = bodies.nested](absl::Status status) {
        (*post)(id, [index, status = std::move(status), value = result->load(),
                     nested](Job& job) {
          job.OnDeviceControlDone(index, status, value, nested);
        });
      }));
  ++in_flight_;
  return absl::OkStatus();
}

absl::Status Job::EnqueueGraphControl(int index, int device,
                                      StreamHandle stream) {
  absl::StatusOr<DeviceBodies> prepared =
      PrepareDeviceBodies(index, device, stream, /*device_decides=*/false);
  if (!prepared.ok()) {
    ReleaseLeasedStream(index, false);
    return prepared.status();
  }
  GraphControl& control = graph_controls_[index];
  control.bodies = *std::move(prepared);
  absl::Status started = StartGraphControl(index, control);
  if (!started.ok()) {
    graph_controls_.erase(index);
    ReleaseLeasedStream(index, false);
  }
  return started;
}

absl::Status Job::StartGraphControl(int index, GraphControl& control) {
  Backend* backend = env_->backend;
  const scheduler::NodeSpec& node = graph_->node(plan_->nodes[index].node);
  const int d = control.bodies.device;
  const BufferId value = node.control->condition;
  control.condition = buffers_->ptr(value, d);
  control.condition_bytes =
      static_cast<uint64_t>(scheduler::DTypeSize(graph_->buffer(value).dtype));
  control.condition_value = std::make_unique<char[]>(8);
  for (const DeviceGraph& g : control.bodies.graphs) {
    WEFT_RETURN_IF_ERROR(backend->PrepareDeviceGraph(g));
  }
  if (node.control->kind == scheduler::ControlSpec::Kind::kWhile) {
    LoopRelay::Loop loop;
    loop.backend = backend;
    loop.body = &control.bodies.graphs[0];
    loop.stream = control.bodies.body_stream;
    loop.condition = control.condition;
    loop.value = control.condition_value.get();
    loop.bytes = control.condition_bytes;
    loop.dtype = graph_->buffer(value).dtype;
    loop.max_iterations = node.control->max_iterations;
    const uint64_t id = id_;
    const auto* post = &env_->post;
    loop.hand_back = [post, id, index](int64_t ran, absl::Status status) {
      (*post)(id, [index, ran, status = std::move(status)](Job& job) {
        job.OnBodyDone(index, status, ran);
      });
    };
    loop.progress = [post, id, index](int64_t iteration) {
      (*post)(id, [index, iteration](Job& job) {
        job.OnLoopProgress(index, iteration);
      });
    };
    control.relay = std::make_shared<LoopRelay>(std::move(loop));
  }
  // The bodies' stream: after the buffers are current, the condition's
  // first value to the host, and the run starts behind it.
  const StreamHandle body_stream = control.bodies.body_stream;
  WEFT_RETURN_IF_ERROR(OrderAfter(control.bodies.stream, d, body_stream));
  WEFT_RETURN_IF_ERROR(backend->CopyDeviceToHost(
      control.condition_value.get(), control.condition, control.condition_bytes,
      body_stream));
  const uint64_t id = id_;
  const auto* post = &env_->post_completion;
  WEFT_RETURN_IF_ERROR(backend->AddHostCallback(
      body_stream, [post, id, index](absl::Status status) {
        (*post)(id, [index, status = std::move(status)](Job& job) {
          job.OnControlReady(index, status);
        });
      }));
  ++in_flight_;
  running_controls_.insert(plan_->nodes[index].node);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Job::StartGraphBody(int index, int body) {
  Backend* backend = env_->backend;
  GraphControl& control = graph_controls_.at(index);
  const StreamHandle body_stream = control.bodies.body_stream;
  const int d = control.bodies.device;
  const NodeId v = plan_->nodes[index].node;
  const scheduler::NodeSpec& node = graph_->node(v);
  const bool loop = node.control->kind == scheduler::ControlSpec::Kind::kWhile;
  ++control.launches;
  // Each iteration (or the branch) is a span on the bodies' stream, the
  // condition's way back included.
  if (callbacks_.on_trace && control.launches <= kMaxTracedBodies) {
    const std::string name =
        loop ? absl::StrCat(node.name, ": iteration ", control.launches)
             : absl::StrCat(node.name, ": branch ", body);
    control.open_span =
        tracer_->Begin(TracedWork{SpanKind::kIteration, TraceTrackKind::kStream,
                                  d, name, node.op, v},
                       body_stream, d);
  }
  if (loop) {
    // The relay continues the loop in the completion callbacks. While its
    // iterations are traced one by one it marks them with markers taken
    // here, a batch at a time; where the trace cannot take such markers
    // (the host clock) every traced iteration comes back here.
    bool relay = !callbacks_.on_trace || control.launches >= kMaxTracedBodies;
    std::vector<EventHandle> markers;
    if (!relay) {
      const int64_t batch =
          std::min(kRelayTraceBatch, kMaxTracedBodies - control.launches);
      markers.reserve(2 * batch);
      for (int64_t k = 0; k < 2 * batch; ++k) {
        absl::StatusOr<EventHandle> marker = tracer_->NewMarker(d);
        if (!marker.ok()) break;
        markers.push_back(*marker);
      }
      relay = static_cast<int64_t>(markers.size()) == 2 * batch;
      if (!relay) markers.clear();
    }
    WEFT_RETURN_IF_ERROR(
        control.relay->Launch(control.launches, relay, std::move(markers)));
    tracer_->End(control.open_span, body_stream, d);
    tracer_->Dirty(body_stream);
    return uint64_t{0};
  }
  WEFT_RETURN_IF_ERROR(
      backend->LaunchDeviceGraph(control.bodies.graphs[body], body_stream));
  tracer_->End(control.open_span, body_stream, d);
  // The next iteration starts when it is launched, not when this one ends.
  tracer_->Dirty(body_stream);
  const uint64_t id = id_;
  const auto* post = &env_->post_completion;
  WEFT_RETURN_IF_ERROR(backend->AddHostCallback(
      body_stream, [post, id, index](absl::Status status) {
        (*post)(id, [index, status = std::move(status)](Job& job) {
          job.OnBodyDone(index, status);
        });
      }));
  return uint64_t{0};
}

absl::Status Job::EndGraphControl(int index, absl::Status status) {
  auto it = graph_controls_.find(index);
  if (it == graph_controls_.end()) return status;
  const DeviceBodies& bodies = it->second.bodies;
  // What the bodies wrote is the node's, on its stream of their device.
  absl::Status ordered =
      OrderAfter(bodies.body_stream, bodies.device, bodies.stream);
  if (ordered.ok()) {
    buffers_->MarkWritten(graph_->BufferUses(plan_->nodes[index].node),
                          bodies.device, bodies.stream);
    tracer_->NodeEndsAfter(index, bodies.stream, bodies.device);
  }
  ReleaseLeasedStream(index, status.ok() && ordered.ok());
  graph_controls_.erase(it);
  return status.ok() ? ordered : status;
}

void Job::ReleaseLeasedStream(int index, bool reusable) {
  auto it = loop_streams_.find(index);
  if (it == loop_streams_.end()) return;
  const auto [stream, device] = it->second;
  loop_streams_.erase(it);
  env_->backend->ReleaseErrorScope(stream, id_);
  env_->stream_pools[device]->Release(stream, reusable);
}

void Job::OnDeviceControlDone(int index, absl::Status status, int64_t result,
                              const std::vector<NestedDeviceControl>& nested) {
  ReleaseLeasedStream(index, status.ok());
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
    // Control nodes inside its bodies: a loop's iterations over all of
    // its runs, a case's last branch.
    for (const NestedDeviceControl& inner : nested) {
      const int64_t value = inner.result->load();
      if (inner.loop && value > 0) {
        callbacks_.on_control(
            inner.name, ControlEventKind::kIteration, value,
            absl::StrCat(value, " iterations in all, on the device, inside '",
                         node.name, "'"));
      } else if (!inner.loop && value >= 0) {
        callbacks_.on_control(
            inner.name, ControlEventKind::kBranch, value,
            absl::StrCat("branch ", value, " last, on the device, inside '",
                         node.name, "'"));
      }
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
