// A Backend made of CPU threads: simulated GPUs with checkable results.
//
// Each simulated device has a memory capacity (allocations are host memory,
// accounted against it; running out is RESOURCE_EXHAUSTED naming the device,
// the request and the free bytes). Each stream is a SimStream: a FIFO queue
// drained by its own worker thread. Events capture a stream's sequence
// number when recorded; a stream waiting on an event really blocks until
// that work has completed. Copies move the bytes and then keep the stream
// busy for bytes / bandwidth of real time. Kernels run the CPU reference
// implementation from a CpuKernelTable; `spin` keeps its stream busy for the
// launch's cost_us. Durations are real time (absl::Now), scaled by
// `time_scale`.
//
// Errors: synchronous ones (unknown handle, unknown op, an address outside
// any allocation) are returned by the call; errors of enqueued work (a
// kernel rejecting its arguments, memory freed before the work ran, an
// injected fault) make the stream failed, as a sticky CUDA error would:
// its later work is skipped and its later host callbacks receive the error.
//
// Host callbacks run on the stream's worker thread. Destroying the backend
// stops every stream, drops work not yet started (without calling its
// callbacks) and joins all threads.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_SIM_SIM_BACKEND_H_
#define WEFT_RUNTIME_SIM_SIM_BACKEND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/backend.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/sim/sim_stream.h"

namespace weft::runtime {

class SimBackend final : public Backend {
 public:
  struct Options {
    int num_devices = 2;
    uint64_t memory_bytes = uint64_t{16} << 30;  // per device
    // Copy bandwidths in GB/s (1e9 bytes per second). Zero, a negative
    // value or infinity makes that kind of copy instantaneous.
    double host_to_device_gbps = 25;
    double device_to_host_gbps = 25;
    double device_to_device_gbps = 300;  // same device or peer
    // Multiplies every modelled duration (spins and copies); 0 makes all
    // of them instantaneous.
    double time_scale = 1.0;
    std::string device_name = "Weft Simulated GPU";
    // Kernels to run; not owned, must outlive the backend. Null: the
    // built-in ops.
    const CpuKernelTable* kernels = nullptr;
    // Fault injection: consulted on the stream's thread just before a launch
    // runs; a non-OK answer fails that launch with this status.
    std::function<absl::Status(int device, const KernelLaunch& launch)>
        launch_fault;
  };

  static absl::StatusOr<std::unique_ptr<SimBackend>> Create(Options options);
  ~SimBackend() override;

  SimBackend(const SimBackend&) = delete;
  SimBackend& operator=(const SimBackend&) = delete;

  // Backend.
  int device_count() const override;
  DeviceInfo device_info(int device) const override;
  uint64_t memory_used_bytes(int device) const override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<StreamHandle> CreateStream(int device) override
      ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the stream's pending work, then stops it. FAILED_PRECONDITION
  // when called from the stream's own host callback.
  absl::Status DestroyStream(StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<EventHandle> CreateEvent(int device) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status DestroyEvent(EventHandle event) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RecordEvent(EventHandle event, StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status StreamWaitEvent(StreamHandle stream, EventHandle event) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<bool> QueryEvent(EventHandle event) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SynchronizeStream(StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<DevicePtr> Allocate(int device, uint64_t bytes) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Free(DevicePtr ptr) override ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status CopyHostToDevice(DevicePtr dst, const void* src, uint64_t bytes,
                                StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CopyDeviceToHost(void* dst, DevicePtr src, uint64_t bytes,
                                StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CopyDeviceToDevice(DevicePtr dst, DevicePtr src, uint64_t bytes,
                                  StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status Launch(const KernelLaunch& launch, StreamHandle stream) override
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status AddHostCallback(StreamHandle stream,
                               HostCallback callback) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // Number of live streams and events over all devices.
  int stream_count() const ABSL_LOCKS_EXCLUDED(mu_);
  int event_count() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Allocation {
    uint64_t address = 0;
    uint64_t size = 0;
    std::unique_ptr<char[]> data;
  };

  struct Device {
    DeviceInfo info;
    uint64_t used = 0;
    uint64_t next_address = 0;
    // By start address. shared_ptr: work that resolved an address keeps
    // its memory alive even when it is freed meanwhile.
    std::map<uint64_t, std::shared_ptr<Allocation>> allocations;
  };

  struct Stream {
    int device = 0;
    std::shared_ptr<SimStream> queue;
  };

  struct Event {
    int device = 0;
    std::shared_ptr<SimStream> stream;  // null until recorded
    uint64_t seq = 0;
  };

  // A resolved address: host memory kept alive by `owner`.
  struct Resolved {
    std::shared_ptr<Allocation> owner;
    char* data = nullptr;
  };

  explicit SimBackend(Options options);

  absl::StatusOr<Stream> FindStream(StreamHandle handle) const
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CheckDevice(int device) const;
  // The memory at [ptr, ptr + bytes).
  absl::StatusOr<Resolved> Resolve(DevicePtr ptr, uint64_t bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Resolved> ResolveUnlocked(DevicePtr ptr, uint64_t bytes) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Real time a copy of `bytes` takes at `gbps`.
  absl::Duration CopyTime(uint64_t bytes, double gbps) const;
  // Runs on the stream thread.
  absl::Status RunLaunch(const KernelLaunch& launch, int device,
                         SimStream* stream) const ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const Options options_;
  const int num_devices_;
  std::unique_ptr<CpuKernelTable> owned_kernels_;
  const CpuKernelTable* kernels_ = nullptr;
  std::vector<DeviceInfo> device_infos_;

  mutable absl::Mutex mu_;
  std::vector<Device> devices_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Event> events_ ABSL_GUARDED_BY(mu_);
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_BACKEND_H_
