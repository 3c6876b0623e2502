#include "server/device_reservations.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/graph.h"
#include "scheduler/graph_builder.h"
#include "scheduler/plan.h"
#include "scheduler/planner.h"
#include "testing/wire_graphs.h"
#include "weft/v1/weft.pb.h"

namespace weft::server {
namespace {

using ::testing::ElementsAre;

scheduler::BufferSpec Buffer(const char* name, uint64_t bytes) {
  scheduler::BufferSpec b;
  b.name = name;
  b.size_bytes = bytes;
  return b;
}

scheduler::NodeSpec Node(const char* name,
                         std::vector<scheduler::BufferId> ids) {
  scheduler::NodeSpec n;
  n.name = name;
  n.op = "spin";
  for (scheduler::BufferId id : ids) {
    n.args.push_back(scheduler::BufferUse{id, scheduler::Access::kReadWrite});
  }
  n.args.push_back(1.0f);
  return n;
}

// a (100 bytes) and b (1000) used by node n0; b and c (10) by n1.
scheduler::Graph ThreeBuffers() {
  return scheduler::Graph(
      "g", {Buffer("a", 100), Buffer("b", 1000), Buffer("c", 10)},
      {Node("n0", {0, 1}), Node("n1", {1, 2})});
}

scheduler::Plan PlanOn(int d0, int d1) {
  scheduler::Plan plan;
  plan.nodes.resize(2);
  plan.nodes[0].node = 0;
  plan.nodes[0].device = d0;
  plan.nodes[1].node = 1;
  plan.nodes[1].device = d1;
  return plan;
}

scheduler::DeviceMemory Arena(int device, int64_t bytes) {
  scheduler::DeviceMemory m;
  m.device = device;
  m.arena_bytes = bytes;
  return m;
}

TEST(JobDeviceBytesTest, WithoutAMemoryPlanEachDeviceHoldsTheBuffersItUses) {
  // Each buffer by itself, rounded up to 256 bytes: a 256, b 1024, c 256.
  scheduler::Graph graph = ThreeBuffers();
  EXPECT_THAT(JobDeviceBytes(graph, PlanOn(0, 1), 2), ElementsAre(1280, 1280));
  // A buffer two nodes of one device use counts once.
  EXPECT_THAT(JobDeviceBytes(graph, PlanOn(1, 1), 2), ElementsAre(0, 1536));
  EXPECT_THAT(JobDeviceBytes(graph, PlanOn(0, 1), 3),
              ElementsAre(1280, 1280, 0));
}

TEST(JobDeviceBytesTest, AMemoryPlanGivesItsArenas) {
  scheduler::Graph graph = ThreeBuffers();
  scheduler::Plan plan = PlanOn(0, 1);
  plan.memory.push_back(Arena(1, 512));
  plan.memory.push_back(Arena(0, 1024));
  EXPECT_THAT(JobDeviceBytes(graph, plan, 2), ElementsAre(1024, 512));
}

TEST(JobDeviceBytesTest, BodiesOnAnotherDeviceAddWhatTheyAllocateThere) {
  // The loop goes where x is (device 0); its body's `step` runs on
  // device 1, which then holds x and y by themselves.
  const weft::v1::Graph proto = ::weft::testing::LoopWithABodyNodeElsewhere();
  scheduler::GraphLimits limits;
  limits.num_devices = 2;
  absl::StatusOr<scheduler::Graph> graph = scheduler::BuildGraph(proto, limits);
  ASSERT_TRUE(graph.ok()) << graph.status();
  scheduler::PlannerOptions options;
  options.num_devices = 2;
  options.simulate = false;
  absl::StatusOr<scheduler::Plan> plan = scheduler::PlanGraph(*graph, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->nodes[1].device, 0);
  // Device 0: x, y and go by themselves (the loop's buffers); device 1:
  // what the body's node uses there.
  EXPECT_THAT(JobDeviceBytes(*graph, *plan, 2),
              ElementsAre(1000192 + 1024 + 256, 1000192 + 1024));
}

TEST(DeviceReservationsTest, VersionMovesWithReserveAndRelease) {
  DeviceReservations r({1000});
  const uint64_t v0 = r.version();
  EXPECT_TRUE(r.Fits({400}));
  EXPECT_EQ(r.version(), v0);
  r.Reserve({400});
  const uint64_t v1 = r.version();
  EXPECT_NE(v1, v0);
  r.Release({400});
  EXPECT_NE(r.version(), v1);
  EXPECT_NE(r.version(), v0);
}

TEST(DeviceReservationsTest, FitsWhileTheSumStaysWithinEachDevice) {
  DeviceReservations r({1000, 500});
  EXPECT_TRUE(r.Fits({1000, 500}));
  EXPECT_FALSE(r.Fits({1001, 0}));
  r.Reserve({600, 100});
  EXPECT_EQ(r.reserved(0), 600);
  EXPECT_EQ(r.reserved(1), 100);
  EXPECT_TRUE(r.Fits({400, 400}));
  EXPECT_FALSE(r.Fits({401, 0}));
  EXPECT_FALSE(r.Fits({0, 401}));
  EXPECT_EQ(r.FirstShort({400, 400}), -1);
  EXPECT_EQ(r.FirstShort({0, 401}), 1);
  EXPECT_EQ(r.FirstShort({401, 401}), 0);
  EXPECT_EQ(r.capacity(1), 500);
  EXPECT_EQ(r.capacity(2), 0);
  r.Reserve({400, 0});
  r.Release({600, 100});
  EXPECT_EQ(r.reserved(0), 400);
  EXPECT_EQ(r.reserved(1), 0);
  EXPECT_TRUE(r.Fits({600, 500}));
}

TEST(DeviceReservationsTest, FitsBesideLeavesAWaitingNeedItsRoom) {
  DeviceReservations r({1000, 500, 0});
  r.Reserve({800, 100, 0});
  // `waiting` is short on device 0 and fits on device 1 with 300 to spare.
  const std::vector<int64_t> waiting = {300, 100};
  ASSERT_FALSE(r.Fits(waiting));
  EXPECT_TRUE(r.FitsBeside(waiting, {0, 300}));
  EXPECT_TRUE(r.FitsBeside(waiting, {0, 300, int64_t{1} << 40}));
  EXPECT_TRUE(r.FitsBeside(waiting, {}));
  // Taking any of device 0, where it waits, would delay it.
  EXPECT_FALSE(r.FitsBeside(waiting, {1, 0}));
  // So would taking its room on device 1, though it alone would fit there.
  EXPECT_FALSE(r.FitsBeside(waiting, {0, 301}));
  ASSERT_TRUE(r.Fits({0, 301}));
  // Once reserved, the waiting need still fits on device 1.
  r.Reserve({0, 300});
  EXPECT_EQ(r.FirstShort(waiting), 0);
  EXPECT_TRUE(r.Fits({0, 100}));
}

TEST(DeviceReservationsTest, UnboundedDevicesAlwaysFit) {
  DeviceReservations none({});
  EXPECT_TRUE(none.Fits({int64_t{1} << 60}));
  DeviceReservations second_unbounded({100, 0});
  second_unbounded.Reserve({100, int64_t{1} << 50});
  EXPECT_TRUE(second_unbounded.Fits({0, int64_t{1} << 50}));
  EXPECT_FALSE(second_unbounded.Fits({1, 0}));
  EXPECT_EQ(second_unbounded.reserved(7), 0);
}

}  // namespace
}  // namespace weft::server
