#include "scheduler/stream_assignment.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/cost_model.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using testing::GraphMaker;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Why = StreamChoice::Why;

// Runs inference and stream assignment; devices come from pins (default 0).
struct Assigned {
  Graph graph;
  Dag dag;
  Plan plan;
  std::vector<StreamChoice> choices;

  const PlannedNode& node(const std::string& name) const {
    return plan.nodes[dag.pos(graph.FindNode(name))];
  }
  int stream(const std::string& name) const { return node(name).stream; }
  absl::Span<const NodeId> deps(const std::string& name) const {
    return plan.Deps(dag.pos(graph.FindNode(name)));
  }
  absl::Span<const int32_t> waits(const std::string& name) const {
    return plan.Waits(dag.pos(graph.FindNode(name)));
  }
  Why why(const std::string& name) const {
    return choices[graph.FindNode(name)].why;
  }
};

absl::StatusOr<Assigned> TryAssign(Graph graph, StreamOptions options = {}) {
  absl::StatusOr<Dag> dag = InferDependencies(graph);
  if (!dag.ok()) return dag.status();
  Assigned a{std::move(graph), std::move(dag).value(), Plan(), {}};
  CostLevels levels = ComputeCostLevels(a.graph, a.dag);
  a.plan.num_devices = 1;
  for (NodeId v : a.dag.order) {
    PlannedNode pn;
    pn.node = v;
    pn.device = a.graph.node(v).device.value_or(0);
    a.plan.num_devices = std::max(a.plan.num_devices, pn.device + 1);
    a.plan.AddNode(pn, a.dag.Preds(v), {});
  }
  absl::StatusOr<std::vector<StreamChoice>> choices =
      AssignStreams(a.graph, a.dag, levels, options, &a.plan);
  if (!choices.ok()) return choices.status();
  a.choices = std::move(choices).value();
  return a;
}

Assigned Assign(Graph graph, StreamOptions options = {}) {
  absl::StatusOr<Assigned> a = TryAssign(std::move(graph), options);
  EXPECT_TRUE(a.ok()) << a.status();
  return std::move(a).value();
}

TEST(StreamAssignmentTest, ChainUsesOneStream) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:rw").Node("c", "x:rw");
  m.Node("d", "x:r");
  Assigned a = Assign(m.Build());
  EXPECT_EQ(a.plan.streams.size(), 1u);
  EXPECT_EQ(a.plan.num_events, 0);
  for (const char* n : {"a", "b", "c", "d"}) {
    EXPECT_EQ(a.stream(n), 0) << n;
    EXPECT_THAT(a.waits(n), IsEmpty());
    EXPECT_EQ(a.node(n).signal_event, -1);
  }
  EXPECT_EQ(a.why("a"), Why::kNew);
  EXPECT_EQ(a.why("b"), Why::kChain);
  EXPECT_EQ(a.choices[a.graph.FindNode("c")].related, a.graph.FindNode("b"));
}

TEST(StreamAssignmentTest, ReturnsChoicesWhateverTheOptionSays) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:rw");
  Assigned a = Assign(m.Build(), {.record_choices = false});
  ASSERT_EQ(a.choices.size(), 2u);
  EXPECT_EQ(a.why("a"), Why::kNew);
  EXPECT_EQ(a.why("b"), Why::kChain);
}

// src -> {b1, b2, b3} -> join; b2 is the most expensive branch.
GraphMaker ForkJoin(double c1, double c2, double c3) {
  GraphMaker m;
  m.Buffer("x").Buffer("y1").Buffer("y2").Buffer("y3");
  m.Node("src", "x:w");
  m.Node("b1", "x:r y1:w", {.cost = c1});
  m.Node("b2", "x:r y2:w", {.cost = c2});
  m.Node("b3", "x:r y3:w", {.cost = c3});
  m.Node("join", "y1:r y2:r y3:r");
  return m;
}

TEST(StreamAssignmentTest, ForkJoinFollowsTheHighestRankedBranch) {
  Assigned a = Assign(ForkJoin(1, 5, 2).Build());
  ASSERT_EQ(a.plan.streams.size(), 3u);
  EXPECT_EQ(a.stream("src"), 0);
  EXPECT_EQ(a.stream("b1"), 1);
  EXPECT_EQ(a.stream("b2"), 0);  // the critical branch stays on stream 0
  EXPECT_EQ(a.stream("b3"), 2);
  EXPECT_EQ(a.stream("join"), 0);
  EXPECT_EQ(a.why("b2"), Why::kChain);
  EXPECT_EQ(a.why("join"), Why::kChain);
  EXPECT_EQ(a.why("b1"), Why::kNew);
  // Events: src signals 0 (waited by b1 and b3); b1 and b3 signal 1 and 2.
  EXPECT_EQ(a.plan.num_events, 3);
  EXPECT_EQ(a.node("src").signal_event, 0);
  EXPECT_EQ(a.node("b1").signal_event, 1);
  EXPECT_EQ(a.node("b2").signal_event, -1);
  EXPECT_EQ(a.node("b3").signal_event, 2);
  EXPECT_THAT(a.waits("b1"), ElementsAre(0));
  EXPECT_THAT(a.waits("b2"), IsEmpty());
  EXPECT_THAT(a.waits("b3"), ElementsAre(0));
  EXPECT_THAT(a.waits("join"), ElementsAre(1, 2));
}

TEST(StreamAssignmentTest, ForkJoinTiesGoToTheLowerNode) {
  Assigned a = Assign(ForkJoin(1, 1, 1).Build());
  EXPECT_EQ(a.stream("src"), 0);
  EXPECT_EQ(a.stream("b1"), 0);
  EXPECT_EQ(a.stream("b2"), 1);
  EXPECT_EQ(a.stream("b3"), 2);
  EXPECT_EQ(a.stream("join"), 0);
  EXPECT_EQ(a.plan.num_events, 3);
}

TEST(StreamAssignmentTest, RecyclesAStreamWhoseLastNodeIsAnAncestor) {
  GraphMaker m;
  m.Buffer("x").Buffer("p").Buffer("q").Buffer("y").Buffer("r").Buffer("s");
  m.Node("src", "x:w");
  m.Node("a1", "x:r p:w").Node("a2", "x:r q:w");
  m.Node("j1", "p:r q:r y:w");
  m.Node("c1", "y:r r:w").Node("c2", "y:r s:w");
  m.Node("j2", "r:r s:r");
  Assigned a = Assign(m.Build());
  ASSERT_EQ(a.plan.streams.size(), 2u);
  EXPECT_EQ(a.stream("src"), 0);
  EXPECT_EQ(a.stream("a1"), 0);
  EXPECT_EQ(a.stream("a2"), 1);
  EXPECT_EQ(a.stream("j1"), 0);
  EXPECT_EQ(a.stream("c1"), 0);
  EXPECT_EQ(a.stream("c2"), 1);
  EXPECT_EQ(a.stream("j2"), 0);
  EXPECT_EQ(a.why("c2"), Why::kRecycled);
  EXPECT_EQ(a.choices[a.graph.FindNode("c2")].related, a.graph.FindNode("a2"));
  // src, a2, j1 and c2 signal; c2's stream must still wait for j1.
  EXPECT_EQ(a.plan.num_events, 4);
  EXPECT_THAT(a.waits("a2"), ElementsAre(0));
  EXPECT_THAT(a.waits("j1"), ElementsAre(1));
  EXPECT_THAT(a.waits("c2"), ElementsAre(2));
  EXPECT_THAT(a.waits("j2"), ElementsAre(3));
}

TEST(StreamAssignmentTest, VectorClocksDropWaitsImpliedThroughAThirdStream) {
  // Streams forced by labels: A on s0; B then X on s1; Y on s2.
  // B waits for A, so once s2 has waited for X (after B on s1) it knows A
  // is done: Y needs no wait on A although A -> Y is a direct dependency.
  GraphMaker m;
  m.Buffer("a").Buffer("b").Buffer("x");
  m.Node("A", "a:w", {.label = "s0"});
  m.Node("B", "a:r b:w", {.label = "s1"});
  m.Node("X", "x:w", {.label = "s1"});
  m.Node("Y", "a:r x:r", {.label = "s2"});
  Assigned a = Assign(m.Build());
  ASSERT_EQ(a.plan.streams.size(), 3u);
  EXPECT_THAT(a.deps("Y"),
              ElementsAre(a.graph.FindNode("A"), a.graph.FindNode("X")));
  EXPECT_EQ(a.plan.num_events, 2);
  EXPECT_THAT(a.waits("B"), ElementsAre(0));  // A
  EXPECT_EQ(a.node("X").signal_event, 1);
  EXPECT_THAT(a.waits("Y"), ElementsAre(1));  // X only
  EXPECT_EQ(a.node("A").signal_event, 0);
}

TEST(StreamAssignmentTest, RepeatedWaitOnTheSameStreamIsDropped) {
  // c1 and c2 both need src, on another stream; the second wait is implied.
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("src", "x:w", {.label = "p"});
  m.Node("c1", "x:r y:w", {.label = "q"});
  m.Node("c2", "x:r y:rw", {.label = "q"});
  Assigned a = Assign(m.Build());
  EXPECT_EQ(a.plan.num_events, 1);
  EXPECT_THAT(a.waits("c1"), ElementsAre(0));
  EXPECT_THAT(a.waits("c2"), IsEmpty());
}

TEST(StreamAssignmentTest, LabelsShareAStream) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w", {.label = "io"});
  m.Node("b", "y:w", {.label = "io"});
  m.Node("c", "z:w");
  m.Node("d", "x:r", {.label = "other"});
  Assigned a = Assign(m.Build());
  ASSERT_EQ(a.plan.streams.size(), 3u);
  EXPECT_EQ(a.stream("a"), 0);
  EXPECT_EQ(a.stream("b"), 0);  // independent, but the same label
  EXPECT_EQ(a.stream("c"), 1);
  EXPECT_EQ(a.stream("d"), 2);
  EXPECT_EQ(a.plan.streams[0].label, "io");
  EXPECT_EQ(a.plan.streams[1].label, "");
  EXPECT_EQ(a.plan.streams[2].label, "other");
  EXPECT_EQ(a.why("b"), Why::kLabel);
  EXPECT_THAT(a.waits("d"), ElementsAre(0));
}

TEST(StreamAssignmentTest, UnlabelledNodesNeverJoinALabelStream) {
  GraphMaker m;
  m.Buffer("x");
  m.Node("a", "x:w", {.label = "io"}).Node("b", "x:rw");
  Assigned a = Assign(m.Build());
  EXPECT_EQ(a.stream("a"), 0);
  EXPECT_EQ(a.stream("b"), 1);
  EXPECT_EQ(a.plan.num_events, 1);
}

TEST(StreamAssignmentTest, EnginesGetTheirOwnStreams) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("a", "x:w");
  m.Node("c", "x:r y:w", {.engine = Engine::kCopy});
  m.Node("b", "y:rw");
  m.Node("h", "y:r", {.engine = Engine::kHost});
  Assigned a = Assign(m.Build());
  ASSERT_EQ(a.plan.streams.size(), 3u);
  EXPECT_EQ(a.stream("a"), 0);
  EXPECT_EQ(a.stream("c"), 1);
  EXPECT_EQ(a.stream("b"), 0);
  EXPECT_EQ(a.stream("h"), 2);
  EXPECT_EQ(a.plan.streams[0].engine, Engine::kCompute);
  EXPECT_EQ(a.plan.streams[1].engine, Engine::kCopy);
  EXPECT_EQ(a.plan.streams[2].engine, Engine::kHost);
  EXPECT_EQ(a.why("b"), Why::kRecycled);
  EXPECT_EQ(a.plan.num_events, 3);  // a -> c, c -> b, b -> h
}

TEST(StreamAssignmentTest, SingleModeUsesOneStreamPerDevice) {
  GraphMaker m = ForkJoin(1, 5, 2);
  Assigned a = Assign(m.Build(), {.mode = StreamMode::kSingle});
  ASSERT_EQ(a.plan.streams.size(), 1u);
  EXPECT_EQ(a.plan.num_events, 0);
  for (const PlannedNode& pn : a.plan.nodes) EXPECT_EQ(pn.stream, 0);
  EXPECT_EQ(a.why("b3"), Why::kSingle);
}

TEST(StreamAssignmentTest, SingleModeAcrossDevices) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("a", "x:w", {.device = 1});
  m.Node("b", "x:r y:w", {.device = 0});
  m.Node("c", "y:r", {.engine = Engine::kHost, .device = 1});
  Assigned a = Assign(m.Build(), {.mode = StreamMode::kSingle});
  ASSERT_EQ(a.plan.streams.size(), 2u);
  EXPECT_EQ(a.plan.streams[0].device, 1);
  EXPECT_EQ(a.plan.streams[1].device, 0);
  EXPECT_EQ(a.stream("a"), 0);
  EXPECT_EQ(a.stream("b"), 1);
  EXPECT_EQ(a.stream("c"), 0);
  EXPECT_EQ(a.plan.num_events, 2);
}

TEST(StreamAssignmentTest, SingleModeRejectsLabels) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:r", {.label = "io"});
  absl::StatusOr<Assigned> a =
      TryAssign(m.Build(), {.mode = StreamMode::kSingle});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()),
              HasSubstr("graph.nodes[1].stream_label: stream label 'io' is "
                        "not allowed in SINGLE stream mode"));
}

TEST(StreamAssignmentTest, SoftCapSharesTheEarliestStream) {
  Assigned a = Assign(ForkJoin(1, 1, 1).Build(), {.max_streams_per_device = 1});
  ASSERT_EQ(a.plan.streams.size(), 1u);
  EXPECT_EQ(a.plan.num_events, 0);
  EXPECT_EQ(a.why("b2"), Why::kSoftCap);
  EXPECT_EQ(a.choices[a.graph.FindNode("b2")].related, a.graph.FindNode("b1"));
  EXPECT_EQ(a.why("b3"), Why::kSoftCap);
  EXPECT_EQ(a.choices[a.graph.FindNode("b3")].related, a.graph.FindNode("b2"));
}

TEST(StreamAssignmentTest, SoftCapPicksTheStreamThatFreesUpFirst) {
  // Two long chains fill the cap of 2; z joins the one whose node before
  // it ends first (chain q: q0 costs 1, chain p: p0 costs 10).
  GraphMaker m;
  m.Buffer("p").Buffer("q").Buffer("z");
  m.Node("p0", "p:w", {.cost = 10}).Node("q0", "q:w", {.cost = 1});
  m.Node("z", "z:w").Node("p1", "p:rw").Node("q1", "q:rw");
  Assigned a = Assign(m.Build(), {.max_streams_per_device = 2});
  ASSERT_EQ(a.plan.streams.size(), 2u);
  EXPECT_EQ(a.stream("p0"), 0);
  EXPECT_EQ(a.stream("q0"), 1);
  EXPECT_EQ(a.stream("z"), 1);
  EXPECT_EQ(a.why("z"), Why::kSoftCap);
  EXPECT_EQ(a.choices[a.graph.FindNode("z")].related, a.graph.FindNode("q0"));
}

TEST(StreamAssignmentTest, SoftCapMayInterleaveWithAReservedChain) {
  // The chain src -> a -> b holds stream 0 beyond z; at a cap of 1, z runs
  // on it between src and a, in issue order.
  GraphMaker m;
  m.Buffer("x").Buffer("z");
  m.Node("src", "x:w").Node("z", "z:w").Node("a", "x:rw").Node("b", "x:rw");
  Assigned a = Assign(m.Build(), {.max_streams_per_device = 1});
  ASSERT_EQ(a.plan.streams.size(), 1u);
  EXPECT_EQ(a.stream("z"), 0);
  EXPECT_EQ(a.why("z"), Why::kSoftCap);
  EXPECT_EQ(a.choices[a.graph.FindNode("z")].related, a.graph.FindNode("src"));
  EXPECT_EQ(a.plan.num_events, 0);
}

TEST(StreamAssignmentTest, RankTiesPreferAnOpTheStreamAlreadyRan) {
  GraphMaker m;
  m.Buffer("x").Buffer("p").Buffer("q");
  m.Node("src", "x:w", {.op = "gemm"});
  m.Node("relu", "x:r p:w", {.op = "relu"});
  m.Node("gemm2", "x:r q:w", {.op = "gemm"});
  Assigned a = Assign(m.Build());
  EXPECT_EQ(a.stream("src"), 0);
  EXPECT_EQ(a.stream("gemm2"), 0);
  EXPECT_EQ(a.stream("relu"), 1);
}

TEST(StreamAssignmentTest, RejectsZeroCap) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w");
  absl::StatusOr<Assigned> a =
      TryAssign(m.Build(), {.max_streams_per_device = 0});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(a.status().message()),
              HasSubstr("options.max_streams_per_device"));
}

TEST(StreamAssignmentTest, CopyBetweenDevicesGetsAPeerStream) {
  // a writes x on device 1; cp copies it on device 0; c reads the copy.
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w", {.device = 1});
  m.Node("cp", "x:r y:w", {.engine = Engine::kCopy, .device = 0});
  m.Node("c", "y:r z:w", {.device = 0});
  Assigned a = Assign(m.Build());
  ASSERT_EQ(a.plan.streams.size(), 4u);
  EXPECT_EQ(a.stream("a"), 0);
  EXPECT_EQ(a.stream("cp"), 1);
  EXPECT_EQ(a.node("cp").peer_stream, 2);
  EXPECT_EQ(a.plan.streams[2].device, 1);
  EXPECT_EQ(a.plan.streams[2].engine, Engine::kCopy);
  EXPECT_EQ(a.stream("c"), 3);
  EXPECT_EQ(a.node("a").peer_stream, -1);
  EXPECT_EQ(a.node("c").peer_stream, -1);
  EXPECT_EQ(a.plan.num_events, 2);  // a -> cp, cp -> c
}

}  // namespace
}  // namespace weft::scheduler
