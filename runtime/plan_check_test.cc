#include "runtime/plan_check.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using scheduler::Graph;
using scheduler::NodeSpec;
using scheduler::Plan;
using scheduler::PlannedNode;
using scheduler::PlannedStream;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

Graph TwoNodes() {
  std::vector<NodeSpec> nodes(2);
  nodes[0].name = "a";
  nodes[0].op = "spin";
  nodes[1].name = "b";
  nodes[1].op = "spin";
  return Graph("g", {}, std::move(nodes));
}

scheduler::Csr Rows(const std::vector<std::vector<int32_t>>& rows) {
  scheduler::Csr csr;
  for (const auto& row : rows) csr.AppendRow(row);
  return csr;
}

// a on device 0 stream 0 signals event 0; b on device 1 stream 1 waits.
Plan GoodPlan() {
  Plan plan;
  plan.streams = {PlannedStream{0, 0, "", scheduler::Engine::kCompute},
                  PlannedStream{1, 1, "", scheduler::Engine::kCompute}};
  PlannedNode a;
  a.node = 0;
  a.device = 0;
  a.stream = 0;
  a.signal_event = 0;
  PlannedNode b;
  b.node = 1;
  b.device = 1;
  b.stream = 1;
  plan.AddNode(a, {}, {});
  plan.AddNode(b, {0}, {0});
  plan.num_events = 1;
  plan.num_devices = 2;
  return plan;
}

void ExpectInvalid(const Plan& plan, const char* message, int devices = 2) {
  EXPECT_THAT(ValidatePlan(TwoNodes(), plan, devices),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)));
}

TEST(ValidatePlanTest, AcceptsGoodPlan) {
  EXPECT_OK(ValidatePlan(TwoNodes(), GoodPlan(), 2));
}

TEST(CheckPlanTest, KeepsWhatItChecked) {
  auto graph = std::make_shared<const Graph>(TwoNodes());
  auto plan = std::make_shared<const Plan>(GoodPlan());
  absl::StatusOr<CheckedPlan> checked = CheckPlan(graph, plan, 2);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->graph(), graph);
  EXPECT_EQ(checked->plan(), plan);
  EXPECT_EQ(checked->num_devices(), 2);
}

TEST(CheckPlanTest, RefusesWhatValidatePlanRefuses) {
  auto graph = std::make_shared<const Graph>(TwoNodes());
  EXPECT_THAT(
      CheckPlan(graph, std::make_shared<const Plan>(GoodPlan()), 1).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("outside the machine")));
  EXPECT_THAT(CheckPlan(graph, nullptr, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("graph and plan are required")));
}

TEST(ValidatePlanTest, RejectsWrongNodeCount) {
  Plan plan = GoodPlan();
  plan.nodes.pop_back();
  ExpectInvalid(plan, "plan lists 1 nodes but graph 'g' has 2");
}

TEST(ValidatePlanTest, RejectsNegativeEventCount) {
  Plan plan = GoodPlan();
  plan.nodes[0].signal_event = -1;
  plan.waits = Rows({{}, {}});
  plan.num_events = -2;
  ExpectInvalid(plan, "plan.num_events is negative (-2)");
}

TEST(ValidatePlanTest, RejectsDuplicateNode) {
  Plan plan = GoodPlan();
  plan.nodes[1].node = 0;
  ExpectInvalid(plan, "plan.nodes[1]: node 'a' is listed twice");
}

TEST(ValidatePlanTest, RejectsDeviceOutsideMachine) {
  ExpectInvalid(GoodPlan(), "device 1 is outside the machine (1 devices)",
                /*devices=*/1);
}

TEST(ValidatePlanTest, RejectsStreamOnOtherDevice) {
  Plan plan = GoodPlan();
  plan.nodes[1].stream = 0;
  ExpectInvalid(plan, "runs on device 1 but its stream 0 is on device 0");
}

TEST(ValidatePlanTest, RejectsUnknownStream) {
  Plan plan = GoodPlan();
  plan.nodes[0].stream = 5;
  ExpectInvalid(plan, "stream 5 does not exist");
}

TEST(ValidatePlanTest, RejectsEventsOutOfRange) {
  Plan plan = GoodPlan();
  plan.waits = Rows({{}, {3}});
  ExpectInvalid(plan, "waits on event 3 of 1");
  plan = GoodPlan();
  plan.nodes[0].signal_event = 1;
  ExpectInvalid(plan, "signals event 1 of 1");
}

TEST(ValidatePlanTest, RejectsDependencyIssuedLater) {
  Plan plan = GoodPlan();
  plan.deps = Rows({{1}, {0}});
  ExpectInvalid(plan, "dependency 1 is not issued before it");
}

TEST(ValidatePlanTest, RejectsMalformedRows) {
  Plan plan = GoodPlan();
  plan.waits.offsets = {0, 0, 3};  // one item, three claimed
  ExpectInvalid(plan, "offsets must start at 0, never go down");
  plan = GoodPlan();
  plan.deps.offsets = {0, 1, 1};  // row 0 claims node 1's item
  plan.deps.offsets[1] = 2;
  ExpectInvalid(plan, "plan.deps or plan.waits");
}

TEST(ValidatePlanTest, RejectsListsOfTheWrongLength) {
  Plan plan = GoodPlan();
  plan.waits = Rows({{}});
  ExpectInvalid(plan, "plan.deps and plan.waits have 2 and 1 rows");
  plan = GoodPlan();
  plan.deps = Rows({{}, {0}, {1}});
  ExpectInvalid(plan, "have 3 and 2 rows; the plan lists 2 nodes");
}

}  // namespace
}  // namespace weft::runtime
