#include "runtime/cuda/pinned_staging.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "runtime/cuda/cuda_status.h"

namespace weft::runtime::cuda {
namespace {

struct Piece {
  PinnedStaging* staging = nullptr;
  char* chunk = nullptr;
  char* to = nullptr;  // null: only give the chunk back
  uint64_t bytes = 0;
  bool last = false;
};

}  // namespace

PinnedStaging::~PinnedStaging() {
  absl::MutexLock lock(&mu_);
  for (char* chunk : all_) (void)cudaFreeHost(chunk);
  (void)cudaGetLastError();
}

char* PinnedStaging::Acquire() {
  absl::MutexLock lock(&mu_);
  if (!free_.empty()) {
    char* chunk = free_.back();
    free_.pop_back();
    return chunk;
  }
  if (static_cast<int>(all_.size()) >= max_chunks_) return nullptr;
  void* chunk = nullptr;
  if (cudaHostAlloc(&chunk, chunk_bytes_, cudaHostAllocPortable) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  all_.push_back(static_cast<char*>(chunk));
  return static_cast<char*>(chunk);
}

void PinnedStaging::Release(char* chunk) {
  absl::MutexLock lock(&mu_);
  free_.push_back(chunk);
}

void CUDART_CB PinnedStaging::CopyOut(cudaStream_t /*stream*/,
                                      cudaError_t result, void* data) {
  std::unique_ptr<Piece> piece(static_cast<Piece*>(data));
  if (result == cudaSuccess && piece->to != nullptr) {
    std::memcpy(piece->to, piece->chunk, piece->bytes);
  }
  if (piece->last) piece->staging->Release(piece->chunk);
}

absl::StatusOr<bool> PinnedStaging::Download(void* dst, const void* src,
                                             uint64_t bytes,
                                             cudaStream_t stream) {
  char* chunk = Acquire();
  if (chunk == nullptr) return false;
  auto enqueue = [&](std::unique_ptr<Piece> piece) -> cudaError_t {
    const cudaError_t result =
        cudaStreamAddCallback(stream, &CopyOut, piece.get(), 0);
    if (result == cudaSuccess) piece.release();  // the callback owns it
    return result;
  };
  for (uint64_t offset = 0; offset < bytes; offset += chunk_bytes_) {
    const uint64_t n = std::min(chunk_bytes_, bytes - offset);
    const bool last = offset + n == bytes;
    cudaError_t result =
        cudaMemcpyAsync(chunk, static_cast<const char*>(src) + offset, n,
                        cudaMemcpyDeviceToHost, stream);
    if (result == cudaSuccess) {
      result = enqueue(std::unique_ptr<Piece>(
          new Piece{this, chunk, static_cast<char*>(dst) + offset, n, last}));
    }
    if (result != cudaSuccess) {
      const absl::Status status = WEFT_CUDA_STATUS(result);
      if (offset == 0) {
        Release(chunk);
      } else if (enqueue(std::unique_ptr<Piece>(new Piece{
                     this, chunk, nullptr, 0, true})) != cudaSuccess) {
        (void)cudaGetLastError();  // the chunk stays taken
      }
      return status;
    }
  }
  if (bytes == 0) Release(chunk);
  return true;
}

}  // namespace weft::runtime::cuda
