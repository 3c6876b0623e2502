#include "server/counting_backend.h"

namespace weft::server {

using runtime::DevicePtr;
using runtime::StreamHandle;

CountingBackend::CountingBackend(runtime::Backend* backend, Metrics* metrics)
    : ForwardingBackend(backend), metrics_(metrics) {}

absl::Status CountingBackend::CopyHostToDevice(DevicePtr dst, const void* src,
                                               uint64_t bytes,
                                               StreamHandle stream) {
  absl::Status status = wrapped()->CopyHostToDevice(dst, src, bytes, stream);
  if (status.ok()) metrics_->BytesCopied(CopyDirection::kHostToDevice, bytes);
  return status;
}

absl::Status CountingBackend::CopyHostToDevicePadded(DevicePtr dst,
                                                     const void* src,
                                                     uint64_t src_bytes,
                                                     uint64_t bytes,
                                                     StreamHandle stream) {
  absl::Status status =
      wrapped()->CopyHostToDevicePadded(dst, src, src_bytes, bytes, stream);
  if (status.ok()) metrics_->BytesCopied(CopyDirection::kHostToDevice, bytes);
  return status;
}

absl::Status CountingBackend::CopyDeviceToHost(void* dst, DevicePtr src,
                                               uint64_t bytes,
                                               StreamHandle stream) {
  absl::Status status = wrapped()->CopyDeviceToHost(dst, src, bytes, stream);
  if (status.ok()) metrics_->BytesCopied(CopyDirection::kDeviceToHost, bytes);
  return status;
}

absl::Status CountingBackend::CopyDeviceToHostBuffer(runtime::HostBuffer* dst,
                                                     DevicePtr src,
                                                     uint64_t bytes,
                                                     StreamHandle stream) {
  absl::Status status =
      wrapped()->CopyDeviceToHostBuffer(dst, src, bytes, stream);
  if (status.ok()) metrics_->BytesCopied(CopyDirection::kDeviceToHost, bytes);
  return status;
}

absl::Status CountingBackend::CopyDeviceToDevice(DevicePtr dst, DevicePtr src,
                                                 uint64_t bytes,
                                                 StreamHandle stream) {
  absl::Status status = wrapped()->CopyDeviceToDevice(dst, src, bytes, stream);
  if (status.ok()) {
    metrics_->BytesCopied(CopyDirection::kDeviceToDevice, bytes);
  }
  return status;
}

absl::Status CountingBackend::LaunchDeviceGraph(
    const runtime::DeviceGraph& graph, runtime::StreamHandle stream) {
  absl::Status status = wrapped()->LaunchDeviceGraph(graph, stream);
  if (!status.ok()) return status;
  for (const runtime::DeviceGraphNode& node : graph.nodes) {
    if (node.kind != runtime::DeviceGraphNodeKind::kCopy) continue;
    switch (node.direction) {
      case runtime::CopyDirection::kHostToDevice:
        metrics_->BytesCopied(CopyDirection::kHostToDevice, node.bytes);
        break;
      case runtime::CopyDirection::kDeviceToHost:
        metrics_->BytesCopied(CopyDirection::kDeviceToHost, node.bytes);
        break;
      case runtime::CopyDirection::kDeviceToDevice:
        metrics_->BytesCopied(CopyDirection::kDeviceToDevice, node.bytes);
        break;
    }
  }
  return status;
}

}  // namespace weft::server
