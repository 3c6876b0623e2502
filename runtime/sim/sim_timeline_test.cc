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

TEST(TimelineTest, OneLaneSerializes) {
  Timeline t(1);
  EXPECT_EQ(t.Book(0, 10), 0);
  EXPECT_EQ(t.Book(0, 10), 10);
  EXPECT_EQ(t.Book(5, 10), 20);
  EXPECT_EQ(t.Book(100, 10), 100);
}

TEST(TimelineTest, ZeroDurationOccupiesNothing) {
  Timeline t(1);
  EXPECT_EQ(t.Book(0, 10), 0);
  EXPECT_EQ(t.Book(3, 0), 3);
  EXPECT_EQ(t.intervals(), 1u);
}

TEST(TimelineTest, LateBookingFillsAnEarlierGap) {
  Timeline t(1);
  EXPECT_EQ(t.Book(100, 50), 100);  // [100, 150)
  EXPECT_EQ(t.Book(0, 60), 0);      // fits before it
  EXPECT_EQ(t.Book(0, 60), 150);    // [60, 100) is too short
  EXPECT_EQ(t.Book(0, 40), 60);     // but this fits
}

TEST(TimelineTest, LanesRunConcurrently) {
  Timeline t(3);
  EXPECT_EQ(t.Book(0, 10), 0);
  EXPECT_EQ(t.Book(0, 10), 0);
  EXPECT_EQ(t.Book(0, 10), 0);
  EXPECT_EQ(t.Book(0, 10), 10);  // the fourth waits for a lane
  EXPECT_EQ(t.lanes(), 3);
}

TEST(TimelineTest, AdjacentIntervalsMerge) {
  Timeline t(1);
  for (int i = 0; i < 100; ++i) t.Book(0, 1);
  EXPECT_EQ(t.intervals(), 1u);
  EXPECT_EQ(t.Book(0, 1), 100);
}

TEST(TimelineTest, ForgetsIntervalsBeforeTheHorizon) {
  Timeline t(1);
  t.Book(0, 10);
  t.Book(20, 10);
  EXPECT_EQ(t.intervals(), 2u);
  EXPECT_EQ(t.Book(40, 5, /*forget_before_us=*/35), 40);
  EXPECT_EQ(t.intervals(), 1u);
}

TEST(TimelineTest, BoundsItsMemory) {
  Timeline t(1);
  // Disjoint intervals with gaps between them never merge.
  for (int i = 0; i < 10000; ++i) t.Book(i * 10.0, 1);
  EXPECT_LE(t.intervals(), Timeline::kMaxIntervalsPerLane);
}

}  // namespace
}  // namespace weft::runtime
