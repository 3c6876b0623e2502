// ReportSlots: pinned, mapped host memory where device loops and cases
// report what they did (a ControlState per launch in flight, written by
// the report kernel, read by the host callback after it; a launch with
// controls nested in it takes a run of consecutive slots, one per
// control). Slots come in chunks and are reused; all are freed with the
// pool.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_CUDA_REPORT_SLOTS_H_
#define WEFT_RUNTIME_CUDA_REPORT_SLOTS_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/cuda/control_kernels.h"

namespace weft::runtime::cuda {

class ReportSlots {
 public:
  ReportSlots() = default;
  // Frees every chunk: no slot may be in use.
  ~ReportSlots();
  ReportSlots(const ReportSlots&) = delete;
  ReportSlots& operator=(const ReportSlots&) = delete;

  // `count` (>= 1) consecutive free slots, reset to ControlState{};
  // allocates a chunk when none are free.
  absl::StatusOr<ControlState*> Acquire(int count = 1) ABSL_LOCKS_EXCLUDED(mu_);
  // Gives back slots taken by Acquire(count) with the same count.
  void Release(ControlState* slot, int count = 1) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  std::vector<void*> chunks_ ABSL_GUARDED_BY(mu_);
  // Free runs of slots, by their length.
  absl::flat_hash_map<int, std::vector<ControlState*>> free_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_REPORT_SLOTS_H_
