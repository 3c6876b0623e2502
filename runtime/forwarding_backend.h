// A Backend that forwards every call to another Backend.
//
// The base of decorators (metrics, fault injection, logging): derive, and
// override only what the decorator changes. Every virtual of Backend,
// optional capabilities and hints included, is forwarded here, so a
// decorator never silently replaces the wrapped backend's behaviour with a
// default; a virtual added to Backend is added here too
// (forwarding_backend_test checks the capabilities reach through).
//
// Thread-safe when the wrapped backend is.
#ifndef WEFT_RUNTIME_FORWARDING_BACKEND_H_
#define WEFT_RUNTIME_FORWARDING_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/backend.h"

namespace weft::runtime {

class ForwardingBackend : public Backend {
 public:
  // `backend` is not owned and must outlive this object.
  explicit ForwardingBackend(Backend* backend) : backend_(backend) {}
  ForwardingBackend(const ForwardingBackend&) = delete;
  ForwardingBackend& operator=(const ForwardingBackend&) = delete;

  int device_count() const override;
  DeviceInfo device_info(int device) const override;
  uint64_t memory_used_bytes(int device) const override;
  absl::StatusOr<StreamHandle> CreateStream(int device) override;
  absl::Status DestroyStream(StreamHandle stream) override;
  absl::StatusOr<EventHandle> CreateEvent(int device) override;
  absl::Status DestroyEvent(EventHandle event) override;
  absl::Status RecordEvent(EventHandle event, StreamHandle stream) override;
  absl::Status StreamWaitEvent(StreamHandle stream, EventHandle event) override;
  absl::StatusOr<bool> QueryEvent(EventHandle event) override;
  absl::Status SynchronizeStream(StreamHandle stream) override;
  absl::StatusOr<DevicePtr> Allocate(int device, uint64_t bytes) override;
  absl::Status Free(DevicePtr ptr) override;
  absl::Status CopyHostToDevice(DevicePtr dst, const void* src, uint64_t bytes,
                                StreamHandle stream) override;
  absl::Status CopyDeviceToHost(void* dst, DevicePtr src, uint64_t bytes,
                                StreamHandle stream) override;
  absl::Status CopyDeviceToDevice(DevicePtr dst, DevicePtr src, uint64_t bytes,
                                  StreamHandle stream) override;
  absl::Status CopyHostToDevicePadded(DevicePtr dst, const void* src,
                                      uint64_t src_bytes, uint64_t bytes,
                                      StreamHandle stream) override;
  absl::Status CopyDeviceToHostBuffer(HostBuffer* dst, DevicePtr src,
                                      uint64_t bytes,
                                      StreamHandle stream) override;
  absl::Status Launch(const KernelLaunch& launch, StreamHandle stream) override;
  absl::Status PrepareModules(const scheduler::Graph& graph) const override;
  absl::Status AddHostCallback(StreamHandle stream,
                               HostCallback callback) override;
  absl::Status SetErrorScope(StreamHandle stream, uint64_t scope) override;
  bool supports_host_gates() const override;
  absl::StatusOr<GateHandle> EnqueueHostGate(StreamHandle stream) override;
  absl::Status OpenHostGate(GateHandle gate, absl::Status status,
                            double busy_us) override;
  void BeginBatch() override;
  void EndBatch() override;
  bool has_device_clock() const override;
  absl::StatusOr<double> EventTimeUs(EventHandle event) override;
  bool supports_stamps() const override;
  absl::StatusOr<std::shared_ptr<const DeviceStamp>> Stamp(
      StreamHandle stream) override;
  // Work inside a device graph reaches the wrapped backend through
  // LaunchDeviceGraph, not Launch or the copies: a decorator that counts or
  // intercepts those overrides LaunchDeviceGraph too.
  bool supports_device_graphs() const override;
  bool prefers_device_graphs() const override;
  bool supports_device_graph_op(const std::string& op) const override;
  absl::Status LaunchDeviceGraph(const DeviceGraph& graph,
                                 StreamHandle stream) override;
  absl::Status PrepareDeviceGraph(const DeviceGraph& graph) override;
  // A device loop's body reaches the wrapped backend as a whole too.
  bool supports_device_loops() const override;
  bool supports_nested_device_control() const override;
  absl::Status LaunchDeviceCase(const DeviceCase& choice, StreamHandle stream,
                                StreamHandle body_stream) override;
  absl::Status LaunchDeviceLoop(const DeviceLoop& loop, StreamHandle stream,
                                StreamHandle body_stream) override;

  absl::Status AbortErrorScope(StreamHandle stream, uint64_t scope,
                               absl::Status status) override;
  bool interrupts_aborted_work() const override;
  void ReleaseErrorScope(StreamHandle stream, uint64_t scope) override;

 protected:
  Backend* wrapped() const { return backend_; }

 private:
  Backend* const backend_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_FORWARDING_BACKEND_H_
