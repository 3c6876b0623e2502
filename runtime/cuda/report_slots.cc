#include "runtime/cuda/report_slots.h"

#include <cuda_runtime_api.h>

#include "runtime/cuda/cuda_status.h"

namespace weft::runtime::cuda {
namespace {

// Report slots are allocated this many at a time.
constexpr int kSlotsPerChunk = 256;

}  // namespace

ReportSlots::~ReportSlots() {
  absl::MutexLock lock(&mu_);
  for (void* chunk : chunks_) (void)cudaFreeHost(chunk);
  (void)cudaGetLastError();
}

absl::StatusOr<ControlState*> ReportSlots::Acquire() {
  absl::MutexLock lock(&mu_);
  if (free_.empty()) {
    void* chunk = nullptr;
    // Mapped and portable: under unified addressing the host address is
    // valid on every device.
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaHostAlloc(&chunk, sizeof(ControlState) * kSlotsPerChunk,
                      cudaHostAllocMapped | cudaHostAllocPortable));
    chunks_.push_back(chunk);
    ControlState* slots = static_cast<ControlState*>(chunk);
    for (int i = kSlotsPerChunk - 1; i >= 0; --i) free_.push_back(&slots[i]);
  }
  ControlState* slot = free_.back();
  free_.pop_back();
  *slot = ControlState{};
  return slot;
}

void ReportSlots::Release(ControlState* slot) {
  absl::MutexLock lock(&mu_);
  free_.push_back(slot);
}

}  // namespace weft::runtime::cuda
