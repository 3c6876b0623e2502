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
  // Over two engines one of them runs two of the three: 200 us, then 10
  // (their work over the engines alone: 160).
  jobs = {{100, 10}, {100, 20}, {100, 10}};
  EXPECT_DOUBLE_EQ(DeliveryBound(jobs, 2), 210);
  // Of five, one engine of two runs three, at least the three shortest:
  // 210 (their work over the engines: 205).
  jobs = {{100, 0}, {10, 0}, {100, 0}, {100, 0}, {100, 0}};
  EXPECT_DOUBLE_EQ(DeliveryBound(jobs, 2), 210);
}

TEST(LowerBoundTermsTest, ReleaseBoundCountsTheLateJobs) {
  // Downloads released at 0, 50 and 50: the two late ones take 200 us
  // after 50 on one engine.
  std::vector<Job> jobs = {{100, 0}, {100, 50}, {100, 50}};
  EXPECT_DOUBLE_EQ(ReleaseBound(jobs, 1), 300);
  jobs = {{100, 0}, {100, 250}};
  EXPECT_DOUBLE_EQ(ReleaseBound(jobs, 1), 350);
  // Sixteen downloads of 100 us on five engines: one runs four (their
  // work over the engines: 320).
  jobs.assign(16, {100, 0});
  EXPECT_DOUBLE_EQ(ReleaseBound(jobs, 5), 400);
}

TEST(LowerBoundTermsTest, EndLoadCountsWholeKernelsOnTheBusiestDevice) {
  // Sixteen full kernels of 100 us after 50 us on five devices: one device
  // runs four, 450 (their work spread evenly: 370).
  EndLoad full(5, 32);
  for (int i = 0; i < 16; ++i) full.Add(50, 100, 100, true);
  EXPECT_DOUBLE_EQ(full.bound(), 50 + 400);
  // Then sixteen more from 0: after 0 one device runs seven of the
  // thirty-two.
  for (int i = 0; i < 16; ++i) full.Add(0, 100, 100, true);
  EXPECT_DOUBLE_EQ(full.bound(), 700);
  // Half-device kernels share a device: their work over the devices.
  EndLoad halves(5, 32);
  for (int i = 0; i < 16; ++i) halves.Add(50, 50, 100, false);
  EXPECT_DOUBLE_EQ(halves.bound(), 50 + 160);
  // Tiny kernels: at most `slots` of them at once on each device.
  EndLoad tiny(1, 2);
  for (int i = 0; i < 4; ++i) tiny.Add(0, 1, 100, false);
  EXPECT_DOUBLE_EQ(tiny.bound(), 200);
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
  // least the three shortest; with j = 1, two of the four longest (90).
  // Split exactly, the best takes 100 on some device ({70, 30}, {60, 40},
  // {50, 20, 10}).
  kernels = {{70, 0, 0}, {60, 0, 0}, {50, 0, 0}, {40, 0, 0},
             {30, 0, 0}, {20, 0, 0}, {10, 0, 0}};
  EXPECT_NEAR(LongKernelsBound(kernels, 3), 100, 1e-4);
}

// However eight fork/join branches are spread over four devices, one runs
// 1106.3 us of them: the four longest each need a device, and the four
// shortest cannot join them all below that.
TEST(LowerBoundTermsTest, LongestKernelsPartitionIsExact) {
  const std::vector<double> branches = {725,   721.8, 707.5, 567.4,
                                        459.8, 398.8, 279.8, 118.9};
  EXPECT_NEAR(LongestKernelsPartitionUs(branches, 4), 707.5 + 398.8, 2e-3);
  EXPECT_NEAR(LongestKernelsPartitionUs({877, 464.1, 732.2}, 2), 464.1 + 732.2,
              2e-3);
  // Enough devices: the longest alone.
  EXPECT_DOUBLE_EQ(LongestKernelsPartitionUs({5, 4, 3}, 3), 5);
  EXPECT_DOUBLE_EQ(LongestKernelsPartitionUs({3, 3, 3, 3}, 2), 6);
  // Never above the best split: {9, 2}, {6, 5} take 11.
  EXPECT_LE(LongestKernelsPartitionUs({9, 6, 5, 2}, 2), 11);
  EXPECT_GT(LongestKernelsPartitionUs({9, 6, 5, 2}, 2), 11 - 1e-4);
  std::vector<LongKernel> kernels;
  for (double c : branches) kernels.push_back({c, 267.8, 267.8});
  // With the root and the join, shorter and with less head and tail: the
  // branches alone still count.
  kernels.push_back({100, 167.8, 267.8});
  kernels.push_back({100, 267.8, 167.8});
  EXPECT_NEAR(LongKernelsBound(kernels, 4), 267.8 + 1106.3 + 267.8, 2e-3);
}

}  // namespace
}  // namespace weft::scheduler::bounds
