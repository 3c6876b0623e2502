#include "runtime/sim/sim_timeline.h"

#include "absl/time/clock.h"

namespace weft::runtime {

SimClock::SimClock(double time_scale)
    : scale_(time_scale),
      epoch_(absl::Now()),
      epoch_ns_(absl::ToUnixNanos(epoch_)) {}

double SimClock::NowUs() const {
  if (scale_ <= 0) return 0;
  // Integer nanoseconds from absl's clock, as absl::Now reads it, without
  // the Duration arithmetic: every enqueue and completion reads this.
  const int64_t ns = absl::GetCurrentTimeNanos() - epoch_ns_;
  return static_cast<double>(ns) / 1000.0 / scale_;
}

absl::Time SimClock::RealTimeOf(double us) const {
  return epoch_ + absl::Microseconds(us * scale_);
}

}  // namespace weft::runtime
