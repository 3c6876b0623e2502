// Copies on the simulated backend: how long they take and their work.
//
// A copy lasts bytes / bandwidth, from a bandwidth matrix over every memory
// (source row, destination column, the host last), and books one copy
// engine of one device (SimDeviceModel): uploads the destination's
// host-to-device engine, downloads the source's device-to-host engine, and
// copies into a device (from another device or within it) its
// device-to-device engine, whichever stream issued them. A copy between two
// devices without a link goes through the host: it lasts both legs, back
// to back, on the destination's device-to-device engine.
//
// The work of a copy moves the bytes once, on a worker, through SimMemory,
// which moves only the ranges holding data (zeros stay virtual), then books
// its engine, which may park the stream until its turn and run again to
// book. An upload may have a zero tail: the first bytes from the host, the
// rest zeros; it lasts and books as an upload of all of its bytes.
//
// Thread-safe (immutable after construction).
#ifndef WEFT_RUNTIME_SIM_SIM_COPY_H_
#define WEFT_RUNTIME_SIM_SIM_COPY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/backend.h"
#include "runtime/host_buffer.h"
#include "runtime/sim/sim_device_model.h"
#include "runtime/sim/sim_memory.h"
#include "runtime/sim/sim_stream.h"

namespace weft::runtime {

// One copy's work.
struct SimCopyRecord {
  enum class Kind { kHostToDevice, kDeviceToHost, kDeviceToDevice };
  Kind kind = Kind::kDeviceToDevice;
  DevicePtr dst;
  DevicePtr src;
  void* host_dst = nullptr;
  HostBuffer* host_buffer = nullptr;  // downloads into one, else host_dst
  const void* host_src = nullptr;
  uint64_t host_src_bytes = 0;  // uploads: the bytes from host_src
  uint64_t bytes = 0;
  // The engine it books (see the header comment).
  SimDeviceModel* model = nullptr;
  SimDeviceModel::Engine engine = SimDeviceModel::Engine::kDeviceToDevice;
  double duration = 0;
  std::optional<SimDeviceModel::Ticket> ticket;
  bool moved = false;  // the bytes moved; only booking is left
};

class SimCopies {
 public:
  // `bandwidth_gbps`: (num_devices + 1)^2 GB/s, row-major, source by
  // destination, the host last; 0 off the diagonal is no link, infinity or
  // 0 on it instantaneous. `memory` and `models` (one per device) are not
  // owned and outlive this.
  SimCopies(std::vector<double> bandwidth_gbps, SimMemory* memory,
            std::vector<SimDeviceModel*> models);

  // The matrix for `num_devices` devices: `given` (num_devices + 1 rows of
  // num_devices + 1 GB/s each; 0 between two devices is no link, but every
  // device needs a link to and from the host) when it is not empty, else
  // the three scalars (host to device, device to host, device to device or
  // within a device), a zero or negative one instantaneous.
  // INVALID_ARGUMENT naming the first bad value.
  static absl::StatusOr<std::vector<double>> BandwidthMatrix(
      int num_devices, const std::vector<std::vector<double>>& given,
      double host_to_device, double device_to_host, double device_to_device);

  SimCopies(const SimCopies&) = delete;
  SimCopies& operator=(const SimCopies&) = delete;

  // Virtual microseconds a copy of `bytes` from memory `from` to memory
  // `to` takes (num_devices is the host).
  double DurationUs(uint64_t bytes, int from, int to) const;

  // The work of a copy of `bytes` from `src` (or `host_src`) to `dst` (or
  // `host_dst`), with its engine and duration, to enqueue with Enqueue. An
  // upload takes its first `src_bytes` from `host_src` and zeros after
  // them.
  std::unique_ptr<SimCopyRecord> Upload(DevicePtr dst, const void* host_src,
                                        uint64_t src_bytes,
                                        uint64_t bytes) const;
  std::unique_ptr<SimCopyRecord> Download(void* host_dst, DevicePtr src,
                                          uint64_t bytes) const;
  // A download that stores the source's bytes up to the end of its data.
  std::unique_ptr<SimCopyRecord> DownloadBuffer(HostBuffer* dst, DevicePtr src,
                                                uint64_t bytes) const;
  std::unique_ptr<SimCopyRecord> Copy(DevicePtr dst, DevicePtr src,
                                      uint64_t bytes) const;
  // Enqueues `copy` on `queue`, in its engine's turn.
  void Enqueue(SimStream& queue, std::unique_ptr<SimCopyRecord> copy) const;

 private:
  // The work of a copy, on a worker: moves the bytes, then books it.
  absl::Status Run(SimCopyRecord& copy, SimStream::Timing& timing) const;
  absl::Status MoveBytes(const SimCopyRecord& copy) const;
  absl::Status CheckHealthy(int device) const;

  // Constant after construction.
  const std::vector<double> bandwidth_gbps_;
  SimMemory* const memory_;
  const std::vector<SimDeviceModel*> models_;
  const int host_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_COPY_H_
