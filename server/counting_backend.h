// A Backend decorator that counts the bytes of every copy it forwards, by
// direction, into Metrics (weft_copy_bytes_total). Everything else is
// forwarded unchanged by runtime::ForwardingBackend. Copies are counted when
// issued without error, those inside device graphs when the graph is;
// issued without error: bytes of copies that fail later, on the device, are
// counted too.
//
// Thread-safe (the wrapped backend and Metrics are).
#ifndef WEFT_SERVER_COUNTING_BACKEND_H_
#define WEFT_SERVER_COUNTING_BACKEND_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/backend.h"
#include "runtime/device_graph.h"
#include "runtime/forwarding_backend.h"
#include "server/metrics.h"

namespace weft::server {

class CountingBackend final : public runtime::ForwardingBackend {
 public:
  // Neither is owned; both must outlive this object.
  CountingBackend(runtime::Backend* backend, Metrics* metrics);

  absl::Status CopyHostToDevice(runtime::DevicePtr dst, const void* src,
                                uint64_t bytes,
                                runtime::StreamHandle stream) override;
  absl::Status CopyHostToDevicePadded(runtime::DevicePtr dst, const void* src,
                                      uint64_t src_bytes, uint64_t bytes,
                                      runtime::StreamHandle stream) override;
  absl::Status CopyDeviceToHost(void* dst, runtime::DevicePtr src,
                                uint64_t bytes,
                                runtime::StreamHandle stream) override;
  absl::Status CopyDeviceToHostBuffer(runtime::HostBuffer* dst,
                                      runtime::DevicePtr src, uint64_t bytes,
                                      runtime::StreamHandle stream) override;
  absl::Status CopyDeviceToDevice(runtime::DevicePtr dst,
                                  runtime::DevicePtr src, uint64_t bytes,
                                  runtime::StreamHandle stream) override;
  // Counts the copies inside the graph.
  absl::Status LaunchDeviceGraph(const runtime::DeviceGraph& graph,
                                 runtime::StreamHandle stream) override;

 private:
  Metrics* const metrics_;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_COUNTING_BACKEND_H_
