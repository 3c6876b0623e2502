#include "scheduler/lower_bound_terms.h"

#include <vector>

#include "gtest/gtest.h"
#include "scheduler/topology.h"

namespace weft::scheduler::bounds {
namespace {

TEST(LowerBoundTermsTest, FastestHostLink) {
  const Topology topology = Topology::Default(2);
  // 25 GB/s: 25000 bytes a microsecond.
  EXPECT_DOUBLE_EQ(FastestHostLinkUs(topology, 2, 2500000, false), 100);
  EXPECT_DOUBLE_EQ(FastestHostLinkUs(topology, 2, 2500000, true), 100);
}

TEST(LowerBoundTermsTest, DeliveryBoundTakesTheBestPrefix) {
  // Three uploads of 100 us on one engine: the last of them ends at 300
  // at the earliest, and whichever it is still has 10 us to go; the one
  // with 500 us to go ends at least 100 us in.
  std::vector<Job> jobs = {{100, 10}, {100, 500}, {100, 10}};
  EXPECT_DOUBLE_EQ(DeliveryBound(jobs, 1), 600);
  jobs = {{100, 10}, {100, 20}, {100, 10}};
  EXPECT_DOUBLE_EQ(DeliveryBound(jobs, 1), 310);
  // Over two engines the three take 150 us of each engine's time.
  jobs = {{100, 10}, {100, 20}, {100, 10}};
  EXPECT_DOUBLE_EQ(DeliveryBound(jobs, 2), 160);
}

TEST(LowerBoundTermsTest, ReleaseBoundCountsTheLateJobs) {
  // Downloads released at 0, 50 and 50: the two late ones take 200 us
  // after 50 on one engine.
  std::vector<Job> jobs = {{100, 0}, {100, 50}, {100, 50}};
  EXPECT_DOUBLE_EQ(ReleaseBound(jobs, 1), 300);
  jobs = {{100, 0}, {100, 250}};
  EXPECT_DOUBLE_EQ(ReleaseBound(jobs, 1), 350);
}

TEST(LowerBoundTermsTest, WindowedWorkWeighsTheKernelsInAWindow) {
  // Four full kernels of 100 us after a head of 50, two more with no head
  // but a long tail: on two devices the four take 200 us after 50.
  std::vector<KernelSpan> spans = {{50, 0, 100, 100}, {50, 0, 100, 100},
                                   {50, 0, 100, 100}, {50, 0, 100, 100},
                                   {0, 1000, 10, 10}, {0, 1000, 10, 10}};
  EXPECT_DOUBLE_EQ(WindowedWork(spans, 2, 32), 1010);
  spans = {{50, 0, 100, 100},
           {50, 0, 100, 100},
           {50, 0, 100, 100},
           {50, 0, 100, 100}};
  EXPECT_DOUBLE_EQ(WindowedWork(spans, 2, 32), 250);
  // Small kernels: at most `slots` at once.
  spans = {{0, 0, 1, 100}, {0, 0, 1, 100}, {0, 0, 1, 100}, {0, 0, 1, 100}};
  EXPECT_DOUBLE_EQ(WindowedWork(spans, 1, 2), 200);
  spans.clear();
  EXPECT_DOUBLE_EQ(WindowedWork(spans, 1, 32), 0);
}

TEST(LowerBoundTermsTest, WindowedWorkCountsWhatEarlierKernelsCannotDoBefore) {
  // A kernel of 100 us may start at 0, another at 90, on two devices. The
  // first runs at most 90 us before 90, so 110 us of work is left after
  // 90: 90 + 110 / 2. Without the first kernel's last 10 us, 140.
  std::vector<KernelSpan> spans = {{0, 0, 100, 100}, {90, 0, 100, 100}};
  EXPECT_DOUBLE_EQ(WindowedWork(spans, 2, 32), 145);
  // The same backwards: tails for heads.
  spans = {{0, 0, 100, 100}, {0, 90, 100, 100}};
  EXPECT_DOUBLE_EQ(WindowedWork(spans, 2, 32), 145);
  // Half a device's occupancy: work and time shrink together.
  spans = {{0, 0, 50, 100}, {90, 0, 50, 100}};
  EXPECT_DOUBLE_EQ(WindowedWork(spans, 1, 32), 90 + 55);
}

TEST(LowerBoundTermsTest, MeetBoundTakesTheCheapestChoice) {
  std::vector<Neighbour> near;
  EXPECT_DOUBLE_EQ(MeetBound(near, 32), 0);
  // Two writers of 100 us from 0: apart, each needs 100 + 50 us (a copy);
  // together on the node's device they run one after the other until 200.
  near = {{150, 100, 100, 0}, {150, 100, 100, 0}};
  EXPECT_DOUBLE_EQ(MeetBound(near, 32), 150);
  // With cheap copies elsewhere the bound is the dearest copy.
  near = {{400, 100, 100, 0}, {120, 100, 100, 0}};
  EXPECT_DOUBLE_EQ(MeetBound(near, 32), 120);
}

TEST(LowerBoundTermsTest, LongKernelsQueueOnTheBusiestDevice) {
  // Five kernels of 10 us on two devices: some device runs three.
  std::vector<LongKernel> kernels(5, LongKernel{10, 1, 2});
  EXPECT_DOUBLE_EQ(LongKernelsBound(kernels, 2), 1 + 30 + 2);
  kernels.assign(2, LongKernel{10, 0, 0});
  EXPECT_DOUBLE_EQ(LongKernelsBound(kernels, 2), 0);
  // Only the longest count for the j-th step: of the three longest, some
  // device runs two, at least the two shortest of them.
  kernels = {{50, 0, 0}, {10, 0, 0}, {40, 0, 0}};
  EXPECT_DOUBLE_EQ(LongKernelsBound(kernels, 2), 50);
  kernels = {{877, 5, 3}, {464, 7, 1}, {732, 6, 2}};
  EXPECT_DOUBLE_EQ(LongKernelsBound(kernels, 2), 5 + 464 + 732 + 1);
  // Seven on three devices: some device runs three of them (j = 2), at
  // least the three shortest; with j = 1, two of the four longest.
  kernels = {{70, 0, 0}, {60, 0, 0}, {50, 0, 0}, {40, 0, 0},
             {30, 0, 0}, {20, 0, 0}, {10, 0, 0}};
  EXPECT_DOUBLE_EQ(LongKernelsBound(kernels, 3),
                   std::max(10 + 20 + 30, 40 + 50));
}

}  // namespace
}  // namespace weft::scheduler::bounds
