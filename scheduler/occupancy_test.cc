#include "scheduler/occupancy.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace weft::scheduler {
namespace {

TEST(OccupancyUnitsTest, RoundsUpWithinTheDevice) {
  EXPECT_EQ(OccupancyUnits(1.0), kOccupancyUnits);
  EXPECT_EQ(OccupancyUnits(0.0), kOccupancyUnits);  // unset: the whole device
  EXPECT_EQ(OccupancyUnits(-1.0), kOccupancyUnits);
  EXPECT_EQ(OccupancyUnits(0.5), kOccupancyUnits / 2);
  EXPECT_EQ(OccupancyUnits(0.25), kOccupancyUnits / 4);
  EXPECT_EQ(OccupancyUnits(1e-9), 1);
  EXPECT_EQ(OccupancyUnits(0.3), 308);  // ceil(0.3 * 1024)
}

TEST(OccupancyTimelineTest, FullKernelsRunOneAtATime) {
  OccupancyTimeline t(32);
  EXPECT_EQ(t.Book(0, 10, kOccupancyUnits), 0);
  EXPECT_EQ(t.Book(0, 10, kOccupancyUnits), 10);
  EXPECT_EQ(t.Book(5, 10, kOccupancyUnits), 20);
  EXPECT_EQ(t.UnitsAt(25), kOccupancyUnits);
  EXPECT_EQ(t.UnitsAt(30), 0);
}

TEST(OccupancyTimelineTest, PartialKernelsShareTheDevice) {
  OccupancyTimeline t(32);
  const int32_t quarter = kOccupancyUnits / 4;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t.Book(0, 10, quarter), 0);
  EXPECT_EQ(t.UnitsAt(5), kOccupancyUnits);
  EXPECT_EQ(t.Book(0, 10, quarter), 10);  // the fifth waits
  // A full kernel waits for all of them.
  EXPECT_EQ(t.Book(0, 5, kOccupancyUnits), 20);
}

TEST(OccupancyTimelineTest, KernelCountIsCapped) {
  OccupancyTimeline t(2);
  EXPECT_EQ(t.Book(0, 10, 1), 0);
  EXPECT_EQ(t.Book(0, 10, 1), 0);
  EXPECT_EQ(t.Book(0, 10, 1), 10);
}

TEST(OccupancyTimelineTest, LateBookingsFillEarlierGaps) {
  OccupancyTimeline t(32);
  EXPECT_EQ(t.Book(20, 10, kOccupancyUnits), 20);
  // Ready early and short enough for the gap before it.
  EXPECT_EQ(t.Book(0, 20, kOccupancyUnits), 0);
  // Too long for any gap: after the last.
  EXPECT_EQ(t.Book(0, 5, kOccupancyUnits), 30);
  // A half kernel fits beside nothing until 35.
  EXPECT_EQ(t.Book(0, 1, kOccupancyUnits / 2), 35);
}

TEST(OccupancyTimelineTest, ZeroDurationOccupiesNothing) {
  OccupancyTimeline t(1);
  EXPECT_EQ(t.Book(0, 10, kOccupancyUnits), 0);
  EXPECT_EQ(t.Book(3, 0, kOccupancyUnits), 3);
  EXPECT_EQ(t.breakpoints(), 2u);
}

TEST(OccupancyTimelineTest, ForgottenTimeCountsAsBusy) {
  OccupancyTimeline t(32, /*max_breakpoints=*/8);
  double end = 0;
  for (int i = 0; i < 20; ++i) {
    end = t.Book(0, 1, kOccupancyUnits) + 1;
    t.Book(end + 1, 1, kOccupancyUnits);  // leaves a gap of 1 each time
  }
  EXPECT_LE(t.breakpoints(), 8u);
  // The early gaps are forgotten: a late booking cannot start before them.
  EXPECT_GE(t.Book(0, 1, kOccupancyUnits), 20.0);
  t.Book(1000, 1, kOccupancyUnits, /*forget_before_us=*/500);
  EXPECT_GE(t.EarliestStart(0, 1, 1), 500);
}

// Against a brute-force profile on a fine grid: every booking starts at
// the earliest integer time where it fits, and the profile never exceeds
// the device.
TEST(OccupancyTimelineTest, MatchesBruteForceOnRandomBookings) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const int max_kernels = 1 + static_cast<int>(rng() % 4);
    OccupancyTimeline t(max_kernels);
    constexpr int kHorizon = 4000;
    std::vector<int32_t> units(kHorizon, 0);
    std::vector<int32_t> count(kHorizon, 0);
    for (int k = 0; k < 30; ++k) {
      const int ready = static_cast<int>(rng() % 50);
      const int duration = 1 + static_cast<int>(rng() % 10);
      const int32_t u = 1 + static_cast<int32_t>(rng() % kOccupancyUnits);
      int expect = ready;
      for (;; ++expect) {
        bool fits = true;
        for (int x = expect; x < expect + duration && fits; ++x) {
          fits = units[x] + u <= kOccupancyUnits && count[x] < max_kernels;
        }
        if (fits) break;
      }
      const double start = t.Book(ready, duration, u);
      ASSERT_EQ(start, expect) << "round " << round << " booking " << k;
      for (int x = expect; x < expect + duration; ++x) {
        units[x] += u;
        ++count[x];
      }
    }
    for (int x = 0; x < 600; ++x) {
      ASSERT_EQ(t.UnitsAt(x + 0.5), units[x]) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace weft::scheduler
