// CudaBackend: the Backend (runtime/backend.h) on real NVIDIA GPUs.
//
// Built on the CUDA runtime API. Streams are non-blocking CUDA streams and
// events are timing-free CUDA events, both behind the Backend's opaque
// handles; memory comes from cudaMalloc; copies are cudaMemcpyAsync, with
// cudaMemcpyPeerAsync between devices (peer access is enabled where the
// hardware allows); built-in ops run as the CUDA kernels of kernels.h.
// Device graphs (Backend::LaunchDeviceGraph) become CUDA graphs, captured
// once per structure, instantiated, cached and updated in place when the
// same structure returns with new parameters (cuda_graph_cache.h).
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
  // A backend over every visible CUDA device (CUDA_VISIBLE_DEVICES applies).
  // UNAVAILABLE when no device is visible or the build has no CUDA.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create();

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
