// Virtual time for the simulated backend.
//
// The simulator schedules every piece of work on a virtual clock measured
// in microseconds. SimClock relates virtual time to real time: paced (a
// positive time scale), virtual time t is real time epoch + t * scale, and
// work finishes no earlier in real time than its virtual end; unpaced (scale
// 0), work completes as fast as the host runs it while virtual time is still
// modelled, which makes long simulations cheap and their timing exact.
//
// What work occupies on a device (its kernel capacity and copy engines) is
// booked on scheduler::OccupancyTimeline (scheduler/occupancy.h), the same
// booking the planner's cost model makes (sim_device_model.h).
#ifndef WEFT_RUNTIME_SIM_SIM_TIMELINE_H_
#define WEFT_RUNTIME_SIM_SIM_TIMELINE_H_

#include <cstdint>

#include "absl/time/time.h"

namespace weft::runtime {

// Thread-safe (immutable).
class SimClock {
 public:
  // `time_scale`: real time per unit of virtual time; 0 is unpaced.
  // REQUIRES: time_scale >= 0 and finite.
  explicit SimClock(double time_scale);

  bool paced() const { return scale_ > 0; }
  double time_scale() const { return scale_; }
  // Paced: virtual microseconds since construction. Unpaced: 0 (virtual
  // time only advances through the work scheduled on it).
  double NowUs() const;
  // Paced: the real time at which virtual time `us` is reached.
  absl::Time RealTimeOf(double us) const;

 private:
  const double scale_;
  const absl::Time epoch_;
  const int64_t epoch_ns_;  // epoch_ in nanoseconds since the Unix epoch
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_TIMELINE_H_
