#include "scheduler/cost_model.h"

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

TEST(CostLevelsTest, Chain) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w", {.cost = 1}).Node("b", "x:rw", {.cost = 2});
  m.Node("c", "x:r", {.cost = 3});
  Graph g = m.Build();
  absl::StatusOr<Dag> dag = InferDependencies(g);
  ASSERT_TRUE(dag.ok());
  CostLevels levels = ComputeCostLevels(g, *dag);
  EXPECT_THAT(levels.top_us, ElementsAre(0, 1, 3));
  EXPECT_THAT(levels.bottom_us, ElementsAre(6, 5, 3));
  EXPECT_THAT(levels.bottom_hops, ElementsAre(2, 1, 0));
  EXPECT_EQ(levels.critical_path_us, 6);
  EXPECT_EQ(levels.total_work_us, 6);
  EXPECT_EQ(levels.device_work_us, 6);
}

TEST(CostLevelsTest, ForkAndHostWork) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("src", "x:w", {.cost = 2});
  m.Node("long", "x:r y:w", {.cost = 10});
  m.Node("host", "x:r z:w", {.engine = Engine::kHost, .cost = 4});
  Graph g = m.Build();
  absl::StatusOr<Dag> dag = InferDependencies(g);
  ASSERT_TRUE(dag.ok());
  CostLevels levels = ComputeCostLevels(g, *dag);
  EXPECT_EQ(levels.critical_path_us, 12);
  EXPECT_EQ(levels.total_work_us, 16);
  EXPECT_EQ(levels.device_work_us, 12);  // the host node is not device work
  EXPECT_EQ(LowerBound(levels, 1), 12);
  levels.device_work_us = 30;
  EXPECT_EQ(LowerBound(levels, 2), 15);
  EXPECT_EQ(LowerBound(levels, 3), 12);
}

// Plans written by hand: nodes in issue order with streams and events.
struct Step {
  int node;
  int stream;
  std::vector<int> waits = {};
  int signal = -1;
  int device = 0;
};

Plan MakePlan(const std::vector<Step>& steps, int num_streams, int num_events,
              std::vector<int> stream_devices = {}) {
  Plan plan;
  plan.num_devices = 1;
  for (int s = 0; s < num_streams; ++s) {
    PlannedStream ps;
    ps.id = s;
    ps.device = stream_devices.empty() ? 0 : stream_devices[s];
    plan.num_devices = std::max(plan.num_devices, ps.device + 1);
    plan.streams.push_back(ps);
  }
  for (const Step& step : steps) {
    PlannedNode pn;
    pn.node = step.node;
    pn.stream = step.stream;
    pn.wait_events = step.waits;
    pn.signal_event = step.signal;
    pn.device = step.device;
    plan.nodes.push_back(pn);
  }
  plan.num_events = num_events;
  return plan;
}

Graph ThreeIndependent(Engine e1, Engine e2, Engine e3) {
  GraphMaker m;
  m.Buffer("x");
  m.Node("a", "x:r", {.engine = e1, .cost = 3});
  m.Node("b", "x:r", {.engine = e2, .cost = 5});
  m.Node("c", "x:r", {.engine = e3, .cost = 2});
  return m.Build();
}

TEST(SimulatePlanTest, OneStreamRunsInOrder) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  Plan plan = MakePlan({{0, 0}, {1, 0}, {2, 0}}, 1, 0);
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_EQ(plan.nodes[1].estimated_start_us, 3);
  EXPECT_EQ(plan.nodes[2].estimated_start_us, 8);
  EXPECT_EQ(plan.estimated_makespan_us, 10);
}

TEST(SimulatePlanTest, ComputeOnOneDeviceIsSerialAcrossStreams) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  Plan plan = MakePlan({{0, 0}, {1, 1}, {2, 2}}, 3, 0);
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_EQ(plan.estimated_makespan_us, 10);
  EXPECT_EQ(plan.nodes[0].estimated_start_us, 0);  // issued first
  EXPECT_EQ(plan.nodes[1].estimated_start_us, 3);
  EXPECT_EQ(plan.nodes[2].estimated_start_us, 8);
}

TEST(SimulatePlanTest, DevicesRunInParallel) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  Plan plan = MakePlan(
      {{0, 0, {}, -1, 0}, {1, 1, {}, -1, 1}, {2, 0, {}, -1, 0}}, 2, 0, {0, 1});
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_EQ(plan.estimated_makespan_us, 5);
}

TEST(SimulatePlanTest, CopyAndHostOverlapCompute) {
  Graph g = ThreeIndependent(Engine::kCompute, Engine::kCopy, Engine::kHost);
  Plan plan = MakePlan({{0, 0}, {1, 1}, {2, 2}}, 3, 0);
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_EQ(plan.estimated_makespan_us, 5);
  for (const PlannedNode& pn : plan.nodes) EXPECT_EQ(pn.estimated_start_us, 0);
}

TEST(SimulatePlanTest, WaitsHoldAStreamBack) {
  Graph g = ThreeIndependent(Engine::kCopy, Engine::kCompute, Engine::kHost);
  // b (stream 1) waits for a (stream 0, copy, 3 us); c waits for b.
  Plan plan = MakePlan({{0, 0, {}, 0}, {1, 1, {0}, 1}, {2, 2, {1}}}, 3, 2);
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_EQ(plan.nodes[1].estimated_start_us, 3);
  EXPECT_EQ(plan.nodes[2].estimated_start_us, 8);
  EXPECT_EQ(plan.estimated_makespan_us, 10);
}

TEST(SimulatePlanTest, RejectsAnEventNobodySignals) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  Plan plan = MakePlan({{0, 0}, {1, 1, {0}}, {2, 0}}, 2, 1);
  absl::Status s = SimulatePlan(g, &plan);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("never signalled"));
}

TEST(SimulatePlanTest, DetectsADeadlock) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  // Stream 0 runs a, then b; a waits for an event b signals.
  Plan plan = MakePlan({{0, 0, {0}}, {1, 0, {}, 0}, {2, 1}}, 2, 1);
  absl::Status s = SimulatePlan(g, &plan);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("deadlocks"));
}

}  // namespace
}  // namespace weft::scheduler
