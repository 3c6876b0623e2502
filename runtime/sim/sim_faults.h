// Launch faults injected into the simulated backend.
//
// A fault fails one kernel launch: the nth Launch call counted from when
// the fault is armed, on one device or (device -1) on any device. The
// count is of Launch calls in the order they were made, not of the order
// in which the work runs; Next counts every launch and answers the fault
// it hits, if any, which the launch's work then returns instead of
// running. Counting costs two atomic increments; only a backend with
// faults armed takes the lock.
//
// Thread-safe.
#ifndef WEFT_RUNTIME_SIM_SIM_FAULTS_H_
#define WEFT_RUNTIME_SIM_SIM_FAULTS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace weft::runtime {

// Fails one kernel launch: the nth Launch call counted from when the
// fault is armed, on `device` or (device -1) on any device.
struct SimLaunchFault {
  int device = -1;
  uint64_t nth = 1;
  absl::Status status = absl::InternalError("injected launch fault");
};

class SimFaults {
 public:
  explicit SimFaults(int num_devices);

  SimFaults(const SimFaults&) = delete;
  SimFaults& operator=(const SimFaults&) = delete;

  // Arms `fault`. INVALID_ARGUMENT for a device out of range, nth 0 or an
  // OK status.
  absl::Status Inject(SimLaunchFault fault) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts a launch of `op` on `device`; the fault it hits, or OK.
  absl::Status Next(int device, absl::string_view op) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Armed {
    int device = -1;
    uint64_t at = 0;  // the launch count that fails
    absl::Status status;
  };
  // Counted by the threads that launch: each on a cache line of its own.
  struct alignas(64) Counter {
    std::atomic<uint64_t> launches{0};
  };

  // Constant after construction.
  const int num_devices_;
  std::unique_ptr<Counter[]> per_device_;

  alignas(64) std::atomic<uint64_t> total_{0};
  std::atomic<bool> armed_{false};
  absl::Mutex mu_;
  std::vector<Armed> faults_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_FAULTS_H_
