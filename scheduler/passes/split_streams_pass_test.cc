#include "scheduler/passes/split_streams_pass.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/passes/event_id_continuity_pass.h"
#include "scheduler/passes/insert_events_pass.h"
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
using ::weft::testing::StatusIs;

Graph Chain6() {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w");
  for (const char* n : {"b", "c", "d", "e", "f"}) m.Node(n, "x:rw");
  return m.Build();
}

// Runs the event passes after putting every node of `f` on stream 0.
void OneStreamWithEvents(PassFixture& f) {
  for (NodeId v = 0; v < f.graph().num_nodes(); ++v) {
    f.SetStreams({{f.graph().node(v).name, 0}});
  }
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  ASSERT_TRUE(f.Run(EventIdContinuityPass()).ok());
}

TEST(SplitStreamsPassTest, SplitsAChainWithOneEvent) {
  PassFixture f(Chain6(), {.max_nodes_per_stream = 4});
  OneStreamWithEvents(f);
  ASSERT_TRUE(f.Run(SplitStreamsPass()).ok());
  // a, b, c fill 3 tasks (one kept for the record); c records event 0
  // (4 tasks); d waits on it and d, e, f make 4.
  ASSERT_EQ(f.context().streams.size(), 2u);
  for (const char* n : {"a", "b", "c"}) EXPECT_EQ(f.stream(n), 0) << n;
  for (const char* n : {"d", "e", "f"}) EXPECT_EQ(f.stream(n), 1) << n;
  EXPECT_EQ(f.context().num_events, 1);
  EXPECT_EQ(f.signal("c"), 0);
  EXPECT_THAT(f.waits("d"), ElementsAre(0));
  EXPECT_THAT(f.waits("e"), IsEmpty());
  EXPECT_EQ(f.context().streams[1].split_from, 0);
  EXPECT_EQ(f.context().streams[1].device, 0);
}

TEST(SplitStreamsPassTest, EventsCountAsTasks) {
  // At 3 tasks a middle node (its wait, itself, its record) fills a
  // stream alone.
  PassFixture f(Chain6(), {.max_nodes_per_stream = 3});
  OneStreamWithEvents(f);
  ASSERT_TRUE(f.Run(SplitStreamsPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 4u);
  EXPECT_EQ(f.stream("a"), 0);
  EXPECT_EQ(f.stream("b"), 0);
  EXPECT_EQ(f.stream("c"), 1);
  EXPECT_EQ(f.stream("d"), 2);
  EXPECT_EQ(f.stream("e"), 3);
  EXPECT_EQ(f.stream("f"), 3);
  EXPECT_EQ(f.context().num_events, 3);
  EXPECT_EQ(f.context().streams[2].split_from, 1);
  EXPECT_THAT(f.waits("e"), ElementsAre(f.signal("d")));
}

TEST(SplitStreamsPassTest, NoLinkWhenTheWaitsAlreadyOrder) {
  // a on s0 -> b on s1 -> c on s0. Splitting s0 between a and c needs no
  // new event: c waits for b, which waited for a.
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:rw").Node("c", "x:rw");
  PassFixture f(m.Build(), {.max_nodes_per_stream = 3});
  f.SetStreams({{"a", 0}, {"b", 1}, {"c", 0}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  ASSERT_TRUE(f.Run(EventIdContinuityPass()).ok());
  ASSERT_EQ(f.context().num_events, 2);
  ASSERT_TRUE(f.Run(SplitStreamsPass()).ok());
  EXPECT_EQ(f.stream("a"), 0);
  EXPECT_EQ(f.stream("c"), 2);
  EXPECT_EQ(f.context().num_events, 2);
  EXPECT_THAT(f.waits("c"), ElementsAre(f.signal("b")));
}

TEST(SplitStreamsPassTest, NoLinkWhenAWaitOnANodeNotDependedOnOrders) {
  // b and c both only read what a wrote; c is given a wait on b's event
  // by hand, which the DAG does not ask for. Splitting s0 between a and c
  // still needs no new event: b waited for a.
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("a", "x:w").Node("b", "x:r y:w").Node("c", "x:r");
  PassFixture f(m.Build(), {.max_nodes_per_stream = 3});
  f.SetStreams({{"a", 0}, {"b", 1}, {"c", 0}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  StreamContext& c = f.context();
  ASSERT_EQ(c.num_events, 1);
  c.signal[f.id("b")] = c.num_events++;
  ASSERT_EQ(c.dag.pos(f.id("c")), 2);
  c.waits.items.push_back(c.signal[f.id("b")]);
  ++c.waits.offsets.back();
  ASSERT_TRUE(f.Run(EventIdContinuityPass()).ok());
  ASSERT_TRUE(f.Run(SplitStreamsPass()).ok());
  EXPECT_EQ(f.stream("a"), 0);
  EXPECT_EQ(f.stream("c"), 2);
  EXPECT_EQ(c.num_events, 2);
  EXPECT_THAT(f.waits("c"), ElementsAre(f.signal("b")));
}

TEST(SplitStreamsPassTest, ZeroMeansNoLimit) {
  PassFixture f(Chain6(), {.max_nodes_per_stream = 0});
  OneStreamWithEvents(f);
  ASSERT_TRUE(f.Run(SplitStreamsPass()).ok());
  EXPECT_EQ(f.context().streams.size(), 1u);
}

TEST(SplitStreamsPassTest, RejectsLimitsTooSmallToContinueAStream) {
  PassFixture f(Chain6(), {.max_nodes_per_stream = 2});
  OneStreamWithEvents(f);
  absl::Status s = f.Run(SplitStreamsPass());
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("options.max_nodes_per_stream: must be 0 "
                                    "(no limit) or at least 3, got 2")));
}

TEST(SplitStreamsPassTest, SplitAtAPeerMembershipWaitsOnTheCopysStream) {
  // a, b, then cp's peer membership, c, d on s1; cp itself on s0. At 4
  // tasks s1 splits before cp (a peer membership is 3 tasks) and again
  // before c. cp's wait continuing s1 goes on its own stream s0; c waits
  // on cp, the last node of the part before.
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("a", "x:w").Node("b", "x:rw");
  m.Node("cp", "x:r y:w", {.engine = Engine::kCopy});
  m.Node("c", "x:rw").Node("d", "x:rw");
  PassFixture f(m.Build(), {.max_nodes_per_stream = 4});
  f.SetStreams({{"cp", 0}, {"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}});
  f.SetPeerStreams({{"cp", 1}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  ASSERT_EQ(f.context().num_events, 0);
  ASSERT_TRUE(f.Run(SplitStreamsPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 4u);
  EXPECT_EQ(f.stream("a"), 1);
  EXPECT_EQ(f.stream("b"), 1);
  EXPECT_EQ(f.stream("cp"), 0);
  EXPECT_EQ(f.peer("cp"), 2);
  EXPECT_EQ(f.stream("c"), 3);
  EXPECT_EQ(f.stream("d"), 3);
  EXPECT_EQ(f.context().streams[2].split_from, 1);
  EXPECT_EQ(f.context().streams[3].split_from, 2);
  EXPECT_EQ(f.context().num_events, 2);
  EXPECT_EQ(f.signal("cp"), 0);
  EXPECT_EQ(f.signal("b"), 1);
  EXPECT_THAT(f.waits("cp"), ElementsAre(1));
  EXPECT_THAT(f.waits("c"), ElementsAre(0));
  EXPECT_THAT(f.waits("d"), IsEmpty());
}

TEST(SplitStreamsPassTest, BothStreamsOfACopySplitAtIt) {
  // b (s1, peer s0) and cp (s0, peer s1) are copies; a and c plain. With
  // room kept for their joins, continuing waits and records, each copy
  // counts 6 tasks on its own stream and 3 on its peer stream, so at 4
  // tasks s0 splits before cp (cp -> s2), and s1 before b (b -> s3) and
  // before cp's membership (-> s4, c follows). Both of cp's streams start
  // a part at cp, so neither one's history counts: cp waits on b, which
  // also covers b on s1, and b waits on a.
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w");
  m.Node("b", "x:rw", {.engine = Engine::kCopy});
  m.Node("cp", "x:r y:w", {.engine = Engine::kCopy});
  m.Node("c", "z:w");
  PassFixture f(m.Build(), {.max_nodes_per_stream = 4});
  f.SetStreams({{"cp", 0}, {"a", 1}, {"b", 1}, {"c", 1}});
  f.SetPeerStreams({{"b", 0}, {"cp", 1}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  ASSERT_EQ(f.context().num_events, 0);
  ASSERT_TRUE(f.Run(SplitStreamsPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 5u);
  EXPECT_EQ(f.stream("a"), 1);
  EXPECT_EQ(f.stream("b"), 3);
  EXPECT_EQ(f.peer("b"), 0);
  EXPECT_EQ(f.stream("cp"), 2);
  EXPECT_EQ(f.peer("cp"), 4);
  EXPECT_EQ(f.stream("c"), 4);
  EXPECT_EQ(f.context().num_events, 2);
  EXPECT_EQ(f.signal("a"), 0);
  EXPECT_EQ(f.signal("b"), 1);
  EXPECT_THAT(f.waits("b"), ElementsAre(0));
  EXPECT_THAT(f.waits("cp"), ElementsAre(1));
  EXPECT_THAT(f.waits("c"), IsEmpty());
}

}  // namespace
}  // namespace weft::scheduler
