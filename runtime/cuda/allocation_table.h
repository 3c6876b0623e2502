// AllocationTable: the live device allocations of a backend, by device and
// start address, so that copies and launches can check that the ranges
// they touch lie inside one allocation (plain C++; no CUDA).
//
// Thread-safe.
#ifndef WEFT_RUNTIME_CUDA_ALLOCATION_TABLE_H_
#define WEFT_RUNTIME_CUDA_ALLOCATION_TABLE_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/backend.h"

namespace weft::runtime::cuda {

class AllocationTable {
 public:
  // Records [start, start + bytes) on start.device.
  void Add(DevicePtr start, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the allocation that starts at `start`; INVALID_ARGUMENT when
  // no allocation of start.device starts there.
  absl::Status Remove(DevicePtr start) ABSL_LOCKS_EXCLUDED(mu_);
  // OK when [ptr, ptr + bytes) lies inside one live allocation of
  // ptr.device; INVALID_ARGUMENT naming `what` otherwise.
  absl::Status CheckRange(DevicePtr ptr, uint64_t bytes,
                          absl::string_view what) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets every allocation and returns their starts, by address.
  std::vector<DevicePtr> TakeAll() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    int device = -1;
    uint64_t bytes = 0;
  };

  mutable absl::Mutex mu_;
  // Keyed by start address, ordered for range lookups.
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_ALLOCATION_TABLE_H_
