#include "runtime/sim/sim_timeline.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

TEST(SimClockTest, UnpacedClockStaysAtZero) {
  SimClock clock(0);
  EXPECT_FALSE(clock.paced());
  EXPECT_EQ(clock.NowUs(), 0);
}

TEST(SimClockTest, PacedClockFollowsRealTimeOverScale) {
  SimClock clock(2.0);  // two real microseconds per virtual one
  EXPECT_TRUE(clock.paced());
  absl::SleepFor(absl::Milliseconds(4));
  const double now = clock.NowUs();
  EXPECT_GE(now, 2000);
  EXPECT_LT(now, 2000 + 500000);  // generous: the machine may be loaded
  EXPECT_EQ(clock.RealTimeOf(1000) - clock.RealTimeOf(0),
            absl::Milliseconds(2));
}

}  // namespace
}  // namespace weft::runtime
