#include "scheduler/passes/split_streams_pass.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/passes/event_id_continuity_pass.h"
#include "scheduler/passes/insert_events_pass.h"
#include "scheduler/passes/pass_test_util.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using testing::GraphMaker;
using testing::PassFixture;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

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
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("options.max_nodes_per_stream: must be 0 (no limit) "
                        "or at least 3, got 2"));
}

}  // namespace
}  // namespace weft::scheduler
