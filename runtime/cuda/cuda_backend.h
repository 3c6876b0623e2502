// CudaBackend: the Backend (runtime/backend.h) on real NVIDIA GPUs.
//
// Built on the CUDA runtime API. Streams are non-blocking CUDA streams and
// events are timing-free CUDA events, both behind the Backend's opaque
// handles; memory comes from cudaMalloc; copies are cudaMemcpyAsync, with
// cudaMemcpyPeerAsync between devices (peer access is enabled where the
// hardware allows) and cudaMemsetAsync for an upload's zero tail; built-in
// ops run as the CUDA kernels of kernels.h.
// Device graphs (Backend::LaunchDeviceGraph) become CUDA graphs, captured
// once per structure, instantiated, cached and updated in place when the
// same structure returns with new parameters (cuda_graph_cache.h).
// Device loops and cases (Backend::LaunchDeviceLoop / LaunchDeviceCase)
// are CUDA graphs with conditional nodes: a WHILE node whose body is the
// loop's captured body followed by a kernel that reads the condition and
// sets the node's value, a SWITCH node with one body per branch; the GPU
// evaluates conditions and selectors with no host round trip. They need a
// driver of CUDA 12.3 or newer (supports_device_loops()); cases use SWITCH
// nodes from 12.8 and device graph launch before that or when
// Options::device_launch_cases asks for it, and loops use tail launch
// when Options::device_launch_loops does (cuda_device_control.h). Both
// run on the caller's stream; the body stream a caller hands over stays
// unused. A loop past its max_iterations fails with FAILED_PRECONDITION
// the host callbacks of its stream's error scope, on any stream, added
// after it, until ReleaseErrorScope(stream, scope). SetErrorScope only
// tracks the scope for this: CUDA cannot skip enqueued work, so the
// scope's later work still runs and only its callbacks see the failure.
//
// Every CUDA error becomes an absl::Status through cuda_status.h:
// out-of-memory is RESOURCE_EXHAUSTED, a bad handle or pointer is
// NOT_FOUND / INVALID_ARGUMENT, a fault in enqueued work reaches the host
// callbacks and synchronization calls of its stream.
//
// Host callbacks are delivered on one backend-owned thread, never on the
// CUDA driver's callback thread, so a callback may enqueue more work on this
// backend (but must not block).
//
// Copies to and from pageable host memory follow CUDA's rules: they may
// block the caller until earlier work on the stream has drained (device to
// host: until the copy itself has completed). Pinned staging buffers that
// keep them fully asynchronous belong with the memory pools.
//
// In builds without the CUDA toolkit the same header is backed by a fallback
// whose Create() answers UNAVAILABLE, so callers need no conditional code.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_CUDA_CUDA_BACKEND_H_
#define WEFT_RUNTIME_CUDA_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "runtime/backend.h"

namespace weft::runtime {

// The number of CUDA devices this process can use; 0 when there are none,
// when the driver is missing or too old, or in builds without CUDA. Never
// fails. For choosing a backend automatically.
int VisibleCudaDevices();

class CudaBackend : public Backend {
 public:
  struct Options {
    // Device cases by device graph launch rather than SWITCH nodes: the
    // branches are device-launchable executable graphs, and a kernel reads
    // the selector and launches the chosen one from the device.
    bool device_launch_cases = false;
    // Device loops by tail launch rather than WHILE nodes: the body is a
    // device-launchable executable graph that relaunches itself from the
    // device while the condition holds.
    bool device_launch_loops = false;
  };

  // A backend over every visible CUDA device (CUDA_VISIBLE_DEVICES applies).
  // UNAVAILABLE when no device is visible or the build has no CUDA.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create();
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(
      const Options& options);

  // Backend::LaunchDeviceCase by device graph launch, whatever the options
  // say (for comparisons). `choice` as for LaunchDeviceCase.
  virtual absl::Status LaunchDeviceCaseByDeviceLaunch(const DeviceCase& choice,
                                                      StreamHandle stream) = 0;

  // Backend::LaunchDeviceLoop by tail launch, whatever the options say.
  virtual absl::Status LaunchDeviceLoopByTailLaunch(const DeviceLoop& loop,
                                                    StreamHandle stream) = 0;

  // Counters of the device graph cache: captures instantiated, launches
  // of a cached executable graph, of those the ones with new parameters
  // updated in place, and evictions; graphs cached now.
  struct GraphCacheStats {
    uint64_t instantiations = 0;
    uint64_t cache_hits = 0;
    uint64_t updates = 0;
    uint64_t evictions = 0;
    int cached = 0;
  };
  virtual GraphCacheStats graph_cache_stats() const = 0;

  // Counters of the device loop and case executables: built (misses and
  // rebuilds), launches of a cached one, of those the ones updated in
  // place with new parameters; executables cached now.
  struct DeviceControlStats {
    uint64_t instantiations = 0;
    uint64_t cache_hits = 0;
    uint64_t updates = 0;
    int cached = 0;
  };
  virtual DeviceControlStats device_control_stats() const = 0;

  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;
  // Waits for all work enqueued through this backend (and its host
  // callbacks) to finish, then releases its streams, events and memory.
  ~CudaBackend() override = default;

 protected:
  CudaBackend() = default;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_CUDA_CUDA_BACKEND_H_
