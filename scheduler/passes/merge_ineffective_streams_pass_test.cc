#include "scheduler/passes/merge_ineffective_streams_pass.h"

#include "gtest/gtest.h"
#include "scheduler/passes/pass_test_util.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using testing::GraphMaker;
using testing::PassFixture;

Graph Chain4() {
  GraphMaker m;
  m.Buffer("x");
  m.Node("a", "x:w").Node("b", "x:rw").Node("c", "x:rw").Node("d", "x:rw");
  return m.Build();
}

TEST(MergeIneffectiveStreamsPassTest, MergesStreamsTheDagTotallyOrders) {
  PassFixture f(Chain4());
  f.SetStreams({{"a", 0}, {"b", 1}, {"c", 0}, {"d", 1}});
  ASSERT_TRUE(f.Run(MergeIneffectiveStreamsPass()).ok());
  for (const char* n : {"a", "b", "c", "d"}) EXPECT_EQ(f.stream(n), 0) << n;
  EXPECT_TRUE(f.context().streams[0].alive);
  EXPECT_FALSE(f.context().streams[1].alive);
  EXPECT_EQ(f.choice("b").why, StreamChoice::Why::kMerged);
  EXPECT_EQ(f.choice("b").related, f.id("a"));
}

TEST(MergeIneffectiveStreamsPassTest, MergesSeveralIntoTheFirst) {
  PassFixture f(Chain4());
  f.SetStreams({{"a", 2}, {"b", 1}, {"c", 0}, {"d", 1}});
  ASSERT_TRUE(f.Run(MergeIneffectiveStreamsPass()).ok());
  EXPECT_EQ(f.streams_used(), 1);
  EXPECT_EQ(f.stream("a"), 0);
  EXPECT_EQ(f.stream("d"), 0);
}

TEST(MergeIneffectiveStreamsPassTest, KeepsStreamsThatCanOverlap) {
  // src -> {x, y} -> join: x and y can run together.
  GraphMaker m;
  m.Buffer("s").Buffer("p").Buffer("q");
  m.Node("src", "s:w").Node("x", "s:r p:w").Node("y", "s:r q:w");
  m.Node("join", "p:r q:r");
  PassFixture f(m.Build());
  f.SetStreams({{"src", 0}, {"x", 1}, {"y", 0}, {"join", 0}});
  ASSERT_TRUE(f.Run(MergeIneffectiveStreamsPass()).ok());
  EXPECT_EQ(f.stream("x"), 1);
  EXPECT_EQ(f.streams_used(), 2);
}

TEST(MergeIneffectiveStreamsPassTest, OnlyMergesWithinADeviceAndEngine) {
  GraphMaker m;
  m.Buffer("x");
  m.Node("a", "x:w").Node("b", "x:rw", {.device = 1});
  m.Node("c", "x:rw", {.engine = Engine::kCopy}).Node("d", "x:rw");
  PassFixture f(m.Build());
  f.SetStreams({{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}});
  ASSERT_TRUE(f.Run(MergeIneffectiveStreamsPass()).ok());
  EXPECT_EQ(f.stream("b"), 1);  // device 1
  EXPECT_EQ(f.stream("c"), 2);  // copy engine
  EXPECT_EQ(f.stream("d"), 0);  // a's stream
}

TEST(MergeIneffectiveStreamsPassTest, LeavesLabelStreamsAlone) {
  PassFixture f(Chain4());
  f.SetStreams({{"a", 0}, {"b", 1}, {"c", 0}, {"d", 1}});
  f.context().streams[1].kind = LogicalStream::Kind::kLabel;
  ASSERT_TRUE(f.Run(MergeIneffectiveStreamsPass()).ok());
  EXPECT_EQ(f.stream("b"), 1);
  EXPECT_EQ(f.stream("d"), 1);
}

TEST(MergeIneffectiveStreamsPassTest, PeerMembershipsFollowTheirStream) {
  // a, cp, d on device 0 are totally ordered; cp also holds stream 1 of
  // device 1 as its peer, where b runs before it and e after it: s1 and s3
  // (device 1, copy engine) cannot overlap, so s3 merges into s1, and the
  // peer membership counts as one of s1's nodes.
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("b", "x:w", {.engine = Engine::kCopy, .device = 1});
  m.Node("cp", "x:r y:w", {.engine = Engine::kCopy, .device = 0});
  m.Node("e", "x:rw", {.engine = Engine::kCopy, .device = 1});
  PassFixture f(m.Build());
  f.SetStreams({{"cp", 0}, {"b", 3}, {"e", 1}});
  f.SetPeerStreams({{"cp", 3}});
  ASSERT_TRUE(f.Run(MergeIneffectiveStreamsPass()).ok());
  EXPECT_EQ(f.stream("b"), 1);
  EXPECT_EQ(f.stream("e"), 1);
  EXPECT_EQ(f.peer("cp"), 1);
  EXPECT_EQ(f.stream("cp"), 0);
  EXPECT_FALSE(f.context().streams[3].alive);
}

}  // namespace
}  // namespace weft::scheduler
