// Virtual time for the simulated backend.
//
// The simulator schedules every piece of work on a virtual clock measured
// in microseconds. SimClock relates virtual time to real time: paced (a
// positive time scale), virtual time t is real time epoch + t * scale, and
// work finishes no earlier in real time than its virtual end; unpaced (scale
// 0), work completes as fast as the host runs it while virtual time is still
// modelled, which makes long simulations cheap and their timing exact.
//
// A Timeline is a resource with a fixed number of lanes (kernel slots of a
// device, or one copy engine): each booking occupies one lane for a duration.
// Book finds the earliest start at or after a ready time at which some lane
// is free for the whole duration, filling gaps left by earlier bookings, so
// work booked late (the host runs it late) but ready early still gets the
// idle time it would have had on a real device.
#ifndef WEFT_RUNTIME_SIM_SIM_TIMELINE_H_
#define WEFT_RUNTIME_SIM_SIM_TIMELINE_H_

#include <cstddef>
#include <map>
#include <vector>

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
};

// Not thread-safe: its owner serializes access.
class Timeline {
 public:
  // Most intervals kept per lane; beyond it the earliest are forgotten (and
  // their time counts as free), which bounds memory on unpaced runs.
  static constexpr size_t kMaxIntervalsPerLane = 4096;

  // REQUIRES: lanes >= 1.
  explicit Timeline(int lanes);

  int lanes() const { return static_cast<int>(lanes_.size()); }

  // Books `duration_us` on the lane that can start it first, at or after
  // `ready_us`, and returns the start. Zero or negative durations occupy
  // nothing and start at `ready_us`. Intervals that end before
  // `forget_before_us` are dropped first (nothing can start before it).
  double Book(double ready_us, double duration_us,
              double forget_before_us = 0);

  // Intervals currently held, over all lanes (for tests).
  size_t intervals() const;

 private:
  // Start -> end of disjoint busy intervals.
  using Lane = std::map<double, double>;

  // The earliest start >= ready at which `lane` is free for `duration`.
  static double EarliestGap(const Lane& lane, double ready, double duration);
  static void Insert(Lane& lane, double start, double end);

  std::vector<Lane> lanes_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_SIM_TIMELINE_H_
