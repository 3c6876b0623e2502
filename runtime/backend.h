// The device abstraction every executor runs on (the leveldb Env pattern).
//
// CUDA-shaped semantics behind opaque handles: devices own streams (FIFO
// queues of work), events (recorded on a stream, waited on by other streams,
// queried by the host), memory, copies and kernel launches. Every call is
// asynchronous with respect to the host unless its name says Synchronize:
// it enqueues work and returns. Errors of enqueued work surface through the
// stream's host callbacks and synchronization calls. Two implementations:
// SimBackend (CPU threads, modelled timing) and CudaBackend (real GPUs).
//
// Implementations are thread-safe: any thread may call any method.
#ifndef WEFT_RUNTIME_BACKEND_H_
#define WEFT_RUNTIME_BACKEND_H_

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/graph.h"

namespace weft::runtime {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string uuid;  // GPU-xxxxxxxx-... form, joins with dcgm-exporter
  bool simulated = false;
  uint64_t memory_total_bytes = 0;
};

// Opaque handles. Zero is never a valid handle.
struct StreamHandle {
  uint64_t value = 0;
  bool operator==(const StreamHandle& o) const { return value == o.value; }
};
struct EventHandle {
  uint64_t value = 0;
  bool operator==(const EventHandle& o) const { return value == o.value; }
};

// An address in one device's memory.
struct DevicePtr {
  int device = -1;
  uint64_t address = 0;
};

// A kernel argument: a device buffer or a typed scalar.
struct DeviceBufferArg {
  DevicePtr ptr;
  uint64_t size_bytes = 0;
  scheduler::DType dtype = scheduler::DType::kBytes;
  scheduler::Access access = scheduler::Access::kRead;
};
using KernelArg =
    std::variant<DeviceBufferArg, float, double, int32_t, int64_t>;

// A launch of a built-in op (see scheduler/op_signatures.h for the ops and
// their argument lists).
struct KernelLaunch {
  std::string op;
  std::vector<KernelArg> args;
  double cost_us = 0;  // the node's estimated cost; `spin` runs this long
};

// Called once, on a backend thread, after all work enqueued on the stream
// before it has completed. `status` is the first error of that work, or OK.
// Must not block; post heavier work elsewhere.
using HostCallback = std::function<void(absl::Status status)>;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual int device_count() const = 0;
  virtual DeviceInfo device_info(int device) const = 0;
  virtual uint64_t memory_used_bytes(int device) const = 0;

  virtual absl::StatusOr<StreamHandle> CreateStream(int device) = 0;
  // REQUIRES: no work pending on the stream.
  virtual absl::Status DestroyStream(StreamHandle stream) = 0;

  virtual absl::StatusOr<EventHandle> CreateEvent(int device) = 0;
  virtual absl::Status DestroyEvent(EventHandle event) = 0;
  // Captures the work enqueued on `stream` so far; the event completes when
  // that work has completed. Re-recording replaces the capture.
  virtual absl::Status RecordEvent(EventHandle event, StreamHandle stream) = 0;
  // Work enqueued on `stream` after this call waits for the event's last
  // recorded capture (a no-op when never recorded, as in CUDA).
  virtual absl::Status StreamWaitEvent(StreamHandle stream,
                                       EventHandle event) = 0;
  // True when the event's capture has completed.
  virtual absl::StatusOr<bool> QueryEvent(EventHandle event) = 0;
  // Blocks the caller until the stream's enqueued work has completed.
  virtual absl::Status SynchronizeStream(StreamHandle stream) = 0;

  // RESOURCE_EXHAUSTED when the device is out of memory.
  virtual absl::StatusOr<DevicePtr> Allocate(int device, uint64_t bytes) = 0;
  virtual absl::Status Free(DevicePtr ptr) = 0;

  // Asynchronous copies ordered on `stream`. Host memory must stay valid
  // until the copy has completed.
  virtual absl::Status CopyHostToDevice(DevicePtr dst, const void* src,
                                        uint64_t bytes,
                                        StreamHandle stream) = 0;
  virtual absl::Status CopyDeviceToHost(void* dst, DevicePtr src,
                                        uint64_t bytes,
                                        StreamHandle stream) = 0;
  virtual absl::Status CopyDeviceToDevice(DevicePtr dst, DevicePtr src,
                                          uint64_t bytes,
                                          StreamHandle stream) = 0;

  // Enqueues a built-in op. UNIMPLEMENTED for unknown ops.
  virtual absl::Status Launch(const KernelLaunch& launch,
                              StreamHandle stream) = 0;

  virtual absl::Status AddHostCallback(StreamHandle stream,
                                       HostCallback callback) = 0;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_BACKEND_H_
