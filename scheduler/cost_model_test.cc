#include "scheduler/cost_model.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::Eq;
using testing::GraphMaker;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

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
    pn.signal_event = step.signal;
    pn.device = step.device;
    plan.AddNode(pn, {}, step.waits);
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
  EXPECT_EQ(plan.estimates[1].start_us, 3);
  EXPECT_EQ(plan.estimates[2].start_us, 8);
  EXPECT_EQ(plan.estimated_makespan_us, 10);
}

TEST(SimulatePlanTest, ComputeOnOneDeviceIsSerialAcrossStreams) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  Plan plan = MakePlan({{0, 0}, {1, 1}, {2, 2}}, 3, 0);
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_EQ(plan.estimated_makespan_us, 10);
  EXPECT_EQ(plan.estimates[0].start_us, 0);  // issued first
  EXPECT_EQ(plan.estimates[1].start_us, 3);
  EXPECT_EQ(plan.estimates[2].start_us, 8);
}

TEST(SimulatePlanTest, DevicesRunInParallel) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  Plan plan = MakePlan(
      {{0, 0, {}, -1, 0}, {1, 1, {}, -1, 1}, {2, 0, {}, -1, 0}}, 2, 0, {0, 1});
  ASSERT_TRUE(SimulatePlan(g, &plan, {.model_transfers = false}).ok());
  EXPECT_EQ(plan.estimated_makespan_us, 5);
  // x holds its initial zeros: every device makes its own for free.
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_EQ(plan.estimates[1].transfer_us, 0);
  EXPECT_EQ(plan.estimated_makespan_us, 5);
}

TEST(SimulatePlanTest, CopyAndHostOverlapCompute) {
  Graph g = ThreeIndependent(Engine::kCompute, Engine::kCopy, Engine::kHost);
  Plan plan = MakePlan({{0, 0}, {1, 1}, {2, 2}}, 3, 0);
  ASSERT_TRUE(SimulatePlan(g, &plan, {.model_transfers = false}).ok());
  EXPECT_EQ(plan.estimated_makespan_us, 5);
  ASSERT_EQ(plan.estimates.size(), 3u);
  for (const NodeEstimate& e : plan.estimates) EXPECT_EQ(e.start_us, 0);
}

TEST(SimulatePlanTest, WaitsHoldAStreamBack) {
  Graph g = ThreeIndependent(Engine::kCopy, Engine::kCompute, Engine::kHost);
  // b (stream 1) waits for a (stream 0, copy, 3 us); c waits for b.
  Plan plan = MakePlan({{0, 0, {}, 0}, {1, 1, {0}, 1}, {2, 2, {1}}}, 3, 2);
  ASSERT_TRUE(SimulatePlan(g, &plan, {.model_transfers = false}).ok());
  EXPECT_EQ(plan.estimates[1].start_us, 3);
  EXPECT_EQ(plan.estimates[2].start_us, 8);
  EXPECT_EQ(plan.estimated_makespan_us, 10);
}

// a (device 0) writes a 3 MB buffer that b (device 1) reads.
Graph WriterReader(Engine reader = Engine::kCompute) {
  GraphMaker m;
  m.Buffer("x", 3000000).Buffer("y");
  m.Node("a", "x:w", {.cost = 10});
  m.Node("b", "x:r y:w", {.engine = reader, .cost = 5});
  return m.Build();
}

TEST(SimulatePlanTest, ReadersOnAnotherDevicePayATransfer) {
  Graph g = WriterReader();
  Plan plan = MakePlan({{0, 0, {}, 0, 0}, {1, 1, {0}, -1, 1}}, 2, 1, {0, 1});
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  // 3e6 bytes at 300 GB/s: 10 us after a ends at 10.
  EXPECT_DOUBLE_EQ(plan.estimates[1].transfer_us, 10);
  EXPECT_DOUBLE_EQ(plan.estimates[1].start_us, 20);
  EXPECT_DOUBLE_EQ(plan.estimated_makespan_us, 25);
  // Over a slower link.
  absl::StatusOr<Topology> slow =
      Topology::FromMatrix({{0, 100, 25}, {100, 0, 25}, {25, 25, 0}});
  ASSERT_TRUE(slow.ok());
  ASSERT_TRUE(SimulatePlan(g, &plan, {.topology = &*slow}).ok());
  EXPECT_DOUBLE_EQ(plan.estimates[1].transfer_us, 30);
  EXPECT_DOUBLE_EQ(plan.estimated_makespan_us, 45);
}

TEST(SimulatePlanTest, InitialDataComesFromTheHost) {
  std::vector<BufferSpec> buffers(2);
  buffers[0].name = "data";
  buffers[0].size_bytes = 50000;
  buffers[0].init = BufferSpec::Init::kData;
  buffers[1].name = "zeros";
  buffers[1].size_bytes = 50000;
  std::vector<NodeSpec> nodes(2);
  nodes[0].name = "uses_data";
  nodes[0].op = "spin";
  nodes[0].cost_us = 1;
  nodes[0].args = {BufferUse{0, Access::kRead}};
  nodes[1].name = "uses_zeros";
  nodes[1].op = "spin";
  nodes[1].cost_us = 1;
  nodes[1].args = {BufferUse{1, Access::kRead}};
  Graph g("init", std::move(buffers), std::move(nodes));
  Plan plan = MakePlan({{0, 0}, {1, 1}}, 2, 0);
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  // 50 kB at 25 GB/s from the host, uploaded before the first node on
  // the device's upload stream (not the node's transfer); zeros are made
  // on the device.
  EXPECT_EQ(plan.estimates[0].transfer_us, 0);
  EXPECT_DOUBLE_EQ(plan.estimates[0].start_us, 2);
  EXPECT_EQ(plan.estimates[1].transfer_us, 0);
  EXPECT_DOUBLE_EQ(plan.estimates[1].start_us, 0);
}

TEST(SimulatePlanTest, ACopyReadiedOnAnotherStreamIsWaitedFor) {
  // Two readers on device 1, on two streams, of a buffer a wrote on
  // device 0: the first copies it (3 MB at 300 GB/s), the second finds it
  // current there and waits for that copy.
  GraphMaker m;
  m.Buffer("x", 3000000).Buffer("p").Buffer("q");
  m.Node("a", "x:w", {.cost = 1});
  m.Node("b", "x:r p:w", {.cost = 1});
  m.Node("c", "x:r q:w", {.cost = 1});
  Graph g = m.Build();
  Plan plan =
      MakePlan({{0, 0, {}, 0, 0}, {1, 1, {0}, -1, 1}, {2, 2, {0}, -1, 1}}, 3, 1,
               {0, 1, 1});
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_DOUBLE_EQ(plan.estimates[1].transfer_us, 10);
  EXPECT_DOUBLE_EQ(plan.estimates[1].start_us, 11);
  EXPECT_EQ(plan.estimates[2].transfer_us, 0);
  EXPECT_DOUBLE_EQ(plan.estimates[2].start_us, 12);  // after b: one device
}

TEST(SimulatePlanTest, EachCopyEngineRunsOneCopyAtATime) {
  // Device 1 fetches x and y from device 0 on two streams (one engine
  // for both: one after the other) while uploading z from the host (an
  // engine of its own: at the same time).
  std::vector<BufferSpec> buffers(4);
  for (int b = 0; b < 4; ++b) {
    buffers[b].name = std::string(1, "xyzo"[b]);
    buffers[b].size_bytes = 3000000;
  }
  buffers[2].init = BufferSpec::Init::kData;
  std::vector<NodeSpec> nodes(4);
  auto node = [&](int i, std::string name, std::vector<BufferUse> uses,
                  Engine engine) {
    nodes[i].name = std::move(name);
    nodes[i].op = "spin";
    nodes[i].cost_us = 1;
    nodes[i].engine = engine;
    for (const BufferUse& u : uses) nodes[i].args.push_back(u);
  };
  node(0, "a", {{0, Access::kWrite}, {1, Access::kWrite}}, Engine::kCompute);
  node(1, "b", {{0, Access::kRead}}, Engine::kHost);
  node(2, "c", {{1, Access::kRead}}, Engine::kCompute);
  node(3, "d", {{2, Access::kRead}, {3, Access::kWrite}}, Engine::kCompute);
  Graph g("engines", std::move(buffers), std::move(nodes));
  // b runs on the host: x goes down on device 0's device-to-host engine
  // (120 us at 25 GB/s) while c's y crosses to device 1 (10 us) and d's z
  // comes up from the host to device 1 (120 us), all at once.
  Plan plan = MakePlan({{0, 0, {}, 0, 0},
                        {1, 1, {0}, -1, 1},
                        {2, 2, {0}, -1, 1},
                        {3, 3, {}, -1, 1}},
                       4, 1, {0, 1, 1, 1});
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_DOUBLE_EQ(plan.estimates[1].start_us, 121);
  EXPECT_DOUBLE_EQ(plan.estimates[2].start_us, 11);
  EXPECT_EQ(plan.estimates[3].transfer_us, 0);  // uploaded up front
  EXPECT_DOUBLE_EQ(plan.estimates[3].start_us, 120);
  // Two uploads, in the order of their first use, one after the other.
  std::vector<BufferSpec> up(3);
  for (int b = 0; b < 3; ++b) {
    up[b].name = std::string(1, "uvw"[b]);
    up[b].size_bytes = 2500000;  // 100 us from the host
    up[b].init = b < 2 ? BufferSpec::Init::kData : BufferSpec::Init::kZero;
  }
  std::vector<NodeSpec> readers(2);
  for (int i = 0; i < 2; ++i) {
    readers[i].name = absl::StrCat("r", i);
    readers[i].op = "spin";
    readers[i].cost_us = 1;
    readers[i].occupancy = 0.5;
    readers[i].args = {BufferUse{i, Access::kRead}};
  }
  Graph g2("uploads", std::move(up), std::move(readers));
  Plan plan2 = MakePlan({{0, 0}, {1, 1}}, 2, 0);
  ASSERT_TRUE(SimulatePlan(g2, &plan2).ok());
  EXPECT_DOUBLE_EQ(plan2.estimates[0].start_us, 100);
  EXPECT_DOUBLE_EQ(plan2.estimates[1].start_us, 200);
}

TEST(SimulatePlanTest, KernelsShareADeviceByOccupancy) {
  GraphMaker m;
  m.Buffer("x");
  for (int i = 0; i < 5; ++i) {
    m.Node(absl::StrCat("q", i), "x:r", {.cost = 10, .occupancy = 0.25});
  }
  m.Node("full", "x:r", {.cost = 4});
  Graph g = m.Build();
  Plan plan = MakePlan({{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}}, 6, 0);
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  // Four quarters fill the device; the fifth and the full one wait.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(plan.estimates[i].start_us, 0);
  EXPECT_EQ(plan.estimates[4].start_us, 10);
  EXPECT_EQ(plan.estimates[5].start_us, 20);
  EXPECT_EQ(plan.estimated_makespan_us, 24);
  // At most two kernels at once, however small.
  ASSERT_TRUE(SimulatePlan(g, &plan, {.max_concurrent_kernels = 2}).ok());
  EXPECT_EQ(plan.estimates[2].start_us, 10);
  EXPECT_EQ(plan.estimates[4].start_us, 20);
  EXPECT_EQ(plan.estimated_makespan_us, 34);
}

TEST(SimulatePlanTest, FullKernelsOnOneDeviceRunOneAtATime) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  Plan plan = MakePlan({{0, 0}, {1, 1}, {2, 2}}, 3, 0);
  ASSERT_TRUE(SimulatePlan(g, &plan, {.max_concurrent_kernels = 32}).ok());
  EXPECT_EQ(plan.estimates[1].start_us, 3);
  EXPECT_EQ(plan.estimates[2].start_us, 8);
  EXPECT_EQ(plan.estimated_makespan_us, 10);
}

TEST(SimulatePlanTest, OutputsGoBackToTheHost) {
  std::vector<BufferSpec> buffers(2);
  buffers[0].name = "out";
  buffers[0].size_bytes = 2500000;  // 100 us to the host
  buffers[0].output = true;
  buffers[1].name = "scratch";
  buffers[1].size_bytes = 2500000;
  std::vector<NodeSpec> nodes(1);
  nodes[0].name = "w";
  nodes[0].op = "spin";
  nodes[0].cost_us = 5;
  nodes[0].args = {BufferUse{0, Access::kWrite}, BufferUse{1, Access::kWrite}};
  Graph g("out", std::move(buffers), std::move(nodes));
  Plan plan = MakePlan({{0, 0}}, 1, 0);
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_DOUBLE_EQ(plan.estimated_makespan_us, 105);
}

TEST(SimulatePlanTest, RejectsATopologyWithTooFewDevices) {
  Graph g = WriterReader();
  Plan plan = MakePlan({{0, 0, {}, 0, 0}, {1, 1, {0}, -1, 1}}, 2, 1, {0, 1});
  Topology one = Topology::Default(1);
  absl::Status s = SimulatePlan(g, &plan, {.topology = &one});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("options.topology: describes 1 devices")));
}

TEST(SimulatePlanTest, RejectsAnEventNobodySignals) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  Plan plan = MakePlan({{0, 0}, {1, 1, {0}}, {2, 0}}, 2, 1);
  absl::Status s = SimulatePlan(g, &plan);
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInternal, HasSubstr("never signalled")));
}

TEST(SimulatePlanTest, DetectsADeadlock) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  // Stream 0 runs a, then b; a waits for an event b signals.
  Plan plan = MakePlan({{0, 0, {0}}, {1, 0, {}, 0}, {2, 1}}, 2, 1);
  absl::Status s = SimulatePlan(g, &plan);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                          Eq("plan node 0 waits on event 0 before the node "
                             "that signals it is issued")));
}

// A zero-initialized buffer nothing has written yet is created wherever
// it is used, for free; once written, it moves.
TEST(SimulatePlanTest, UnwrittenZerosAreMadeInPlace) {
  GraphMaker m;
  m.Buffer("y", 3000000).Buffer("o").Buffer("p").Buffer("q");
  m.Node("b", "y:r o:w", {.cost = 5});
  m.Node("c", "y:r p:w", {.cost = 2});
  m.Node("w", "y:rw", {.cost = 1});
  m.Node("d", "y:r q:w", {.cost = 1});
  Graph g = m.Build();
  Plan plan = MakePlan({{0, 0, {}, -1, 0},
                        {1, 1, {}, 0, 1},
                        {2, 0, {0}, 1, 0},
                        {3, 1, {1}, -1, 1}},
                       2, 2, {0, 1});
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_EQ(plan.estimates[1].transfer_us, 0);
  EXPECT_EQ(plan.estimates[1].start_us, 0);
  // w (device 0, after b and c) writes y; d on device 1 fetches it.
  EXPECT_EQ(plan.estimates[2].start_us, 5);
  EXPECT_DOUBLE_EQ(plan.estimates[3].transfer_us, 10);
  EXPECT_DOUBLE_EQ(plan.estimates[3].start_us, 16);
}

TEST(SimulatePlanTest, CopyBetweenDevicesOrdersBothStreams) {
  // cp copies x, which a wrote on device 0, to device 1 (stream 2), with
  // a peer stream on device 0 (stream 1): it starts after the work on
  // stream 1 before it (busy, 5 us) and `after`, behind it on stream 1,
  // starts when it ends. As the executor runs it, x first comes to device
  // 1 (3 MB at 300 GB/s) and the copy then runs on device 1's
  // device-to-device engine.
  GraphMaker m;
  m.Buffer("x", 3000000).Buffer("y", 3000000);
  m.Buffer("o").Buffer("q");
  m.Node("a", "x:w", {.cost = 2});
  m.Node("busy", "o:w", {.engine = Engine::kCopy, .cost = 5});
  m.Node("cp", "x:r y:w", {.engine = Engine::kCopy, .cost = 4});
  m.Node("after", "q:w", {.engine = Engine::kCopy, .cost = 1});
  Graph g = m.Build();
  Plan plan = MakePlan({{0, 0, {}, 0, 0},
                        {1, 1, {}, -1, 0},
                        {2, 2, {0}, -1, 1},
                        {3, 1, {}, -1, 0}},
                       3, 1, {0, 0, 1});
  plan.nodes[2].peer_stream = 1;
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_DOUBLE_EQ(plan.estimates[2].transfer_us, 10);
  EXPECT_DOUBLE_EQ(plan.estimates[2].start_us, 15);
  EXPECT_DOUBLE_EQ(plan.estimates[3].start_us, 19);
  EXPECT_DOUBLE_EQ(plan.estimated_makespan_us, 20);
  // Without the peer stream, `after` does not wait.
  plan.nodes[2].peer_stream = -1;
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  EXPECT_DOUBLE_EQ(plan.estimates[2].start_us, 12);
  EXPECT_DOUBLE_EQ(plan.estimates[3].start_us, 5);
}

TEST(SimulatePlanTest, PeerStreamMustLieOnAnotherDevice) {
  Graph g = ThreeIndependent(Engine::kCompute, Engine::kCopy, Engine::kCompute);
  Plan plan = MakePlan({{0, 0}, {1, 1}, {2, 0}}, 2, 0);
  plan.nodes[1].peer_stream = 0;  // device 0, like the node
  absl::Status s = SimulatePlan(g, &plan);
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInternal, HasSubstr("bad peer stream 0")));
}

// Buffers of different sizes read from the same device each take their
// own time; a buffer read twice by one node is fetched once.
TEST(SimulatePlanTest, TransfersAddUpPerBuffer) {
  GraphMaker m;
  m.Buffer("x", 3000000).Buffer("y", 6000000).Buffer("z", 3000000);
  m.Buffer("o").Buffer("p");
  m.Node("a", "x:w y:w z:w", {.cost = 1});
  m.Node("b", "x:r y:r x:r o:w", {.cost = 1});
  m.Node("c", "z:r p:w", {.cost = 1});
  Graph g = m.Build();
  Plan plan = MakePlan(
      {{0, 0, {}, 0, 0}, {1, 1, {0}, -1, 1}, {2, 1, {}, -1, 1}}, 2, 1, {0, 1});
  ASSERT_TRUE(SimulatePlan(g, &plan).ok());
  // 3 MB and 6 MB at 300 GB/s, then 3 MB again.
  EXPECT_DOUBLE_EQ(plan.estimates[1].transfer_us, 30);
  EXPECT_DOUBLE_EQ(plan.estimates[1].start_us, 31);
  EXPECT_DOUBLE_EQ(plan.estimates[2].transfer_us, 10);
  EXPECT_DOUBLE_EQ(plan.estimates[2].start_us, 42);
}

// a (stream 0) signals event 0; b (stream 1) waits for it; c follows a.
Schedule ThreeNodeSchedule() {
  Schedule s;
  s.node = {0, 1, 2};
  s.device = {0, 0, 0};
  s.stream = {0, 1, 0};
  s.signal = {0, -1, -1};
  s.waits.AppendRow({});
  s.waits.AppendRow({0});
  s.waits.AppendRow({});
  s.num_streams = 2;
  s.num_events = 1;
  s.num_devices = 1;
  return s;
}

TEST(SimulateScheduleTest, RunsAWellFormedSchedule) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  ScheduleTimes times;
  ASSERT_TRUE(SimulateSchedule(g, ThreeNodeSchedule(), {}, &times).ok());
  EXPECT_THAT(times.start_us, ElementsAre(0, 3, 8));
  EXPECT_EQ(times.makespan_us, 10);
  // Any negative signal means none.
  Schedule s = ThreeNodeSchedule();
  s.signal[2] = -7;
  ASSERT_TRUE(SimulateSchedule(g, s, {}, &times).ok());
  EXPECT_EQ(times.makespan_us, 10);
}

TEST(SimulateScheduleTest, NamesTheFirstBadReference) {
  Graph g =
      ThreeIndependent(Engine::kCompute, Engine::kCompute, Engine::kCompute);
  struct Case {
    void (*spoil)(Schedule&);
    const char* message;
  };
  const Case cases[] = {
      {[](Schedule& s) { s.node[1] = 7; },
       "plan node 1 refers to unknown node 7"},
      {[](Schedule& s) { s.stream[2] = 5; },
       "plan node 2 is on unknown stream 5"},
      {[](Schedule& s) { s.stream[1] = -1; },
       "plan node 1 is on unknown stream -1"},
      {[](Schedule& s) { s.device[0] = 3; }, "plan node 0 is on device 3"},
      {[](Schedule& s) { s.signal[1] = 4; }, "plan node 1 signals bad event 4"},
      {[](Schedule& s) { s.signal[2] = 0; }, "plan node 2 signals bad event 0"},
      {[](Schedule& s) { s.waits.items[0] = 9; },
       "plan node 1 waits on unknown event 9"},
      {[](Schedule& s) { s.signal[0] = -1; }, "event 0 is never signalled"},
      {[](Schedule& s) {
         s.stream[2] = 9;
         s.device[1] = 2;
       },
       "plan node 1 is on device 2"},
      {[](Schedule& s) { s.num_events = -1; },
       "the plan has 2 streams and -1 events"},
      {[](Schedule& s) { s.num_streams = -2; },
       "the plan has -2 streams and 1 events"},
      {[](Schedule& s) { s.waits.offsets.back() += 2; },
       "the plan's rows of waits are malformed"},
      {[](Schedule& s) { s.waits.offsets[0] = 1; },
       "the plan's rows of waits are malformed"},
  };
  for (const Case& c : cases) {
    Schedule s = ThreeNodeSchedule();
    c.spoil(s);
    ScheduleTimes times;
    absl::Status status = SimulateSchedule(g, s, {}, &times);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInternal, Eq(c.message)))
        << c.message;
  }
}

}  // namespace
}  // namespace weft::scheduler
