// DeviceReservations: device memory promised to running jobs, so that the
// job manager starts a job only where its buffers fit beside theirs.
//
// A job's need (JobDeviceBytes) is, per device, its plan's arena where the
// plan has a memory plan (Plan::memory), and otherwise the buffers its
// device nodes and copies use there, each allocated by itself
// (memory::BytesWithoutReuse); plus, either way, what control nodes'
// bodies planned over other devices allocate there by themselves
// (memory::BodyBytesBeyondPlan). A job fits when, on every device, what the
// running jobs reserved plus its need is at most the device's memory. The
// manager starts a job that does not fit only when no job runs (it then has
// every device to itself), and otherwise leaves it at the head of the
// queue until enough running jobs end: no later job takes memory it waits
// for, so a large job is never starved by a stream of small ones. Another
// tenant's job may start meanwhile where it leaves that job's wait as it
// is (FitsBeside: nothing on the devices it waits for, and room for it kept
// on the others).
//
// Not thread-safe: the job manager calls it under its lock.
#ifndef WEFT_SERVER_DEVICE_RESERVATIONS_H_
#define WEFT_SERVER_DEVICE_RESERVATIONS_H_

#include <cstdint>
#include <vector>

#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::server {

// Bytes the job of `plan` holds on each of `num_devices` devices while it
// runs (see the header comment).
std::vector<int64_t> JobDeviceBytes(const scheduler::Graph& graph,
                                    const scheduler::Plan& plan,
                                    int num_devices);

class DeviceReservations {
 public:
  // `capacity_bytes`: each device's memory; a device without an entry, or
  // with 0, has no bound.
  explicit DeviceReservations(std::vector<int64_t> capacity_bytes)
      : capacity_(std::move(capacity_bytes)), reserved_(capacity_.size(), 0) {}

  // Whether `need` fits beside what is reserved, on every bounded device.
  bool Fits(const std::vector<int64_t>& need) const;
  void Reserve(const std::vector<int64_t>& need);
  // REQUIRES: `need` was reserved and not released since.
  void Release(const std::vector<int64_t>& need);

  // Each device's memory (0: no bound).
  int64_t capacity(int device) const {
    return device >= 0 && device < static_cast<int>(capacity_.size())
               ? capacity_[device]
               : 0;
  }
  // The first device on which `need` does not fit, or -1.
  int FirstShort(const std::vector<int64_t>& need) const;
  // Whether `need` can be reserved now without delaying `waiting` (a need
  // that does not fit): it takes nothing on a device where `waiting` does
  // not fit, and fits beside both the reservations and `waiting` on every
  // other bounded device. Once it is reserved, `waiting` still fits
  // wherever it fitted before.
  bool FitsBeside(const std::vector<int64_t>& waiting,
                  const std::vector<int64_t>& need) const;
  // What running jobs reserved, by device.
  const std::vector<int64_t>& reserved() const { return reserved_; }
  // Changes with every Reserve and Release.
  uint64_t version() const { return version_; }
  // What running jobs reserved on `device` (0 for an unknown device).
  int64_t reserved(int device) const {
    return device >= 0 && device < static_cast<int>(reserved_.size())
               ? reserved_[device]
               : 0;
  }

 private:
  const std::vector<int64_t> capacity_;
  std::vector<int64_t> reserved_;
  uint64_t version_ = 0;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_DEVICE_RESERVATIONS_H_
