// A Backend decorator that counts the bytes of every copy it forwards, by
// direction, into Metrics (weft_copy_bytes_total). Everything else is
// forwarded unchanged, optional capabilities and hints included, so the
// executor sees the wrapped backend's behaviour; a virtual added to Backend
// must be forwarded here too (or its default silently replaces the wrapped
// backend's). Copies are counted when issued without error: bytes of copies
// that fail later, on the device, are counted too.
//
// Thread-safe (the wrapped backend and Metrics are).
#ifndef WEFT_SERVER_COUNTING_BACKEND_H_
#define WEFT_SERVER_COUNTING_BACKEND_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "server/metrics.h"

namespace weft::server {

class CountingBackend final : public runtime::Backend {
 public:
  // Neither is owned; both must outlive this object.
  CountingBackend(runtime::Backend* backend, Metrics* metrics);
  CountingBackend(const CountingBackend&) = delete;
  CountingBackend& operator=(const CountingBackend&) = delete;

  int device_count() const override;
  runtime::DeviceInfo device_info(int device) const override;
  uint64_t memory_used_bytes(int device) const override;
  absl::StatusOr<runtime::StreamHandle> CreateStream(int device) override;
  absl::Status DestroyStream(runtime::StreamHandle stream) override;
  absl::StatusOr<runtime::EventHandle> CreateEvent(int device) override;
  absl::Status DestroyEvent(runtime::EventHandle event) override;
  absl::Status RecordEvent(runtime::EventHandle event,
                           runtime::StreamHandle stream) override;
  absl::Status StreamWaitEvent(runtime::StreamHandle stream,
                               runtime::EventHandle event) override;
  absl::StatusOr<bool> QueryEvent(runtime::EventHandle event) override;
  absl::Status SynchronizeStream(runtime::StreamHandle stream) override;
  absl::StatusOr<runtime::DevicePtr> Allocate(int device,
                                              uint64_t bytes) override;
  absl::Status Free(runtime::DevicePtr ptr) override;
  absl::Status CopyHostToDevice(runtime::DevicePtr dst, const void* src,
                                uint64_t bytes,
                                runtime::StreamHandle stream) override;
  absl::Status CopyDeviceToHost(void* dst, runtime::DevicePtr src,
                                uint64_t bytes,
                                runtime::StreamHandle stream) override;
  absl::Status CopyDeviceToDevice(runtime::DevicePtr dst,
                                  runtime::DevicePtr src, uint64_t bytes,
                                  runtime::StreamHandle stream) override;
  absl::Status Launch(const runtime::KernelLaunch& launch,
                      runtime::StreamHandle stream) override;
  absl::Status AddHostCallback(runtime::StreamHandle stream,
                               runtime::HostCallback callback) override;
  absl::Status SetErrorScope(runtime::StreamHandle stream,
                             uint64_t scope) override;
  bool supports_host_gates() const override;
  absl::StatusOr<runtime::GateHandle> EnqueueHostGate(
      runtime::StreamHandle stream) override;
  absl::Status OpenHostGate(runtime::GateHandle gate, absl::Status status,
                            double busy_us) override;
  void BeginBatch() override;
  void EndBatch() override;
  bool has_device_clock() const override;
  absl::StatusOr<double> EventTimeUs(runtime::EventHandle event) override;

 private:
  runtime::Backend* const backend_;
  Metrics* const metrics_;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_COUNTING_BACKEND_H_
