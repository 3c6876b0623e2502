// SimBackend (sim_backend.h): device graphs (StreamGraphRunner), control
// nodes the device decides (SimDeviceControl) and host gates.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

bool SimBackend::supports_device_graph_op(const std::string& op) const {
  return launches_->kernels().Find(op) != nullptr;
}

absl::Status SimBackend::PrepareDeviceGraph(const DeviceGraph& graph) {
  WEFT_RETURN_IF_ERROR(CheckHealthy(graph.device));
  return graphs_->Prepare(graph);
}

absl::Status SimBackend::LaunchDeviceGraph(const DeviceGraph& graph,
                                           StreamHandle stream_handle) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        FindStreamForCall(stream_handle, &storage));
  WEFT_RETURN_IF_ERROR(CheckHealthy(stream->device));
  return graphs_->Launch(graph, stream_handle, stream->device,
                         stream->queue->scope());
}

absl::Status SimBackend::LaunchDeviceLoop(const DeviceLoop& loop,
                                          StreamHandle stream_handle,
                                          StreamHandle body_stream) {
  WEFT_ASSIGN_OR_RETURN(Stream stream,
                        ControlStream(loop.name, stream_handle, body_stream));
  return control_->Launch(loop, stream_handle, body_stream, stream.device,
                          stream.queue->scope());
}

absl::Status SimBackend::LaunchDeviceCase(const DeviceCase& choice,
                                          StreamHandle stream_handle,
                                          StreamHandle body_stream) {
  WEFT_ASSIGN_OR_RETURN(Stream stream,
                        ControlStream(choice.name, stream_handle, body_stream));
  return control_->Launch(choice, stream_handle, body_stream, stream.device,
                          stream.queue->scope());
}

absl::StatusOr<SimBackend::Stream> SimBackend::ControlStream(
    const std::string& name, StreamHandle stream_handle,
    StreamHandle body_stream) const {
  WEFT_ASSIGN_OR_RETURN(Stream stream, FindStream(stream_handle));
  WEFT_RETURN_IF_ERROR(CheckHealthy(stream.device));
  WEFT_ASSIGN_OR_RETURN(Stream body, FindStream(body_stream));
  if (body.device != stream.device) {
    return absl::InvalidArgumentError(
        absl::StrCat("device control node '", name, "': body stream on device ",
                     body.device, ", its stream on device ", stream.device));
  }
  return stream;
}

absl::StatusOr<GateHandle> SimBackend::EnqueueHostGate(
    StreamHandle stream_handle) {
  auto gate = std::make_shared<SimStream::Gate>();
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(stream_handle.value);
  if (it == streams_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown stream ", stream_handle.value));
  }
  MaybeHold(it->second.queue);
  it->second.queue->EnqueueGate(gate);
  const uint64_t handle = next_handle_++;
  gates_.emplace(handle, PendingGate{it->second.queue, std::move(gate)});
  return GateHandle{handle};
}

absl::Status SimBackend::OpenHostGate(GateHandle gate_handle,
                                      absl::Status status, double busy_us) {
  PendingGate pending;
  {
    absl::MutexLock lock(&mu_);
    auto it = gates_.find(gate_handle.value);
    if (it == gates_.end()) {
      return absl::NotFoundError(
          absl::StrCat("unknown or already opened gate ", gate_handle.value));
    }
    pending = std::move(it->second);
    gates_.erase(it);
  }
  return pending.stream->OpenGate(*pending.gate, std::move(status),
                                  ClampDurationUs(busy_us));
}

}  // namespace weft::runtime
