// PinnedStaging: page-locked host chunks that downloads go through.
//
// A copy from the device into pageable memory is synchronous on the
// calling thread and staged by the driver at a fraction of the link's
// speed; into page-locked memory it is asynchronous and runs at the link's
// speed. Download takes one chunk and moves the bytes through it a chunk at
// a time: each piece is copied into the chunk on the stream, then out of it
// by a stream callback (which the stream waits for, so the next piece
// cannot overwrite it early); the last callback gives the chunk back.
//
// Chunks are allocated on first need and kept for reuse, at most
// `max_chunks` of them. Thread-safe. The owner destroys it only once no
// enqueued download uses its chunks (after synchronizing the devices).
#ifndef WEFT_RUNTIME_CUDA_PINNED_STAGING_H_
#define WEFT_RUNTIME_CUDA_PINNED_STAGING_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace weft::runtime::cuda {

class PinnedStaging {
 public:
  PinnedStaging(uint64_t chunk_bytes, int max_chunks)
      : chunk_bytes_(chunk_bytes), max_chunks_(max_chunks) {}
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  uint64_t chunk_bytes() const { return chunk_bytes_; }

  // Enqueues the copy of `bytes` from device memory `src` to host memory
  // `dst` on `stream` (whose device is current); `dst` must stay valid
  // until the stream has done it. False, with nothing enqueued, when no
  // chunk is free and no more may be allocated: the caller copies some
  // other way. On an error part of the copy may have been enqueued; the
  // chunk comes back once that part is done.
  absl::StatusOr<bool> Download(void* dst, const void* src, uint64_t bytes,
                                cudaStream_t stream) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  char* Acquire() ABSL_LOCKS_EXCLUDED(mu_);
  void Release(char* chunk) ABSL_LOCKS_EXCLUDED(mu_);
  // The stream callback of one piece: copies it out (unless the stream
  // failed) and, after the last piece, gives the chunk back.
  static void CUDART_CB CopyOut(cudaStream_t stream, cudaError_t result,
                                void* piece);

  const uint64_t chunk_bytes_;
  const int max_chunks_;
  mutable absl::Mutex mu_;
  std::vector<char*> free_ ABSL_GUARDED_BY(mu_);
  std::vector<char*> all_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_PINNED_STAGING_H_
