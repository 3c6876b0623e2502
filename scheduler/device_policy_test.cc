#include "scheduler/device_policy.h"

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using testing::GraphMaker;
using ::testing::HasSubstr;
using Why = DeviceChoice::Why;
using ::weft::testing::StatusIs;

DeviceAssignment RoundRobin(const Graph& g, int num_devices) {
  absl::StatusOr<Dag> dag = InferDependencies(g);
  EXPECT_TRUE(dag.ok()) << dag.status();
  RoundRobinPolicy policy;
  DeviceContext context;
  context.num_devices = num_devices;
  absl::StatusOr<DeviceAssignment> out = policy.Assign(g, *dag, context);
  EXPECT_TRUE(out.ok()) << out.status();
  return std::move(out).value();
}

TEST(RoundRobinPolicyTest, RotatesOverDevices) {
  GraphMaker m;
  m.Buffer("x");
  for (const char* n : {"a", "b", "c", "d", "e"}) m.Node(n, "x:r");
  DeviceAssignment out = RoundRobin(m.Build(), 3);
  EXPECT_THAT(out.device, ElementsAre(0, 1, 2, 0, 1));
  for (const DeviceChoice& c : out.choice) EXPECT_EQ(c.why, Why::kRoundRobin);
}

TEST(RoundRobinPolicyTest, OneDevice) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:r").Node("c", "x:r");
  EXPECT_THAT(RoundRobin(m.Build(), 1).device, ElementsAre(0, 0, 0));
}

TEST(RoundRobinPolicyTest, PinsKeepTheirDeviceAndDoNotTakeATurn) {
  GraphMaker m;
  m.Buffer("x");
  m.Node("a", "x:r", {.device = 2}).Node("b", "x:r").Node("c", "x:r");
  m.Node("d", "x:r", {.device = 0}).Node("e", "x:r");
  DeviceAssignment out = RoundRobin(m.Build(), 3);
  EXPECT_THAT(out.device, ElementsAre(2, 0, 1, 0, 2));
  EXPECT_EQ(out.choice[0].why, Why::kPinned);
  EXPECT_EQ(out.choice[3].why, Why::kPinned);
  EXPECT_EQ(out.choice[4].why, Why::kRoundRobin);
}

TEST(RoundRobinPolicyTest, FollowsIssueOrder) {
  // a waits for c, so the issue order is b, c, a.
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w", {.after = {"c"}}).Node("b", "y:w").Node("c", "z:w");
  DeviceAssignment out = RoundRobin(m.Build(), 3);
  EXPECT_THAT(out.device, ElementsAre(2, 0, 1));
}

TEST(RoundRobinPolicyTest, LabelledNodesFollowTheirLabel) {
  GraphMaker m;
  m.Buffer("x");
  m.Node("a", "x:r").Node("b", "x:r", {.label = "io"});
  m.Node("c", "x:r").Node("d", "x:r", {.label = "io"});
  m.Node("e", "x:r", {.label = "io", .device = 0});
  DeviceAssignment out = RoundRobin(m.Build(), 2);
  EXPECT_THAT(out.device, ElementsAre(0, 1, 0, 1, 0));
  EXPECT_EQ(out.choice[3].why, Why::kLabel);
  EXPECT_EQ(out.choice[3].related, 1);
  EXPECT_EQ(out.choice[4].why, Why::kPinned);
}

TEST(RoundRobinPolicyTest, RejectsNoDevices) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w");
  Graph g = m.Build();
  absl::StatusOr<Dag> dag = InferDependencies(g);
  ASSERT_TRUE(dag.ok());
  DeviceContext context;
  context.num_devices = 0;
  absl::StatusOr<DeviceAssignment> out =
      RoundRobinPolicy().Assign(g, *dag, context);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("options.num_devices")));
}

TEST(DevicePolicyTest, CreatesEveryPolicy) {
  for (DevicePolicyKind kind :
       {DevicePolicyKind::kRoundRobin, DevicePolicyKind::kStreamAware,
        DevicePolicyKind::kMinTransferSize,
        DevicePolicyKind::kMinMinTransferTime,
        DevicePolicyKind::kMinMaxTransferTime,
        DevicePolicyKind::kMinFinishTime}) {
    absl::StatusOr<std::unique_ptr<DevicePolicy>> p = CreateDevicePolicy(kind);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ((*p)->kind(), kind);
  }
  EXPECT_EQ(DevicePolicyName(DevicePolicyKind::kMinMinTransferTime),
            "MINMIN_TRANSFER_TIME");
}

DeviceAssignment Place(const Graph& g, DevicePolicyKind kind,
                       const DeviceContext& context) {
  absl::StatusOr<Dag> dag = InferDependencies(g);
  EXPECT_TRUE(dag.ok()) << dag.status();
  absl::StatusOr<std::unique_ptr<DevicePolicy>> policy =
      CreateDevicePolicy(kind);
  EXPECT_TRUE(policy.ok());
  absl::StatusOr<DeviceAssignment> out = (*policy)->Assign(g, *dag, context);
  EXPECT_TRUE(out.ok()) << out.status();
  return std::move(out).value();
}

DeviceContext Devices(int n) {
  DeviceContext context;
  context.num_devices = n;
  return context;
}

TEST(RoundRobinPolicyTest, CounterAdvancesModuloTheMachineEvenForASubset) {
  // GrCUDA: 4 devices, counter at 1, candidates {1, 3}: 1 % 2 picks 3.
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w");
  Graph g = m.Build();
  absl::StatusOr<Dag> dag = InferDependencies(g);
  ASSERT_TRUE(dag.ok());
  DeviceContext context = Devices(4);
  Topology topology = Topology::Default(4);
  PlacementState state(g, *dag, context, topology, false);
  const std::vector<int> subset = {1, 3};
  EXPECT_EQ(state.PeekRoundRobin(subset), 1);
  state.AdvanceRoundRobin();
  EXPECT_EQ(state.PeekRoundRobin(subset), 3);
  state.AdvanceRoundRobin();
  state.AdvanceRoundRobin();
  EXPECT_EQ(state.PeekRoundRobin(subset), 3);  // counter 3
  state.AdvanceRoundRobin();                   // wraps to 0 (mod 4)
  EXPECT_EQ(state.PeekRoundRobin(subset), 1);
}

TEST(StreamAwarePolicyTest, FewestBusyStreamsCountingOtherJobs) {
  GraphMaker m;
  m.Buffer("x");
  for (const char* n : {"a", "b", "c", "d", "e"}) m.Node(n, "x:r");
  DeviceContext context = Devices(3);
  context.busy_streams = {3, 1, 1};
  DeviceAssignment out =
      Place(m.Build(), DevicePolicyKind::kStreamAware, context);
  // Each independent node opens a stream where it lands; ties go low.
  EXPECT_THAT(out.device, ElementsAre(1, 2, 1, 2, 0));
  EXPECT_EQ(out.choice[0].why, Why::kFewestBusyStreams);
  EXPECT_EQ(out.choice[0].value, 1);
  EXPECT_EQ(out.choice[4].value, 3);
}

TEST(StreamAwarePolicyTest, InheritingAParentStreamOpensNone) {
  // a -> {b, c}: on one device b inherits a's stream and c opens one.
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w", {.device = 0}).Node("b", "x:r y:w", {.device = 0});
  m.Node("c", "x:r z:w", {.device = 0}).Node("d", "z:w y:w");
  DeviceContext context = Devices(2);
  context.busy_streams = {0, 1};
  DeviceAssignment out =
      Place(m.Build(), DevicePolicyKind::kStreamAware, context);
  // Device 0 has 2 streams of this job (a's, c's), device 1 one busy.
  EXPECT_EQ(out.device[3], 1);
  EXPECT_EQ(out.choice[3].value, 1);
}

Graph Chain5() {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w");
  for (const char* n : {"b", "c", "d", "e"}) m.Node(n, "x:rw");
  return m.Build();
}

TEST(StreamAwarePolicyTest, AChainPingPongsUnlessKeptOnItsParentsDevices) {
  // Every node of a chain opens a stream on the device it moves to, so
  // the least busy device alternates.
  DeviceAssignment free =
      Place(Chain5(), DevicePolicyKind::kStreamAware, Devices(2));
  EXPECT_THAT(free.device, ElementsAre(0, 1, 0, 1, 0));
  // Restricted to its parents' devices when no worse: from c on, the
  // parent's device ties the best, and the chain stays there.
  DeviceContext context = Devices(2);
  context.restrict_to_parent_devices = true;
  DeviceAssignment kept =
      Place(Chain5(), DevicePolicyKind::kStreamAware, context);
  EXPECT_THAT(kept.device, ElementsAre(0, 1, 1, 1, 1));
  EXPECT_FALSE(kept.choice[1].parents_only);  // its parent's device is worse
  EXPECT_TRUE(kept.choice[2].parents_only);
}

// x (1000 bytes) up to date on device 0, y (100) on device 1, z (10) on
// the host only.
GraphMaker PresenceGraph() {
  GraphMaker m;
  m.Buffer("x", 1000).Buffer("y", 100).Buffer("z", 10).Buffer("w", 10);
  m.Node("wx", "x:w", {.device = 0}).Node("wy", "y:w", {.device = 1});
  return m;
}

TEST(MinTransferSizePolicyTest, MostBytesPresentAboveTheThreshold) {
  GraphMaker m = PresenceGraph();
  m.Node("r", "x:r y:r");  // 1000 of 1100 bytes on device 0
  m.Node("s", "z:r");      // nothing on a device: round robin
  m.Node("t", "w:r");      // again: the next turn
  m.Node("u", "z:r");      // s left a copy of z on device 0
  DeviceAssignment out =
      Place(m.Build(), DevicePolicyKind::kMinTransferSize, Devices(2));
  EXPECT_THAT(out.device, ElementsAre(0, 1, 0, 0, 1, 0));
  EXPECT_EQ(out.choice[5].why, Why::kMostDataPresent);
  EXPECT_EQ(out.choice[2].why, Why::kMostDataPresent);
  EXPECT_EQ(out.choice[2].value, 1000);
  EXPECT_EQ(out.choice[2].total, 1100);
  EXPECT_EQ(out.choice[3].why, Why::kRoundRobin);
  EXPECT_TRUE(out.choice[3].fallback);
}

TEST(MinTransferSizePolicyTest, ThresholdIsConfigurableAndStrict) {
  GraphMaker m = PresenceGraph();
  m.Node("r", "x:r y:r");  // 1000 / 1100 = 0.909 on device 0
  DeviceContext context = Devices(2);
  context.data_threshold = 0.95;
  DeviceAssignment out =
      Place(m.Build(), DevicePolicyKind::kMinTransferSize, context);
  EXPECT_EQ(out.choice[2].why, Why::kRoundRobin);
  // Exactly at the threshold is not above it: 100 / 1100 of y.
  context.data_threshold = 1000.0 / 1100.0;
  out = Place(m.Build(), DevicePolicyKind::kMinTransferSize, context);
  EXPECT_EQ(out.choice[2].why, Why::kRoundRobin);
}

TEST(MinTransferSizePolicyTest, RepeatedArgumentsCountEachTime) {
  GraphMaker m;
  m.Buffer("x", 150).Buffer("y", 100);
  m.Node("wx", "x:w", {.device = 0}).Node("wy", "y:w", {.device = 1});
  m.Node("r", "x:r y:r y:r");  // 150 on device 0, 2 x 100 on device 1
  DeviceAssignment out =
      Place(m.Build(), DevicePolicyKind::kMinTransferSize, Devices(2));
  EXPECT_EQ(out.device[2], 1);
  EXPECT_EQ(out.choice[2].value, 200);
  EXPECT_EQ(out.choice[2].total, 350);
}

// GrCUDA's two-device test matrix: [[30,45,10],[45,60,20],[10,20,0]].
Topology GoldTopology() {
  absl::StatusOr<Topology> t =
      Topology::FromMatrix({{30, 45, 10}, {45, 60, 20}, {10, 20, 0}});
  EXPECT_TRUE(t.ok());
  return *t;
}

TEST(TransferTimePolicyTest, LinkBandwidthBestAndWorst) {
  Topology t = GoldTopology();
  const DataLocations::Mask gpu1_and_host = 2 | DataLocations::kHostBit;
  EXPECT_EQ(LinkBandwidth(t, gpu1_and_host, 0, /*best=*/true), 45);
  EXPECT_EQ(LinkBandwidth(t, gpu1_and_host, 0, /*best=*/false), 10);
  EXPECT_TRUE(std::isinf(LinkBandwidth(t, gpu1_and_host, 1, true)));
}

// x (1 MB) on {host, 1}, y (1 MB) on {host, 0}; v reads both.
Graph TransferGraph() {
  GraphMaker m;
  m.Buffer("x", 1000000).Buffer("y", 1000000);
  m.Node("rx", "x:r", {.device = 1}).Node("ry", "y:r", {.device = 0});
  m.Node("v", "x:r y:r");
  return m.Build();
}

TEST(TransferTimePolicyTest, MinMinUsesTheBestLink) {
  Topology t = GoldTopology();
  DeviceContext context = Devices(2);
  context.topology = &t;
  DeviceAssignment out =
      Place(TransferGraph(), DevicePolicyKind::kMinMinTransferTime, context);
  // Either way 1 MB over the 45 GB/s device link: a tie, the lower id.
  EXPECT_EQ(out.device[2], 0);
  EXPECT_EQ(out.choice[2].why, Why::kMinTransferTime);
  EXPECT_NEAR(out.choice[2].value, 1e6 / 45e3, 1e-9);
}

TEST(TransferTimePolicyTest, MinMaxUsesTheWorstLink) {
  Topology t = GoldTopology();
  DeviceContext context = Devices(2);
  context.topology = &t;
  DeviceAssignment out =
      Place(TransferGraph(), DevicePolicyKind::kMinMaxTransferTime, context);
  // Device 0 would fetch x over the 10 GB/s host link, device 1 fetches y
  // over 20 GB/s.
  EXPECT_EQ(out.device[2], 1);
  EXPECT_NEAR(out.choice[2].value, 1e6 / 20e3, 1e-9);
}

TEST(TransferTimePolicyTest, RoundRobinWhenNothingIsOnADevice) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:r").Node("b", "x:r");
  DeviceAssignment out =
      Place(m.Build(), DevicePolicyKind::kMinMaxTransferTime, Devices(2));
  // a's read puts x on device 0, so b sees data there.
  EXPECT_EQ(out.device[0], 0);
  EXPECT_TRUE(out.choice[0].fallback);
  EXPECT_EQ(out.device[1], 0);
  EXPECT_EQ(out.choice[1].why, Why::kMinTransferTime);
  EXPECT_EQ(out.choice[1].value, 0);
}

TEST(MinFinishTimePolicyTest, EarliestFinishCountsSlotsAndTransfers) {
  GraphMaker m;
  m.Buffer("xa", 3000000).Buffer("xb").Buffer("xc");
  m.Node("a", "xa:w", {.cost = 10});
  m.Node("b", "xb:w", {.cost = 10});
  m.Node("c", "xa:r xc:w", {.cost = 5});
  DeviceAssignment out =
      Place(m.Build(), DevicePolicyKind::kMinFinishTime, Devices(2));
  // a: 10 on either device, the lower id. b: device 0 is busy until 10.
  // c: on device 0 it ends at 15; on device 1 it would first copy 3 MB at
  // 300 GB/s (10 us) and end at 25.
  EXPECT_THAT(out.device, ElementsAre(0, 1, 0));
  EXPECT_EQ(out.choice[1].value, 10);
  EXPECT_EQ(out.choice[2].why, Why::kMinFinishTime);
  EXPECT_EQ(out.choice[2].value, 15);
}

TEST(MinFinishTimePolicyTest, KernelsShareADeviceByOccupancy) {
  // Two full kernels finish first on two devices; two half kernels fit
  // side by side on one.
  GraphMaker full;
  full.Buffer("xa").Buffer("xb");
  full.Node("a", "xa:w", {.cost = 10}).Node("b", "xb:w", {.cost = 10});
  EXPECT_THAT(
      Place(full.Build(), DevicePolicyKind::kMinFinishTime, Devices(2)).device,
      ElementsAre(0, 1));
  GraphMaker half;
  half.Buffer("xa").Buffer("xb");
  half.Node("a", "xa:w", {.cost = 10, .occupancy = 0.5});
  half.Node("b", "xb:w", {.cost = 10, .occupancy = 0.5});
  EXPECT_THAT(
      Place(half.Build(), DevicePolicyKind::kMinFinishTime, Devices(2)).device,
      ElementsAre(0, 0));
  // At most one kernel at a time, however small.
  DeviceContext one = Devices(2);
  one.max_concurrent_kernels = 1;
  EXPECT_THAT(Place(half.Build(), DevicePolicyKind::kMinFinishTime, one).device,
              ElementsAre(0, 1));
}

// Host data one node brought to a device is there only once its upload
// ends: another node using it there, or copying it from there, waits for
// that, as the executor does.
TEST(MinFinishTimePolicyTest, DataBroughtByAnotherNodeIsThereOnceItArrives) {
  auto graph = [](int b_device) {
    // x: 1000 us up at 25 GB/s.
    std::vector<BufferSpec> buffers = {testing::Buffer("x", 25, true),
                                       testing::Buffer("ya", 1, false),
                                       testing::Buffer("yb", 1, false)};
    std::vector<NodeSpec> nodes = {
        testing::Kernel("a", 10, {{0, Access::kRead}, {1, Access::kWrite}}),
        testing::Kernel("b", 10, {{0, Access::kRead}, {2, Access::kWrite}})};
    nodes[0].device = 0;
    nodes[1].device = b_device;
    return Graph("shared_input", std::move(buffers), std::move(nodes));
  };
  for (const DevicePolicyKind kind : {DevicePolicyKind::kMinFinishTime,
                                      DevicePolicyKind::kLookaheadFinishTime}) {
    // Both on device 0: b runs after the upload, after a.
    DeviceAssignment same = Place(graph(0), kind, Devices(2));
    ASSERT_EQ(same.start_us.size(), 2u);
    EXPECT_DOUBLE_EQ(same.start_us[0], 1000);
    EXPECT_DOUBLE_EQ(same.start_us[1], 1010);
    // b on device 1 copies x from device 0 once it is there (83.3 us over
    // a 300 GB/s link).
    DeviceAssignment other = Place(graph(1), kind, Devices(2));
    ASSERT_EQ(other.start_us.size(), 2u);
    EXPECT_NEAR(other.start_us[1], 1000 + 25e6 / 300e3, 1e-6);
  }
}

TEST(DevicePolicyTest, PinsAndLabelsBindEveryPolicy) {
  GraphMaker m;
  m.Buffer("x", 1000);
  m.Node("a", "x:w", {.label = "io", .device = 1});
  m.Node("b", "x:r", {.label = "io"});
  for (DevicePolicyKind kind :
       {DevicePolicyKind::kStreamAware, DevicePolicyKind::kMinTransferSize,
        DevicePolicyKind::kMinFinishTime}) {
    DeviceAssignment out = Place(m.Build(), kind, Devices(3));
    EXPECT_THAT(out.device, ElementsAre(1, 1));
    EXPECT_EQ(out.choice[1].why, Why::kLabel);
  }
}

TEST(DevicePolicyTest, ValidatesTheContext) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w");
  Graph g = m.Build();
  absl::StatusOr<Dag> dag = InferDependencies(g);
  ASSERT_TRUE(dag.ok());
  DeviceContext context = Devices(2);
  context.busy_streams = {1};
  absl::StatusOr<DeviceAssignment> out =
      StreamAwarePolicy().Assign(g, *dag, context);
  EXPECT_THAT(out.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("options.busy_streams: has 1 entries for 2")));
  Topology small = Topology::Default(1);
  context = Devices(2);
  context.topology = &small;
  out = MinFinishTimePolicy().Assign(g, *dag, context);
  EXPECT_THAT(out.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("options.topology: describes 1 devices")));
  out = RoundRobinPolicy().Assign(g, *dag, Devices(64));
  EXPECT_THAT(out.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     HasSubstr("at most 63")));
}

TEST(LookaheadFinishTimePolicyTest, HugeGraphsArePlacedByLoad) {
  // Past kMaxModelledPlacementNodes nodes: pins and labels hold, a chain
  // passing a large buffer stays on one device, and independent kernels
  // share the devices evenly.
  GraphMaker m;
  m.Buffer("big", uint64_t{64} << 20).Buffer("x");
  m.Node("c0", "big:w", {.cost = 10});
  for (int i = 1; i < 4; ++i) {
    m.Node(absl::StrCat("c", i), "big:rw", {.cost = 10});
  }
  m.Node("pinned", "x:r", {.device = 1});
  m.Node("l0", "x:r", {.label = "lane"}).Node("l1", "x:r", {.label = "lane"});
  const int kernels = kMaxModelledPlacementNodes;
  for (int i = 0; i < kernels; ++i) {
    m.Node(absl::StrCat("k", i), "x:r", {.cost = 10});
  }
  const Graph g = m.Build();
  ASSERT_GT(g.num_nodes(), kMaxModelledPlacementNodes);
  absl::StatusOr<Dag> dag = InferDependencies(g);
  ASSERT_TRUE(dag.ok()) << dag.status();
  DeviceContext context;
  context.num_devices = 2;
  absl::StatusOr<DeviceAssignment> out =
      LookaheadFinishTimePolicy().Assign(g, *dag, context);
  ASSERT_TRUE(out.ok()) << out.status();
  for (int i = 1; i < 4; ++i) EXPECT_EQ(out->device[i], out->device[0]);
  EXPECT_EQ(out->device[4], 1);
  EXPECT_EQ(out->choice[4].why, Why::kPinned);
  EXPECT_EQ(out->device[6], out->device[5]);
  EXPECT_EQ(out->choice[6].why, Why::kLabel);
  EXPECT_EQ(out->choice[7].why, Why::kMinFinishTime);
  int on_zero = 0;
  for (int i = 7; i < g.num_nodes(); ++i) on_zero += out->device[i] == 0;
  EXPECT_NEAR(on_zero, kernels / 2, 8);
  EXPECT_TRUE(out->start_us.empty());
}

}  // namespace
}  // namespace weft::scheduler
