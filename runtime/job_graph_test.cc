#include "runtime/job_graph.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor_test_util.h"
#include "scheduler/benchmark_graphs.h"
#include "scheduler/planner.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using executor_testing::TestJob;
using executor_testing::Use;
using executor_testing::VectorPipeline;
using scheduler::Access;
using scheduler::DType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

// Builds with buffer b on device d at base + b * 0x1000 + d * 0x100000.
absl::StatusOr<JobGraphs> BuildPlan(
    std::shared_ptr<const scheduler::Graph> graph,
    std::shared_ptr<const scheduler::Plan> plan, uint64_t base = 0x10000,
    std::vector<std::string> ops = {}) {
  JobGraphInputs in;
  in.graph = graph.get();
  in.plan = plan.get();
  in.buffer = [base](scheduler::BufferId b, int device) {
    return DevicePtr{device, base + b * 0x1000 + device * 0x100000};
  };
  in.supports_op = [ops](const std::string& op) {
    return ops.empty() || std::find(ops.begin(), ops.end(), op) != ops.end();
  };
  return BuildJobGraphs(in);
}

absl::StatusOr<JobGraphs> Build(const TestJob& job, uint64_t base = 0x10000,
                                std::vector<std::string> ops = {}) {
  return BuildPlan(job.graph(), job.plan(), base, std::move(ops));
}

std::vector<DeviceGraphNodeKind> Kinds(const DeviceGraph& g) {
  std::vector<DeviceGraphNodeKind> kinds;
  for (const DeviceGraphNode& node : g.nodes) kinds.push_back(node.kind);
  return kinds;
}

using K = DeviceGraphNodeKind;

// A zero buffer read on two devices before anything writes it is zeroed
// in place on both, as on streams (nothing reads device 0's copy for it),
// and each fill follows its node's predecessors on the stream: the memory
// may hold another buffer until they finish.
TEST(JobGraphTest, UnwrittenBuffersAreFilledInPlaceAfterThePredecessors) {
  TestJob job(2, {0, 1});
  const int a = job.Buffer("a", 64, DType::kFloat32);
  const int z = job.Buffer("z", 64, DType::kFloat32);
  const int out0 = job.Buffer("out0", 4, DType::kFloat32);
  const int out1 = job.Buffer("out1", 4, DType::kFloat32);
  job.Node("write_a", "fill", {Use(a, Access::kWrite), 1.0}, 0);
  job.Node("sum0", "reduce_sum",
           {Use(z, Access::kRead), Use(out0, Access::kWrite)}, 0);
  job.Node("sum1", "reduce_sum",
           {Use(z, Access::kRead), Use(out1, Access::kWrite)}, 1);
  absl::StatusOr<JobGraphs> graphs = Build(job);
  ASSERT_TRUE(graphs.ok()) << graphs.status();
  ASSERT_EQ(graphs->graphs.size(), 2u);
  const DeviceGraph& first = graphs->graphs[0].graph;
  const DeviceGraph& second = graphs->graphs[1].graph;
  // a's init, write_a, z's init after write_a, out0's init, sum0.
  ASSERT_THAT(Kinds(first), ElementsAre(K::kKernel, K::kKernel, K::kKernel,
                                        K::kKernel, K::kKernel));
  EXPECT_EQ(first.nodes[2].launch.op, "fill");
  EXPECT_THAT(first.nodes[2].deps, ElementsAre(1));
  // z zeroed on device 1 too, not copied from device 0.
  EXPECT_THAT(Kinds(second), ElementsAre(K::kKernel, K::kKernel, K::kKernel));
  EXPECT_EQ(second.nodes[0].launch.op, "fill");
  EXPECT_EQ(second.nodes[0].launch.args.size(), 2u);
}

TEST(JobGraphTest, DevicesTakingTurnsGetOneGraphPerTurn) {
  absl::StatusOr<JobGraphs> graphs = Build(VectorPipeline(2));
  ASSERT_TRUE(graphs.ok()) << graphs.status();
  ASSERT_EQ(graphs->graphs.size(), 3u);
  const JobDeviceGraph& first = graphs->graphs[0];
  const JobDeviceGraph& second = graphs->graphs[1];
  const JobDeviceGraph& third = graphs->graphs[2];
  EXPECT_EQ(first.graph.device, 0);
  EXPECT_EQ(second.graph.device, 1);
  EXPECT_EQ(third.graph.device, 0);
  EXPECT_EQ(first.segment, 0);
  EXPECT_EQ(second.segment, 1);
  EXPECT_EQ(third.segment, 2);
  // x's zero init, the fill node, the record for device 1.
  EXPECT_THAT(Kinds(first.graph),
              ElementsAre(K::kKernel, K::kKernel, K::kEventRecord));
  EXPECT_EQ(first.graph.nodes[0].launch.op, "fill");
  EXPECT_THAT(first.graph.nodes[1].deps, ElementsAre(0));
  EXPECT_THAT(first.graph.nodes[2].deps, ElementsAre(1));
  // Wait, copy x over, wait for y's upload (on axpy's lane, after its
  // predecessors), axpy, record.
  EXPECT_THAT(Kinds(second.graph),
              ElementsAre(K::kEventWait, K::kCopy, K::kEventWait, K::kKernel,
                          K::kEventRecord));
  EXPECT_THAT(second.graph.nodes[1].deps, ElementsAre(0));
  EXPECT_EQ(second.graph.nodes[1].src.device, 0);
  EXPECT_EQ(second.graph.nodes[1].dst.device, 1);
  EXPECT_THAT(second.graph.nodes[2].deps, ElementsAre(0, 1));
  EXPECT_THAT(second.graph.nodes[3].deps, ElementsAre(0, 1, 2));
  ASSERT_EQ(second.uploads.size(), 1u);
  EXPECT_EQ(second.uploads[0].buffer, 1);
  EXPECT_EQ(second.uploads[0].wait_node, 2);
  EXPECT_EQ(second.uploads[0].order, 0);
  // Waits for fill on device 0 (the first graph runs on a stream of its
  // own) and for axpy, copy y back, sum's fill init, reduce_sum, and the
  // record that sum's download waits for.
  EXPECT_THAT(Kinds(third.graph),
              ElementsAre(K::kEventWait, K::kEventWait, K::kCopy, K::kKernel,
                          K::kKernel, K::kEventRecord));
  EXPECT_THAT(third.graph.nodes[4].deps, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(third.graph.nodes[5].deps, ElementsAre(4));
  EXPECT_THAT(graphs->event_devices, ElementsAre(0, 1, 0));
  EXPECT_THAT(graphs->latest, ElementsAre(0, 1, 0));
  // y downloads after axpy's stream (the record device 0 waits for too),
  // sum after reduce's.
  ASSERT_EQ(graphs->downloads.size(), 2u);
  EXPECT_EQ(graphs->downloads[0].buffer, 1);
  EXPECT_EQ(graphs->downloads[0].logical_stream, 1);
  EXPECT_EQ(graphs->downloads[0].event, 1);
  EXPECT_EQ(graphs->downloads[1].buffer, 2);
  EXPECT_EQ(graphs->downloads[1].logical_stream, 0);
  EXPECT_EQ(graphs->downloads[1].event, 2);
  // Valid once the events are in.
  EXPECT_FALSE(ValidateDeviceGraph(first.graph).ok());
  AssignJobGraphEvents(*graphs,
                       {EventHandle{1}, EventHandle{2}, EventHandle{3}});
  EXPECT_FALSE(ValidateDeviceGraph(graphs->graphs[1].graph).ok());
  graphs->graphs[1].graph.nodes[2].event = EventHandle{4};
  for (const JobDeviceGraph& g : graphs->graphs) {
    const absl::Status s = ValidateDeviceGraph(g.graph);
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_THAT(first.plan_indices, ElementsAre(0));
  EXPECT_THAT(third.plan_indices, ElementsAre(2));
}

TEST(JobGraphTest, ParametersLeaveSignaturesAlone) {
  absl::StatusOr<JobGraphs> a = Build(VectorPipeline(2), 0x10000);
  absl::StatusOr<JobGraphs> b = Build(VectorPipeline(7), 0x7770000);
  absl::StatusOr<JobGraphs> c = Build(VectorPipeline(2, 512), 0x10000);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  for (size_t i = 0; i < a->graphs.size(); ++i) {
    EXPECT_EQ(DeviceGraphSignature(a->graphs[i].graph),
              DeviceGraphSignature(b->graphs[i].graph));
    EXPECT_NE(DeviceGraphSignature(a->graphs[i].graph),
              DeviceGraphSignature(c->graphs[i].graph));
  }
}

TEST(JobGraphTest, EventsAreAssignedToTheirNodes) {
  absl::StatusOr<JobGraphs> graphs = Build(VectorPipeline(2));
  ASSERT_TRUE(graphs.ok());
  AssignJobGraphEvents(*graphs,
                       {EventHandle{41}, EventHandle{42}, EventHandle{43}});
  EXPECT_EQ(graphs->graphs[0].graph.nodes[2].event.value, 41u);
  EXPECT_EQ(graphs->graphs[1].graph.nodes[0].event.value, 41u);
  EXPECT_EQ(graphs->graphs[1].graph.nodes[4].event.value, 42u);
  EXPECT_EQ(graphs->graphs[2].graph.nodes[0].event.value, 41u);
  EXPECT_EQ(graphs->graphs[2].graph.nodes[1].event.value, 42u);
  EXPECT_EQ(graphs->graphs[2].graph.nodes[5].event.value, 43u);
  // The upload's wait is the executor's to fill.
  EXPECT_EQ(graphs->graphs[1].graph.nodes[2].event.value, 0u);
}

TEST(JobGraphTest, BranchesOnOneDeviceShareAGraph) {
  TestJob job(2, {0, 0});
  const int x = job.Buffer("x", 64, DType::kFloat32);
  const int y = job.Buffer("y", 64, DType::kFloat32);
  job.Node("a", "fill", {Use(x, Access::kWrite), 1.0}, 0);
  job.Node("b", "fill", {Use(y, Access::kWrite), 2.0}, 1, {}, 0);
  job.Node(
      "c", "add",
      {Use(x, Access::kRead), Use(y, Access::kRead), Use(x, Access::kWrite)}, 0,
      {0});
  absl::StatusOr<JobGraphs> graphs = Build(job);
  ASSERT_TRUE(graphs.ok()) << graphs.status();
  ASSERT_EQ(graphs->graphs.size(), 1u);
  const DeviceGraph& g = graphs->graphs[0].graph;
  // Two zero inits, a, b, c.
  ASSERT_EQ(g.nodes.size(), 5u);
  EXPECT_THAT(g.nodes[1].deps, ElementsAre(0));
  EXPECT_THAT(g.nodes[3].deps, ElementsAre(2));
  EXPECT_THAT(g.nodes[4].deps, ElementsAre(1, 3));
  EXPECT_TRUE(graphs->event_devices.empty());
}

TEST(JobGraphTest, PeerStreamsOrderBothDevices) {
  // a on device 0; b on device 1 also holding device 0's stream; c after
  // it on device 0's stream.
  TestJob job(2, {0, 1});
  const int x = job.Buffer("x", 64, DType::kFloat32);
  job.Node("a", "fill", {Use(x, Access::kWrite), 1.0}, 0);
  job.Node("b", "spin", {}, 1);
  job.Node("c", "spin", {}, 0);
  scheduler::Plan plan = *job.plan();
  plan.nodes[1].peer_stream = 0;
  absl::StatusOr<JobGraphs> graphs = BuildPlan(
      job.graph(), std::make_shared<const scheduler::Plan>(std::move(plan)));
  ASSERT_TRUE(graphs.ok()) << graphs.status();
  ASSERT_EQ(graphs->graphs.size(), 3u);
  EXPECT_EQ(graphs->graphs[0].graph.device, 0);  // a
  EXPECT_EQ(graphs->graphs[1].graph.device, 1);  // b, after a
  EXPECT_EQ(graphs->graphs[2].graph.device, 0);  // c, after b
  EXPECT_THAT(Kinds(graphs->graphs[1].graph),
              ElementsAre(K::kEventWait, K::kKernel, K::kEventRecord));
  EXPECT_THAT(Kinds(graphs->graphs[2].graph),
              ElementsAre(K::kEventWait, K::kKernel));
  EXPECT_THAT(graphs->graphs[2].plan_indices, ElementsAre(2));
}

// Each device's graphs, in launch order, hold its nodes in the plan's
// order, so its kernel slots and copy engines take the graphs' work in the
// order the plan booked it: over the schedule cases of up to 300 nodes on
// 2, 4 and 8 devices, where devices take turns in every way the planner
// makes them.
TEST(JobGraphTest, EachDevicesGraphsKeepThePlansOrder) {
  int checked = 0;
  for (scheduler::BenchmarkCase& c : scheduler::AllScheduleCases()) {
    if (c.graph.num_nodes() > 300) continue;
    auto graph = std::make_shared<const scheduler::Graph>(std::move(c.graph));
    for (int devices : {2, 4, 8}) {
      scheduler::PlannerOptions options;
      options.num_devices = devices;
      options.topology = scheduler::Topology::Default(devices);
      options.explain = false;
      absl::StatusOr<scheduler::Plan> plan = PlanGraph(*graph, options);
      ASSERT_TRUE(plan.ok()) << c.name << ": " << plan.status();
      absl::StatusOr<JobGraphs> graphs = BuildPlan(
          graph, std::make_shared<const scheduler::Plan>(*std::move(plan)));
      ASSERT_TRUE(graphs.ok()) << c.name << ": " << graphs.status();
      std::vector<int> last(devices, -1);
      for (const JobDeviceGraph& g : graphs->graphs) {
        for (int i : g.plan_indices) {
          EXPECT_GT(i, last[g.graph.device])
              << c.name << " on " << devices << " devices: device "
              << g.graph.device << " (segment " << g.segment << ")";
          last[g.graph.device] = i;
        }
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(JobGraphTest, HostNodesDoNotFit) {
  TestJob job(2, {0, 0});
  job.HostStream(1);
  job.Node("h", "spin", {}, 1);
  absl::StatusOr<JobGraphs> graphs = Build(job);
  EXPECT_THAT(graphs.status(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("node 'h' runs on the host")));
}

TEST(JobGraphTest, OpsTheBackendCannotGraphDoNotFit) {
  absl::StatusOr<JobGraphs> graphs =
      Build(VectorPipeline(2), 0x10000, {"fill", "axpy"});
  EXPECT_THAT(
      graphs.status(),
      StatusIs(
          absl::StatusCode::kUnimplemented,
          HasSubstr(
              "node 'reduce': op 'reduce_sum' cannot go into a device graph")));
}

}  // namespace
}  // namespace weft::runtime
