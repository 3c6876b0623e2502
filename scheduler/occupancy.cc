#include "scheduler/occupancy.h"

#include <algorithm>
#include <cmath>

namespace weft::scheduler {

int32_t OccupancyUnits(double occupancy) {
  if (!(occupancy > 0) || occupancy >= 1) return kOccupancyUnits;
  const double units = std::ceil(occupancy * kOccupancyUnits);
  return std::max<int32_t>(1, static_cast<int32_t>(units));
}

OccupancyTimeline::OccupancyTimeline(int max_kernels, size_t max_breakpoints)
    : max_kernels_(std::max(1, max_kernels)),
      max_breakpoints_(std::max<size_t>(4, max_breakpoints)) {}

ptrdiff_t OccupancyTimeline::SegmentAt(double t) const {
  // The common cases book at or shortly before the last breakpoint.
  const ptrdiff_t n = static_cast<ptrdiff_t>(time_.size());
  for (ptrdiff_t k = n - 1; k >= 0 && k >= n - 8; --k) {
    if (time_[k] <= t) return k;
  }
  auto it = std::upper_bound(time_.begin(), time_.end(), t);
  return (it - time_.begin()) - 1;
}

double OccupancyTimeline::EarliestStart(double ready_us, double duration_us,
                                        int32_t units) const {
  if (!(duration_us > 0)) return ready_us;
  units = std::clamp<int32_t>(units, 1, kOccupancyUnits);
  double t = std::max(ready_us, floor_us_);
  const ptrdiff_t at = SegmentAt(t);
  const size_t n = time_.size();
  // The last segment is always idle, so a conflict has a next breakpoint.
  for (size_t k = at < 0 ? 0 : static_cast<size_t>(at);
       k < n && time_[k] < t + duration_us; ++k) {
    if (units_[k] + units > kOccupancyUnits || count_[k] >= max_kernels_) {
      t = time_[k + 1];
    }
  }
  return t;
}

size_t OccupancyTimeline::Split(double t) {
  const ptrdiff_t at = SegmentAt(t);
  if (at >= 0 && time_[at] == t) return static_cast<size_t>(at);
  const size_t pos = static_cast<size_t>(at + 1);
  const int32_t units = at >= 0 ? units_[at] : 0;
  const int32_t count = at >= 0 ? count_[at] : 0;
  time_.insert(time_.begin() + pos, t);
  units_.insert(units_.begin() + pos, units);
  count_.insert(count_.begin() + pos, count);
  return pos;
}

void OccupancyTimeline::Forget(double before_us) {
  floor_us_ = std::max(floor_us_, before_us);
  // Drop the segments that end at or before the floor.
  size_t drop = 0;
  while (drop + 1 < time_.size() && time_[drop + 1] <= floor_us_) ++drop;
  if (drop == 0) return;
  time_.erase(time_.begin(), time_.begin() + drop);
  units_.erase(units_.begin(), units_.begin() + drop);
  count_.erase(count_.begin(), count_.begin() + drop);
}

double OccupancyTimeline::Book(double ready_us, double duration_us,
                               int32_t units, double forget_before_us) {
  if (forget_before_us > floor_us_) Forget(forget_before_us);
  if (!(duration_us > 0)) return ready_us;
  units = std::clamp<int32_t>(units, 1, kOccupancyUnits);
  const double start = EarliestStart(ready_us, duration_us, units);
  const double end = start + duration_us;
  const size_t first = Split(start);
  const size_t last = Split(end);
  for (size_t k = first; k < last; ++k) {
    units_[k] += units;
    count_[k] += 1;
  }
  // Merge equal neighbours at both ends to keep the profile short.
  auto merge_into_previous = [this](size_t k) {
    if (k == 0 || k >= time_.size()) return false;
    if (units_[k] != units_[k - 1] || count_[k] != count_[k - 1]) return false;
    time_.erase(time_.begin() + k);
    units_.erase(units_.begin() + k);
    count_.erase(count_.begin() + k);
    return true;
  };
  const bool merged_last = merge_into_previous(last);
  (void)merged_last;
  merge_into_previous(first);
  if (time_.size() > max_breakpoints_) {
    // Drop the earliest quarter at once; the time before what is left
    // counts as busy.
    const size_t keep = max_breakpoints_ - max_breakpoints_ / 4;
    const size_t drop = time_.size() - keep;
    floor_us_ = std::max(floor_us_, time_[drop]);
    time_.erase(time_.begin(), time_.begin() + drop);
    units_.erase(units_.begin(), units_.begin() + drop);
    count_.erase(count_.begin(), count_.begin() + drop);
  }
  return start;
}

int32_t OccupancyTimeline::UnitsAt(double us) const {
  const ptrdiff_t at = SegmentAt(us);
  return at < 0 ? 0 : units_[at];
}

}  // namespace weft::scheduler
