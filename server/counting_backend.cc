#include "server/counting_backend.h"

#include <utility>

namespace weft::server {

using runtime::DevicePtr;
using runtime::EventHandle;
using runtime::GateHandle;
using runtime::StreamHandle;

CountingBackend::CountingBackend(runtime::Backend* backend, Metrics* metrics)
    : backend_(backend), metrics_(metrics) {}

int CountingBackend::device_count() const { return backend_->device_count(); }

runtime::DeviceInfo CountingBackend::device_info(int device) const {
  return backend_->device_info(device);
}

uint64_t CountingBackend::memory_used_bytes(int device) const {
  return backend_->memory_used_bytes(device);
}

absl::StatusOr<StreamHandle> CountingBackend::CreateStream(int device) {
  return backend_->CreateStream(device);
}

absl::Status CountingBackend::DestroyStream(StreamHandle stream) {
  return backend_->DestroyStream(stream);
}

absl::StatusOr<EventHandle> CountingBackend::CreateEvent(int device) {
  return backend_->CreateEvent(device);
}

absl::Status CountingBackend::DestroyEvent(EventHandle event) {
  return backend_->DestroyEvent(event);
}

absl::Status CountingBackend::RecordEvent(EventHandle event,
                                          StreamHandle stream) {
  return backend_->RecordEvent(event, stream);
}

absl::Status CountingBackend::StreamWaitEvent(StreamHandle stream,
                                              EventHandle event) {
  return backend_->StreamWaitEvent(stream, event);
}

absl::StatusOr<bool> CountingBackend::QueryEvent(EventHandle event) {
  return backend_->QueryEvent(event);
}

absl::Status CountingBackend::SynchronizeStream(StreamHandle stream) {
  return backend_->SynchronizeStream(stream);
}

absl::StatusOr<DevicePtr> CountingBackend::Allocate(int device,
                                                    uint64_t bytes) {
  return backend_->Allocate(device, bytes);
}

absl::Status CountingBackend::Free(DevicePtr ptr) {
  return backend_->Free(ptr);
}

absl::Status CountingBackend::CopyHostToDevice(DevicePtr dst, const void* src,
                                               uint64_t bytes,
                                               StreamHandle stream) {
  absl::Status status = backend_->CopyHostToDevice(dst, src, bytes, stream);
  if (status.ok()) metrics_->BytesCopied(CopyDirection::kHostToDevice, bytes);
  return status;
}

absl::Status CountingBackend::CopyDeviceToHost(void* dst, DevicePtr src,
                                               uint64_t bytes,
                                               StreamHandle stream) {
  absl::Status status = backend_->CopyDeviceToHost(dst, src, bytes, stream);
  if (status.ok()) metrics_->BytesCopied(CopyDirection::kDeviceToHost, bytes);
  return status;
}

absl::Status CountingBackend::CopyDeviceToDevice(DevicePtr dst, DevicePtr src,
                                                 uint64_t bytes,
                                                 StreamHandle stream) {
  absl::Status status = backend_->CopyDeviceToDevice(dst, src, bytes, stream);
  if (status.ok()) {
    metrics_->BytesCopied(CopyDirection::kDeviceToDevice, bytes);
  }
  return status;
}

absl::Status CountingBackend::Launch(const runtime::KernelLaunch& launch,
                                     StreamHandle stream) {
  return backend_->Launch(launch, stream);
}

absl::Status CountingBackend::AddHostCallback(StreamHandle stream,
                                              runtime::HostCallback callback) {
  return backend_->AddHostCallback(stream, std::move(callback));
}

absl::Status CountingBackend::SetErrorScope(StreamHandle stream,
                                            uint64_t scope) {
  return backend_->SetErrorScope(stream, scope);
}

bool CountingBackend::supports_host_gates() const {
  return backend_->supports_host_gates();
}

absl::StatusOr<GateHandle> CountingBackend::EnqueueHostGate(
    StreamHandle stream) {
  return backend_->EnqueueHostGate(stream);
}

absl::Status CountingBackend::OpenHostGate(GateHandle gate,
                                           absl::Status status,
                                           double busy_us) {
  return backend_->OpenHostGate(gate, std::move(status), busy_us);
}

void CountingBackend::BeginBatch() { backend_->BeginBatch(); }

void CountingBackend::EndBatch() { backend_->EndBatch(); }

bool CountingBackend::has_device_clock() const {
  return backend_->has_device_clock();
}

absl::StatusOr<double> CountingBackend::EventTimeUs(EventHandle event) {
  return backend_->EventTimeUs(event);
}

}  // namespace weft::server
