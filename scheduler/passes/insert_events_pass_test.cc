#include "scheduler/passes/insert_events_pass.h"

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

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

// Event waits of every node, by name.
std::vector<std::vector<int>> AllWaits(const PassFixture& f) {
  std::vector<std::vector<int>> waits;
  for (NodeId v = 0; v < f.graph().num_nodes(); ++v) {
    waits.push_back(f.waits(f.graph().node(v).name));
  }
  return waits;
}

// Replays the planned waits with full vector clocks (no window) and
// returns the dependencies p -> v between streams that nothing orders.
std::vector<std::pair<NodeId, NodeId>> Unordered(PassFixture& f) {
  const StreamContext& c = f.context();
  const int n = c.num_nodes();
  const int streams = static_cast<int>(c.streams.size());
  std::vector<NodeId> signaller(c.num_events, -1);
  for (NodeId u = 0; u < n; ++u) {
    if (c.signal[u] >= 0) signaller[c.signal[u]] = u;
  }
  std::vector<std::vector<int32_t>> stream_clock(
      streams, std::vector<int32_t>(streams, 0));
  std::vector<std::vector<int32_t>> after(n);  // what each node knew
  std::vector<std::pair<NodeId, NodeId>> unordered;
  for (int i = 0; i < n; ++i) {
    const NodeId v = c.dag.order[i];
    const int s = c.stream_of[v];
    std::vector<int32_t>& clock = stream_clock[s];
    for (int32_t e : c.waits.Row(i)) {
      const NodeId u = signaller[e];
      for (int t = 0; t < streams; ++t) {
        clock[t] = std::max(clock[t], after[u][t]);
      }
    }
    for (NodeId p : c.dag.Preds(v)) {
      if (c.stream_of[p] != s && clock[c.stream_of[p]] < c.seq[p]) {
        unordered.emplace_back(p, v);
      }
    }
    clock[s] = c.seq[v];
    after[v] = clock;
  }
  return unordered;
}

TEST(InsertEventsPassTest, WindowedClocksKeepAnIdleStreamsClock) {
  // X on s2 waits for W on s1; a chain of thousands of links alternating
  // between s0 and s1 fills the window many times over; then Y on s2
  // reads W's output: s2's clock still knows W, so Y waits for nothing.
  GraphMaker m;
  m.Buffer("w").Buffer("x").Buffer("y").Buffer("c");
  m.Node("W", "w:w").Node("X", "w:r x:w");
  const int kLinks = 3 * ClockArena::kMinWindow;
  for (int i = 0; i < kLinks; ++i) {
    m.Node("c" + std::to_string(i), i == 0 ? "c:w" : "c:rw");
  }
  m.Node("Y", "w:r y:w");
  std::vector<std::pair<std::string, int>> streams = {
      {"W", 1}, {"X", 2}, {"Y", 2}};
  for (int i = 0; i < kLinks; ++i) {
    streams.emplace_back("c" + std::to_string(i), i % 2);
  }
  PassFixture windowed(m.Build());
  windowed.SetStreams(streams);
  ASSERT_TRUE(windowed.Run(InsertEventsPass(/*max_clock_bytes=*/1)).ok());
  EXPECT_EQ(windowed.context().clocks.window(), ClockArena::kMinWindow);
  EXPECT_GT(windowed.context().clocks.num_versions(), kLinks);
  EXPECT_THAT(windowed.waits("Y"), IsEmpty());
  PassFixture whole(m.Build());
  whole.SetStreams(streams);
  ASSERT_TRUE(whole.Run(InsertEventsPass()).ok());
  EXPECT_EQ(whole.context().clocks.window(), 0);
  EXPECT_EQ(AllWaits(windowed), AllWaits(whole));
  EXPECT_THAT(Unordered(windowed), IsEmpty());
}

TEST(InsertEventsPassTest, WindowedClocksForgetOldSnapshotsSafely) {
  // X on s2 waits for W on s1, then a chain on s0 and s3 fills the window
  // many times over. Y on s4 waits for X: X's snapshot (which knew W) has
  // left the window, so s4 learns only X's own position, and Z, after Y
  // on s4, waits for W as well. Without a window s4 knows W through X.
  GraphMaker m;
  m.Buffer("w").Buffer("x").Buffer("y").Buffer("z").Buffer("c");
  m.Node("W", "w:w").Node("X", "w:r x:w");
  const int kLinks = 3 * ClockArena::kMinWindow;
  for (int i = 0; i < kLinks; ++i) {
    m.Node("c" + std::to_string(i), i == 0 ? "c:w" : "c:rw");
  }
  m.Node("Y", "x:r y:w").Node("Z", "w:r z:w");
  std::vector<std::pair<std::string, int>> streams = {
      {"W", 1}, {"X", 2}, {"Y", 4}, {"Z", 4}};
  for (int i = 0; i < kLinks; ++i) {
    streams.emplace_back("c" + std::to_string(i), i % 2 == 0 ? 0 : 3);
  }
  PassFixture windowed(m.Build());
  windowed.SetStreams(streams);
  ASSERT_TRUE(windowed.Run(InsertEventsPass(/*max_clock_bytes=*/1)).ok());
  PassFixture whole(m.Build());
  whole.SetStreams(streams);
  ASSERT_TRUE(whole.Run(InsertEventsPass()).ok());
  EXPECT_THAT(whole.waits("Y"), ElementsAre(whole.signal("X")));
  EXPECT_THAT(whole.waits("Z"), IsEmpty());
  EXPECT_THAT(windowed.waits("Y"), ElementsAre(windowed.signal("X")));
  EXPECT_THAT(windowed.waits("Z"), ElementsAre(windowed.signal("W")));
  EXPECT_THAT(Unordered(windowed), IsEmpty());
  // What later passes read of X's clock: nothing, windowed.
  EXPECT_EQ(
      whole.context().clocks.Known(whole.context().clock_of[whole.id("X")], 1),
      1);
  EXPECT_EQ(windowed.context().clocks.Known(
                windowed.context().clock_of[windowed.id("X")], 1),
            0);
}

TEST(InsertEventsPassTest, WindowedClocksOrderEveryDependency) {
  // Random DAGs whose nodes read recent outputs and, now and then, one
  // from far back in issue order (past the window). Every dependency
  // between streams stays ordered; forgotten snapshots cost waits, never
  // save them.
  for (int seed = 0; seed < 3; ++seed) {
    std::mt19937 rng(seed);
    GraphMaker m;
    const int kNodes = 3 * ClockArena::kMinWindow;
    const int kStreams = 6;
    std::vector<std::pair<std::string, int>> streams;
    for (int i = 0; i < kNodes; ++i) {
      const std::string name = "n" + std::to_string(i);
      m.Buffer("b" + std::to_string(i));
      std::string uses = "b" + std::to_string(i) + ":w";
      std::vector<int> read;
      for (int k = 0; i > 0 && k < 2; ++k) {
        const int back = std::uniform_int_distribution<int>(1, 40)(rng);
        read.push_back(std::max(0, i - back));
      }
      if (i > 0 && rng() % 16 == 0) {
        read.push_back(std::uniform_int_distribution<int>(0, i - 1)(rng));
      }
      std::sort(read.begin(), read.end());
      read.erase(std::unique(read.begin(), read.end()), read.end());
      for (int r : read) uses += " b" + std::to_string(r) + ":r";
      m.Node(name, uses);
      streams.emplace_back(name, static_cast<int>(rng() % kStreams));
    }
    PassFixture windowed(m.Build());
    windowed.SetStreams(streams);
    ASSERT_TRUE(windowed.Run(InsertEventsPass(/*max_clock_bytes=*/1)).ok());
    ASSERT_EQ(windowed.context().clocks.window(), ClockArena::kMinWindow);
    PassFixture whole(m.Build());
    whole.SetStreams(streams);
    ASSERT_TRUE(whole.Run(InsertEventsPass()).ok());
    EXPECT_THAT(Unordered(windowed), IsEmpty()) << "seed " << seed;
    EXPECT_THAT(Unordered(whole), IsEmpty()) << "seed " << seed;
    EXPECT_GE(windowed.context().waits.items.size(),
              whole.context().waits.items.size())
        << "seed " << seed;
  }
}

}  // namespace
}  // namespace weft::scheduler
