#include "scheduler/passes/assign_by_dependency_pass.h"

#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/passes/pass_test_util.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using testing::GraphMaker;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::PassFixture;
using Why = StreamChoice::Why;
using ::weft::testing::StatusIs;

// src -> {b1, b2, b3} -> join; b2 is the most expensive branch.
Graph ForkJoin(double c1, double c2, double c3) {
  GraphMaker m;
  m.Buffer("x").Buffer("y1").Buffer("y2").Buffer("y3");
  m.Node("src", "x:w");
  m.Node("b1", "x:r y1:w", {.cost = c1});
  m.Node("b2", "x:r y2:w", {.cost = c2});
  m.Node("b3", "x:r y3:w", {.cost = c3});
  m.Node("join", "y1:r y2:r y3:r");
  return m.Build();
}

TEST(AssignByDependencyPassTest, ChainUsesOneStream) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:rw").Node("c", "x:r");
  PassFixture f(m.Build());
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  EXPECT_EQ(f.context().streams.size(), 1u);
  EXPECT_EQ(f.stream("a"), 0);
  EXPECT_EQ(f.stream("c"), 0);
  EXPECT_EQ(f.choice("a").why, Why::kNew);
  EXPECT_EQ(f.choice("c").why, Why::kChain);
  EXPECT_EQ(f.choice("c").related, f.id("b"));
}

TEST(AssignByDependencyPassTest, FollowsTheHighestRankedBranch) {
  PassFixture f(ForkJoin(1, 5, 2));
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  EXPECT_EQ(f.context().streams.size(), 3u);
  EXPECT_EQ(f.stream("src"), 0);
  EXPECT_EQ(f.stream("b2"), 0);  // the critical branch stays on stream 0
  EXPECT_EQ(f.stream("join"), 0);
  EXPECT_EQ(f.stream("b1"), 1);
  EXPECT_EQ(f.stream("b3"), 2);
  EXPECT_EQ(f.choice("b1").why, Why::kNew);
}

TEST(AssignByDependencyPassTest, RankTiesGoToTheLowerNode) {
  PassFixture f(ForkJoin(1, 1, 1));
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  EXPECT_EQ(f.stream("b1"), 0);
  EXPECT_EQ(f.stream("b2"), 1);
  EXPECT_EQ(f.stream("b3"), 2);
}

TEST(AssignByDependencyPassTest, RankTiesPreferAnOpTheStreamAlreadyRan) {
  GraphMaker m;
  m.Buffer("x").Buffer("p").Buffer("q");
  m.Node("src", "x:w", {.op = "gemm"});
  m.Node("relu", "x:r p:w", {.op = "relu"});
  m.Node("gemm2", "x:r q:w", {.op = "gemm"});
  PassFixture f(m.Build());
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  EXPECT_EQ(f.stream("gemm2"), 0);
  EXPECT_EQ(f.stream("relu"), 1);
}

TEST(AssignByDependencyPassTest, RecyclesAStreamWhoseLastNodeIsAnAncestor) {
  GraphMaker m;
  m.Buffer("x").Buffer("p").Buffer("q").Buffer("y").Buffer("r").Buffer("s");
  m.Node("src", "x:w");
  m.Node("a1", "x:r p:w").Node("a2", "x:r q:w");
  m.Node("j1", "p:r q:r y:w");
  m.Node("c1", "y:r r:w").Node("c2", "y:r s:w");
  m.Node("j2", "r:r s:r");
  PassFixture f(m.Build());
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 2u);
  EXPECT_EQ(f.stream("a2"), 1);
  EXPECT_EQ(f.stream("c2"), 1);
  EXPECT_EQ(f.choice("c2").why, Why::kRecycled);
  EXPECT_EQ(f.choice("c2").related, f.id("a2"));
}

TEST(AssignByDependencyPassTest, EnginesNeverShareAStream) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("a", "x:w");
  m.Node("c", "x:r y:w", {.engine = Engine::kCopy});
  m.Node("b", "y:rw");
  m.Node("h", "y:r", {.engine = Engine::kHost});
  PassFixture f(m.Build());
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 3u);
  EXPECT_EQ(f.stream("a"), 0);
  EXPECT_EQ(f.stream("c"), 1);
  EXPECT_EQ(f.stream("b"), 0);
  EXPECT_EQ(f.stream("h"), 2);
  EXPECT_EQ(f.context().streams[1].engine, Engine::kCopy);
  EXPECT_EQ(f.choice("b").why, Why::kRecycled);
}

TEST(AssignByDependencyPassTest,
     LeavesEarlierStreamsAloneAndNeverRecyclesThem) {
  // b is on a label stream; the chain from a stops there, and c recycles
  // a's stream rather than joining b's.
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:rw").Node("c", "x:rw");
  PassFixture f(m.Build());
  f.SetStreams({{"b", 0}});
  f.context().streams[0].kind = LogicalStream::Kind::kLabel;
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  EXPECT_EQ(f.stream("b"), 0);
  EXPECT_EQ(f.stream("a"), 1);
  EXPECT_EQ(f.stream("c"), 1);
  EXPECT_EQ(f.choice("c").why, Why::kRecycled);
  EXPECT_EQ(f.choice("c").related, f.id("a"));
}

TEST(AssignByDependencyPassTest, SoftCapSharesTheStreamThatDelaysLeast) {
  // Two long chains fill the cap of 2; z joins the one whose node before
  // it ends first (chain q: q0 costs 1, chain p: p0 costs 10).
  GraphMaker m;
  m.Buffer("p").Buffer("q").Buffer("z");
  m.Node("p0", "p:w", {.cost = 10}).Node("q0", "q:w", {.cost = 1});
  m.Node("z", "z:w").Node("p1", "p:rw").Node("q1", "q:rw");
  PassFixture f(m.Build(), {.max_streams_per_device = 2});
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 2u);
  EXPECT_EQ(f.stream("p0"), 0);
  EXPECT_EQ(f.stream("q0"), 1);
  EXPECT_EQ(f.stream("z"), 1);
  EXPECT_EQ(f.choice("z").why, Why::kSoftCap);
  EXPECT_EQ(f.choice("z").related, f.id("q0"));
  // q0 and z are unrelated: the sharing orders them, and is recorded.
  EXPECT_THAT(f.context().added_orderings,
              ElementsAre(std::make_pair(f.id("q0"), f.id("z"))));
}

TEST(AssignByDependencyPassTest, SoftCapOfOneInterleavesInIssueOrder) {
  PassFixture f(ForkJoin(1, 1, 1), {.max_streams_per_device = 1});
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 1u);
  EXPECT_EQ(f.choice("b2").why, Why::kSoftCap);
  EXPECT_EQ(f.choice("b2").related, f.id("b1"));
  EXPECT_EQ(f.choice("b3").related, f.id("b2"));
  EXPECT_EQ(f.context().added_orderings.size(), 2u);
}

TEST(AssignByDependencyPassTest, NoAddedOrderingWhenTheDagAlreadyOrders) {
  // The chain a -> d holds the only stream; c, issued between them, runs
  // after a, its own predecessor: nothing new is ordered.
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w");
  m.Node("c", "x:r z:w", {.cost = 1});
  m.Node("d", "x:r y:w", {.cost = 10});
  PassFixture f(m.Build(), {.max_streams_per_device = 1});
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  EXPECT_EQ(f.choice("d").why, Why::kChain);
  EXPECT_EQ(f.choice("c").why, Why::kSoftCap);
  EXPECT_EQ(f.choice("c").related, f.id("a"));
  EXPECT_THAT(f.context().added_orderings, IsEmpty());
}

TEST(AssignByDependencyPassTest, RejectsZeroCap) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w");
  PassFixture f(m.Build(), {.max_streams_per_device = 0});
  absl::Status s = f.Run(AssignByDependencyPass());
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("options.max_streams_per_device")));
}

// p (device 1) writes x; cp, a COPY node on device 0, copies x into y; c
// reads y on device 0; q rewrites x on device 1.
Graph CrossDeviceCopy() {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("p", "x:w", {.device = 1});
  m.Node("cp", "x:r y:w", {.engine = Engine::kCopy, .device = 0});
  m.Node("c", "y:r z:w", {.device = 0});
  m.Node("q", "x:rw", {.device = 1});
  return m.Build();
}

TEST(AssignByDependencyPassTest, CopyBetweenDevicesGetsAPeerCopyStream) {
  PassFixture f(CrossDeviceCopy());
  f.SetPeerDevices({{"cp", 1}});
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 4u);
  EXPECT_EQ(f.stream("p"), 0);
  EXPECT_EQ(f.stream("cp"), 1);
  EXPECT_EQ(f.peer("cp"), 2);
  EXPECT_EQ(f.stream("c"), 3);
  EXPECT_EQ(f.stream("q"), 0);  // recycled: p is an ancestor
  EXPECT_EQ(f.peer("p"), -1);
  EXPECT_EQ(f.peer("c"), -1);
  EXPECT_EQ(f.context().streams[1].device, 0);
  EXPECT_EQ(f.context().streams[1].engine, Engine::kCopy);
  EXPECT_EQ(f.context().streams[2].device, 1);
  EXPECT_EQ(f.context().streams[2].engine, Engine::kCopy);
  EXPECT_EQ(f.choice("q").why, Why::kRecycled);
}

TEST(AssignByDependencyPassTest, PeerStreamsAreRecycledLikeStreams) {
  // Two copies from device 1 to device 0 in a row: the second one reuses
  // the first one's peer stream, whose last node is its ancestor.
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("w");
  m.Node("p", "x:w", {.device = 1});
  m.Node("cp1", "x:r y:w", {.engine = Engine::kCopy, .device = 0});
  m.Node("cp2", "x:r y:rw w:w", {.engine = Engine::kCopy, .device = 2});
  PassFixture f(m.Build());
  f.SetPeerDevices({{"cp1", 1}, {"cp2", 1}});
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  EXPECT_EQ(f.stream("cp1"), 1);
  EXPECT_EQ(f.peer("cp1"), 2);
  EXPECT_EQ(f.stream("cp2"), 3);  // device 2's first copy stream
  EXPECT_EQ(f.peer("cp2"), 2);
  EXPECT_EQ(f.context().streams.size(), 4u);
}

TEST(AssignByDependencyPassTest, PeerStreamAtTheCapDelaysLeast) {
  // One stream per device: the peer shares device 1's only copy stream,
  // which a node the copy does not depend on holds.
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("o");
  m.Node("p", "x:w", {.device = 1});
  m.Node("other", "o:w", {.engine = Engine::kCopy, .device = 1});
  m.Node("cp", "x:r y:w", {.engine = Engine::kCopy, .device = 0});
  PassFixture f(m.Build(), {.max_streams_per_device = 1});
  f.SetPeerDevices({{"cp", 1}});
  ASSERT_TRUE(f.Run(AssignByDependencyPass()).ok());
  EXPECT_EQ(f.peer("cp"), f.stream("other"));
  EXPECT_THAT(f.context().added_orderings,
              ElementsAre(std::make_pair(f.id("other"), f.id("cp"))));
}

}  // namespace
}  // namespace weft::scheduler
