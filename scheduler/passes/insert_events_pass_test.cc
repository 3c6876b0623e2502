#include "scheduler/passes/insert_events_pass.h"

#include <string>

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
using ::weft::testing::StatusIs;

TEST(InsertEventsPassTest, ChainOnOneStreamNeedsNone) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:rw").Node("c", "x:r");
  PassFixture f(m.Build());
  f.SetStreams({{"a", 0}, {"b", 0}, {"c", 0}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  EXPECT_EQ(f.context().num_events, 0);
  EXPECT_TRUE(f.context().events_planned);
  EXPECT_EQ(f.context().seq[f.id("c")], 3);
}

TEST(InsertEventsPassTest, ForkJoin) {
  // src, b2, join on stream 0; b1 on 1; b3 on 2.
  GraphMaker m;
  m.Buffer("x").Buffer("y1").Buffer("y2").Buffer("y3");
  m.Node("src", "x:w");
  m.Node("b1", "x:r y1:w").Node("b2", "x:r y2:w").Node("b3", "x:r y3:w");
  m.Node("join", "y1:r y2:r y3:r");
  PassFixture f(m.Build());
  f.SetStreams({{"src", 0}, {"b1", 1}, {"b2", 0}, {"b3", 2}, {"join", 0}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  // Ids in order of first wait: src's (b1), then the join's waits latest
  // first: b3's, b1's.
  EXPECT_EQ(f.context().num_events, 3);
  EXPECT_EQ(f.signal("src"), 0);
  EXPECT_EQ(f.signal("b3"), 1);
  EXPECT_EQ(f.signal("b1"), 2);
  EXPECT_EQ(f.signal("b2"), -1);
  EXPECT_THAT(f.waits("b1"), ElementsAre(0));
  EXPECT_THAT(f.waits("b3"), ElementsAre(0));
  EXPECT_THAT(f.waits("b2"), IsEmpty());
  EXPECT_THAT(f.waits("join"), ElementsAre(1, 2));
}

TEST(InsertEventsPassTest, VectorClocksDropWaitsImpliedThroughAThirdStream) {
  // A on s0; B then X on s1; Y on s2. B waits for A, so once s2 has waited
  // for X (after B on s1) it knows A is done: Y needs no wait on A although
  // A -> Y is a direct dependency.
  GraphMaker m;
  m.Buffer("a").Buffer("b").Buffer("x");
  m.Node("A", "a:w").Node("B", "a:r b:w").Node("X", "x:w");
  m.Node("Y", "a:r x:r");
  PassFixture f(m.Build());
  f.SetStreams({{"A", 0}, {"B", 1}, {"X", 1}, {"Y", 2}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  EXPECT_EQ(f.context().num_events, 2);
  EXPECT_THAT(f.waits("B"), ElementsAre(0));
  EXPECT_THAT(f.waits("Y"), ElementsAre(1));  // X only
  EXPECT_EQ(f.signal("A"), 0);
  EXPECT_EQ(f.signal("X"), 1);
}

TEST(InsertEventsPassTest, RepeatedWaitOnTheSameStreamIsDropped) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("src", "x:w").Node("c1", "x:r y:w").Node("c2", "x:r y:rw");
  PassFixture f(m.Build());
  f.SetStreams({{"src", 0}, {"c1", 1}, {"c2", 1}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  EXPECT_EQ(f.context().num_events, 1);
  EXPECT_THAT(f.waits("c1"), ElementsAre(0));
  EXPECT_THAT(f.waits("c2"), IsEmpty());
}

TEST(InsertEventsPassTest, ClocksCarryWhatTheWaitedNodeKnew) {
  // p0 on s0, p1 on s1 waits p0; v on s2 needs both: waiting for p1 is
  // enough.
  GraphMaker m;
  m.Buffer("a").Buffer("b").Buffer("c");
  m.Node("p0", "a:w").Node("p1", "a:r b:w").Node("v", "a:r b:r c:w");
  PassFixture f(m.Build());
  f.SetStreams({{"p0", 0}, {"p1", 1}, {"v", 2}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  // v's only direct dependency left after reduction is p1 (p0 -> p1 -> v),
  // so one wait; the clock of v's stream now knows both streams.
  EXPECT_THAT(f.waits("v"), ElementsAre(f.signal("p1")));
  EXPECT_EQ(f.context().num_events, 2);
  const int32_t version = f.context().clock_of[f.id("v")];
  EXPECT_EQ(f.context().clocks.Known(version, 0), 1);
  EXPECT_EQ(f.context().clocks.Known(version, 1), 1);
}

TEST(InsertEventsPassTest, ManyStreamsUseSparseClocks) {
  // A chain over more streams than dense clocks allow, plus a node that
  // needs both the last link and the first: the first is implied.
  GraphMaker m;
  m.Buffer("x").Buffer("first");
  m.Node("n0", "x:w first:w");
  const int kLinks = ClockArena::kDenseStreams + 5;
  for (int i = 1; i < kLinks; ++i) m.Node("n" + std::to_string(i), "x:rw");
  m.Node("end", "x:r first:r");
  PassFixture f(m.Build());
  for (int i = 0; i < kLinks; ++i) {
    f.SetStreams({{"n" + std::to_string(i), i}});
  }
  f.SetStreams({{"end", kLinks}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  EXPECT_FALSE(f.context().clocks.dense());
  EXPECT_EQ(f.context().num_events, kLinks);
  EXPECT_THAT(f.waits("end"),
              ElementsAre(f.signal("n" + std::to_string(kLinks - 1))));
  EXPECT_EQ(f.context().clocks.Known(f.context().clock_of[f.id("end")], 0), 1);
}

TEST(InsertEventsPassTest, CopyBetweenDevicesJoinsItsTwoStreams) {
  // a on s0; e, then cp's peer membership, then b on s2; cp on s1 with
  // peer s2; h on s3. cp needs no event for e (its peer stream ran e);
  // h waits for b only: b follows cp on s2, so b's clock covers cp.
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z").Buffer("u");
  m.Node("a", "x:w").Node("e", "z:w");
  m.Node("cp", "x:r z:r y:w", {.engine = Engine::kCopy});
  m.Node("b", "u:w").Node("h", "y:r u:r");
  PassFixture f(m.Build());
  f.SetStreams({{"a", 0}, {"cp", 1}, {"e", 2}, {"b", 2}, {"h", 3}});
  f.SetPeerStreams({{"cp", 2}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  StreamContext& c = f.context();
  EXPECT_EQ(c.num_events, 2);
  EXPECT_THAT(f.waits("cp"), ElementsAre(0));
  EXPECT_EQ(f.signal("a"), 0);
  EXPECT_THAT(f.waits("b"), IsEmpty());
  EXPECT_THAT(f.waits("h"), ElementsAre(1));
  EXPECT_EQ(f.signal("b"), 1);
  EXPECT_EQ(f.signal("cp"), -1);
  EXPECT_EQ(c.seq[f.id("cp")], 1);
  EXPECT_EQ(c.peer_seq[f.id("cp")], 2);
  EXPECT_EQ(c.seq[f.id("b")], 3);
  EXPECT_EQ(c.peer_seq[f.id("b")], 0);
  // cp knew a (through its wait) and e (through the join).
  EXPECT_EQ(c.clocks.Known(c.clock_of[f.id("cp")], 0), 1);
  EXPECT_EQ(c.clocks.Known(c.clock_of[f.id("cp")], 2), 1);
  // After cp both of its streams know it finished.
  EXPECT_EQ(c.clocks.Known(c.clock_of[f.id("b")], 1), 1);
}

TEST(InsertEventsPassTest, WorkAfterACopyOnItsOwnStreamNeedsNoEvent) {
  // cp (s0, peer s1) reads what w wrote on s1; later r on s0 reads what
  // w2, after cp on s1, wrote: that needs an event, but r's dependency on
  // cp itself is stream order.
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("v");
  m.Node("w", "x:w");
  m.Node("cp", "x:r y:w", {.engine = Engine::kCopy});
  m.Node("w2", "x:rw").Node("r", "y:r x:r v:w");
  PassFixture f(m.Build());
  f.SetStreams({{"w", 1}, {"cp", 0}, {"w2", 1}, {"r", 0}});
  f.SetPeerStreams({{"cp", 1}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  EXPECT_EQ(f.context().num_events, 1);
  EXPECT_THAT(f.waits("cp"), IsEmpty());
  EXPECT_THAT(f.waits("w2"), IsEmpty());
  EXPECT_THAT(f.waits("r"), ElementsAre(0));
  EXPECT_EQ(f.signal("w2"), 0);
}

TEST(InsertEventsPassTest, PeerStreamMustBeValid) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("cp", "x:r", {.engine = Engine::kCopy});
  PassFixture f(m.Build());
  f.SetStreams({{"a", 1}, {"cp", 0}});
  f.SetPeerStreams({{"cp", 0}});
  absl::Status s = f.Run(InsertEventsPass());
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                          HasSubstr("'cp' has no valid peer")));
}

TEST(InsertEventsPassTest, CopyBetweenDevicesWithSparseClocks) {
  // The join test above with more streams than dense clocks allow.
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z").Buffer("u");
  m.Node("a", "x:w").Node("e", "z:w");
  m.Node("cp", "x:r z:r y:w", {.engine = Engine::kCopy});
  m.Node("b", "u:w").Node("h", "y:r u:r");
  PassFixture f(m.Build());
  const int peer = ClockArena::kDenseStreams + 5;
  f.SetStreams({{"a", 0}, {"cp", 1}, {"e", peer}, {"b", peer}, {"h", 3}});
  f.SetPeerStreams({{"cp", peer}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  StreamContext& c = f.context();
  ASSERT_FALSE(c.clocks.dense());
  EXPECT_EQ(c.num_events, 2);
  EXPECT_THAT(f.waits("cp"), ElementsAre(0));
  EXPECT_THAT(f.waits("b"), IsEmpty());
  EXPECT_THAT(f.waits("h"), ElementsAre(1));
  EXPECT_EQ(f.signal("b"), 1);
  EXPECT_EQ(c.clocks.Known(c.clock_of[f.id("cp")], peer), 1);
  EXPECT_EQ(c.clocks.Known(c.clock_of[f.id("b")], 1), 1);
  EXPECT_EQ(c.clocks.Known(c.clock_of[f.id("b")], peer), 2);
}

}  // namespace
}  // namespace weft::scheduler
