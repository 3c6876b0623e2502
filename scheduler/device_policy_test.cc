#include "scheduler/device_policy.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using testing::GraphMaker;
using ::testing::HasSubstr;
using Why = DeviceChoice::Why;

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
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("options.num_devices"));
}

TEST(DevicePolicyTest, CreatesRoundRobin) {
  absl::StatusOr<std::unique_ptr<DevicePolicy>> p =
      CreateDevicePolicy(DevicePolicyKind::kRoundRobin);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->kind(), DevicePolicyKind::kRoundRobin);
}

TEST(DevicePolicyTest, OtherPoliciesAreUnimplemented) {
  for (DevicePolicyKind kind :
       {DevicePolicyKind::kStreamAware, DevicePolicyKind::kMinTransferSize,
        DevicePolicyKind::kMinMinTransferTime,
        DevicePolicyKind::kMinMaxTransferTime,
        DevicePolicyKind::kMinFinishTime}) {
    absl::StatusOr<std::unique_ptr<DevicePolicy>> p = CreateDevicePolicy(kind);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(std::string(p.status().message()),
                HasSubstr(std::string(DevicePolicyName(kind)) +
                          " is not implemented yet"));
  }
  EXPECT_EQ(DevicePolicyName(DevicePolicyKind::kMinMinTransferTime),
            "MINMIN_TRANSFER_TIME");
}

}  // namespace
}  // namespace weft::scheduler
