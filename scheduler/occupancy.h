// Occupancy: how kernels share one device.
//
// A device's throughput is kOccupancyUnits units. A kernel of occupancy o
// (weft.v1.Cost.occupancy, in (0, 1]) keeps OccupancyUnits(o) of them busy
// for its whole cost, and runs at full speed: kernels on one device run side
// by side while their units add up to at most kOccupancyUnits and there are
// at most `max_kernels` of them (the device's hardware work queues). A
// kernel that does not fit starts when enough of the device frees up, as
// its thread blocks would be scheduled on a real GPU as the blocks before
// them retire. A kernel that fills the GPU (occupancy 1, the default) thus
// runs alone, and the device's work is conserved: its busy time is at least
// the sum of occupancy x cost over its kernels.
//
// OccupancyTimeline books kernels on one device in the order they are
// given, each at the earliest time at or after it is ready at which it fits
// for its whole duration, filling gaps left by earlier bookings. The
// planner's cost model (cost_model.h) and the simulated backend
// (runtime/sim) book the same kernels in the same order on it, so a plan's
// estimated times are what the simulated device runs.
#ifndef WEFT_SCHEDULER_OCCUPANCY_H_
#define WEFT_SCHEDULER_OCCUPANCY_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::scheduler {

// Units of throughput of one device.
inline constexpr int32_t kOccupancyUnits = 1024;

// The units a kernel of `occupancy` keeps busy: occupancy x
// kOccupancyUnits rounded up, at least 1 and at most kOccupancyUnits.
// Occupancy 0, negative or not a number counts as 1 (the whole device).
int32_t OccupancyUnits(double occupancy);

// The occupancy `units` stand for.
inline double OccupancyOf(int32_t units) {
  return static_cast<double>(units) / kOccupancyUnits;
}

// The booked use of one device's kernel capacity over time: a step
// function, as sorted breakpoints. Not thread-safe: its owner serializes
// access.
class OccupancyTimeline {
 public:
  // Breakpoints kept by default; beyond them the earliest are dropped and
  // the time before the first one left counts as busy (nothing is booked
  // there any more), which bounds memory on long runs.
  static constexpr size_t kDefaultMaxBreakpoints = size_t{1} << 14;

  // REQUIRES: max_kernels >= 1, max_breakpoints >= 4.
  explicit OccupancyTimeline(int max_kernels,
                             size_t max_breakpoints = kDefaultMaxBreakpoints);

  int max_kernels() const { return max_kernels_; }

  // The earliest start at or after `ready_us` at which a kernel of `units`
  // fits for `duration_us`. Books nothing. Zero or negative durations
  // occupy nothing and start at `ready_us`.
  double EarliestStart(double ready_us, double duration_us,
                       int32_t units) const;

  // Books a kernel of `units` for `duration_us` at EarliestStart and
  // returns the start. Breakpoints before `forget_before_us` are dropped
  // first (nothing can start before it).
  double Book(double ready_us, double duration_us, int32_t units,
              double forget_before_us = 0);

  // Units in use at time `us` (for tests).
  int32_t UnitsAt(double us) const;
  // Breakpoints held (for tests).
  size_t breakpoints() const { return time_.size(); }

 private:
  // Index of the segment holding time t (the last breakpoint <= t), or -1
  // when t is before the first breakpoint.
  ptrdiff_t SegmentAt(double t) const;
  // Makes `t` a breakpoint; returns its index.
  size_t Split(double t);
  void Forget(double before_us);

  const int max_kernels_;
  const size_t max_breakpoints_;
  // Nothing starts before this time (earlier breakpoints were dropped).
  double floor_us_ = 0;
  // Breakpoint i: from time_[i] until time_[i + 1] (or for ever, for the
  // last) units_[i] units and count_[i] kernels are busy. Before time_[0]
  // the device is idle.
  std::vector<double> time_;
  std::vector<int32_t> units_;
  std::vector<int32_t> count_;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_OCCUPANCY_H_
