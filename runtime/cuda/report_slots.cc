#include "runtime/cuda/report_slots.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
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

absl::StatusOr<ControlState*> ReportSlots::Acquire(int count) {
  if (count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("report slots: count must be >= 1, got ", count));
  }
  absl::MutexLock lock(&mu_);
  std::vector<ControlState*>& free = free_[count];
  if (free.empty()) {
    const int runs = std::max(1, kSlotsPerChunk / count);
    void* chunk = nullptr;
    // Mapped and portable: under unified addressing the host address is
    // valid on every device.
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaHostAlloc(&chunk, sizeof(ControlState) * runs * count,
                      cudaHostAllocMapped | cudaHostAllocPortable));
    chunks_.push_back(chunk);
    ControlState* slots = static_cast<ControlState*>(chunk);
    for (int i = runs - 1; i >= 0; --i) free.push_back(&slots[i * count]);
  }
  ControlState* slot = free.back();
  free.pop_back();
  for (int i = 0; i < count; ++i) slot[i] = ControlState{};
  return slot;
}

void ReportSlots::Release(ControlState* slot, int count) {
  absl::MutexLock lock(&mu_);
  free_[count].push_back(slot);
}

}  // namespace weft::runtime::cuda
