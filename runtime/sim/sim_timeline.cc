#include "runtime/sim/sim_timeline.h"

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

}  // namespace weft::runtime
