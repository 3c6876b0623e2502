#include "runtime/sim/sim_timeline.h"

#include <algorithm>
#include <iterator>

#include "absl/time/clock.h"

namespace weft::runtime {

SimClock::SimClock(double time_scale)
    : scale_(time_scale), epoch_(absl::Now()) {}

double SimClock::NowUs() const {
  if (scale_ <= 0) return 0;
  return absl::ToDoubleMicroseconds(absl::Now() - epoch_) / scale_;
}

absl::Time SimClock::RealTimeOf(double us) const {
  return epoch_ + absl::Microseconds(us * scale_);
}

Timeline::Timeline(int lanes) : lanes_(std::max(1, lanes)) {}

size_t Timeline::intervals() const {
  size_t n = 0;
  for (const Lane& lane : lanes_) n += lane.size();
  return n;
}

double Timeline::EarliestGap(const Lane& lane, double ready,
                             double duration) {
  double start = ready;
  auto it = lane.upper_bound(ready);
  if (it != lane.begin()) {
    auto prev = std::prev(it);
    start = std::max(start, prev->second);
  }
  // Walk the later intervals until one leaves room before it.
  for (; it != lane.end() && it->first < start + duration; ++it) {
    start = std::max(start, it->second);
  }
  return start;
}

void Timeline::Insert(Lane& lane, double start, double end) {
  auto next = lane.lower_bound(start);
  // Merge with a neighbour that touches, to keep lanes short.
  if (next != lane.begin()) {
    auto prev = std::prev(next);
    if (prev->second == start) {
      start = prev->first;
      lane.erase(prev);
    }
  }
  if (next != lane.end() && next->first == end) {
    end = next->second;
    next = lane.erase(next);
  }
  lane.emplace_hint(next, start, end);
  if (lane.size() > kMaxIntervalsPerLane) lane.erase(lane.begin());
}

double Timeline::Book(double ready_us, double duration_us,
                      double forget_before_us) {
  if (!(duration_us > 0)) return ready_us;
  size_t best = 0;
  double best_start = 0;
  for (size_t i = 0; i < lanes_.size(); ++i) {
    Lane& lane = lanes_[i];
    while (!lane.empty() && lane.begin()->second < forget_before_us) {
      lane.erase(lane.begin());
    }
    const double start = EarliestGap(lane, ready_us, duration_us);
    if (i == 0 || start < best_start) {
      best = i;
      best_start = start;
      if (start == ready_us) break;  // cannot do better
    }
  }
  Insert(lanes_[best], best_start, best_start + duration_us);
  return best_start;
}

}  // namespace weft::runtime
