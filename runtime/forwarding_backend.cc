#include "runtime/forwarding_backend.h"

#include <utility>

namespace weft::runtime {

int ForwardingBackend::device_count() const { return backend_->device_count(); }

DeviceInfo ForwardingBackend::device_info(int device) const {
  return backend_->device_info(device);
}

uint64_t ForwardingBackend::memory_used_bytes(int device) const {
  return backend_->memory_used_bytes(device);
}

absl::StatusOr<StreamHandle> ForwardingBackend::CreateStream(int device) {
  return backend_->CreateStream(device);
}

absl::Status ForwardingBackend::DestroyStream(StreamHandle stream) {
  return backend_->DestroyStream(stream);
}

absl::StatusOr<EventHandle> ForwardingBackend::CreateEvent(int device) {
  return backend_->CreateEvent(device);
}

absl::Status ForwardingBackend::DestroyEvent(EventHandle event) {
  return backend_->DestroyEvent(event);
}

absl::Status ForwardingBackend::RecordEvent(EventHandle event,
                                            StreamHandle stream) {
  return backend_->RecordEvent(event, stream);
}

absl::Status ForwardingBackend::StreamWaitEvent(StreamHandle stream,
                                                EventHandle event) {
  return backend_->StreamWaitEvent(stream, event);
}

absl::StatusOr<bool> ForwardingBackend::QueryEvent(EventHandle event) {
  return backend_->QueryEvent(event);
}

absl::Status ForwardingBackend::SynchronizeStream(StreamHandle stream) {
  return backend_->SynchronizeStream(stream);
}

absl::StatusOr<DevicePtr> ForwardingBackend::Allocate(int device,
                                                      uint64_t bytes) {
  return backend_->Allocate(device, bytes);
}

absl::Status ForwardingBackend::Free(DevicePtr ptr) {
  return backend_->Free(ptr);
}

absl::Status ForwardingBackend::CopyHostToDevice(DevicePtr dst, const void* src,
                                                 uint64_t bytes,
                                                 StreamHandle stream) {
  return backend_->CopyHostToDevice(dst, src, bytes, stream);
}

absl::Status ForwardingBackend::CopyDeviceToHost(void* dst, DevicePtr src,
                                                 uint64_t bytes,
                                                 StreamHandle stream) {
  return backend_->CopyDeviceToHost(dst, src, bytes, stream);
}

absl::Status ForwardingBackend::CopyDeviceToDevice(DevicePtr dst, DevicePtr src,
                                                   uint64_t bytes,
                                                   StreamHandle stream) {
  return backend_->CopyDeviceToDevice(dst, src, bytes, stream);
}

absl::Status ForwardingBackend::CopyHostToDevicePadded(DevicePtr dst,
                                                       const void* src,
                                                       uint64_t src_bytes,
                                                       uint64_t bytes,
                                                       StreamHandle stream) {
  return backend_->CopyHostToDevicePadded(dst, src, src_bytes, bytes, stream);
}

absl::Status ForwardingBackend::CopyDeviceToHostBuffer(HostBuffer* dst,
                                                       DevicePtr src,
                                                       uint64_t bytes,
                                                       StreamHandle stream) {
  return backend_->CopyDeviceToHostBuffer(dst, src, bytes, stream);
}

absl::Status ForwardingBackend::Launch(const KernelLaunch& launch,
                                       StreamHandle stream) {
  return backend_->Launch(launch, stream);
}

absl::Status ForwardingBackend::PrepareModules(
    const scheduler::Graph& graph) const {
  return backend_->PrepareModules(graph);
}

absl::Status ForwardingBackend::AddHostCallback(StreamHandle stream,
                                                HostCallback callback) {
  return backend_->AddHostCallback(stream, std::move(callback));
}

absl::Status ForwardingBackend::SetErrorScope(StreamHandle stream,
                                              uint64_t scope) {
  return backend_->SetErrorScope(stream, scope);
}

bool ForwardingBackend::supports_host_gates() const {
  return backend_->supports_host_gates();
}

absl::StatusOr<GateHandle> ForwardingBackend::EnqueueHostGate(
    StreamHandle stream) {
  return backend_->EnqueueHostGate(stream);
}

absl::Status ForwardingBackend::OpenHostGate(GateHandle gate,
                                             absl::Status status,
                                             double busy_us) {
  return backend_->OpenHostGate(gate, std::move(status), busy_us);
}

void ForwardingBackend::BeginBatch() { backend_->BeginBatch(); }

void ForwardingBackend::EndBatch() { backend_->EndBatch(); }

bool ForwardingBackend::has_device_clock() const {
  return backend_->has_device_clock();
}

absl::StatusOr<double> ForwardingBackend::EventTimeUs(EventHandle event) {
  return backend_->EventTimeUs(event);
}

bool ForwardingBackend::supports_stamps() const {
  return backend_->supports_stamps();
}

absl::StatusOr<std::shared_ptr<const DeviceStamp>> ForwardingBackend::Stamp(
    StreamHandle stream) {
  return backend_->Stamp(stream);
}

bool ForwardingBackend::supports_device_graphs() const {
  return backend_->supports_device_graphs();
}

bool ForwardingBackend::prefers_device_graphs() const {
  return backend_->prefers_device_graphs();
}

bool ForwardingBackend::supports_device_graph_op(const std::string& op) const {
  return backend_->supports_device_graph_op(op);
}

bool ForwardingBackend::supports_device_loops() const {
  return backend_->supports_device_loops();
}

bool ForwardingBackend::supports_nested_device_control() const {
  return backend_->supports_nested_device_control();
}

absl::Status ForwardingBackend::LaunchDeviceCase(const DeviceCase& choice,
                                                 StreamHandle stream,
                                                 StreamHandle body_stream) {
  return backend_->LaunchDeviceCase(choice, stream, body_stream);
}

absl::Status ForwardingBackend::LaunchDeviceLoop(const DeviceLoop& loop,
                                                 StreamHandle stream,
                                                 StreamHandle body_stream) {
  return backend_->LaunchDeviceLoop(loop, stream, body_stream);
}

absl::Status ForwardingBackend::LaunchDeviceGraph(const DeviceGraph& graph,
                                                  StreamHandle stream) {
  return backend_->LaunchDeviceGraph(graph, stream);
}

absl::Status ForwardingBackend::PrepareDeviceGraph(const DeviceGraph& graph) {
  return backend_->PrepareDeviceGraph(graph);
}

absl::Status ForwardingBackend::AbortErrorScope(StreamHandle stream,
                                                uint64_t scope,
                                                absl::Status status) {
  return backend_->AbortErrorScope(stream, scope, std::move(status));
}

bool ForwardingBackend::interrupts_aborted_work() const {
  return backend_->interrupts_aborted_work();
}

void ForwardingBackend::ReleaseErrorScope(StreamHandle stream, uint64_t scope) {
  backend_->ReleaseErrorScope(stream, scope);
}

}  // namespace weft::runtime
