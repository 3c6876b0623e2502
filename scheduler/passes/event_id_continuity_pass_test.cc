#include "scheduler/passes/event_id_continuity_pass.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/passes/insert_events_pass.h"
#include "scheduler/passes/pass_test_util.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using testing::GraphMaker;
using ::testing::HasSubstr;
using testing::PassFixture;
using ::weft::testing::StatusIs;

Graph ForkJoin() {
  GraphMaker m;
  m.Buffer("x").Buffer("y1").Buffer("y2").Buffer("y3");
  m.Node("src", "x:w");
  m.Node("b1", "x:r y1:w").Node("b2", "x:r y2:w").Node("b3", "x:r y3:w");
  m.Node("join", "y1:r y2:r y3:r");
  return m.Build();
}

TEST(EventIdContinuityPassTest, RenumbersInIssueOrderOfSignallers) {
  PassFixture f(ForkJoin());
  f.SetStreams({{"src", 0}, {"b1", 1}, {"b2", 0}, {"b3", 2}, {"join", 0}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  ASSERT_TRUE(f.Run(EventIdContinuityPass()).ok());
  EXPECT_EQ(f.context().num_events, 3);
  EXPECT_EQ(f.signal("src"), 0);
  EXPECT_EQ(f.signal("b1"), 1);
  EXPECT_EQ(f.signal("b3"), 2);
  EXPECT_THAT(f.waits("join"), ElementsAre(1, 2));
  EXPECT_THAT(f.waits("b3"), ElementsAre(0));
}

TEST(EventIdContinuityPassTest, DropsEventsNobodyWaitsOn) {
  PassFixture f(ForkJoin());
  f.SetStreams({{"src", 0}, {"b1", 1}, {"b2", 0}, {"b3", 2}, {"join", 0}});
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  // An extra event on b2 that nobody waits on: a hole.
  f.context().signal[f.id("b2")] = f.context().num_events++;
  ASSERT_TRUE(f.Run(EventIdContinuityPass()).ok());
  EXPECT_EQ(f.context().num_events, 3);
  EXPECT_EQ(f.signal("b2"), -1);
  EXPECT_EQ(f.signal("b3"), 2);
  EXPECT_THAT(f.waits("join"), ElementsAre(1, 2));
  EXPECT_THAT(f.waits("b3"), ElementsAre(0));
}

TEST(EventIdContinuityPassTest, SortsLongRows) {
  // A join of 18 producers, each on a stream of its own: 18 waits.
  GraphMaker m;
  std::string reads;
  for (int k = 0; k < 18; ++k) {
    const std::string y = absl::StrCat("y", k);
    m.Buffer(y).Node(absl::StrCat("p", k), y + ":w");
    absl::StrAppend(&reads, k > 0 ? " " : "", y, ":r");
  }
  m.Node("join", reads);
  PassFixture f(m.Build());
  std::vector<std::pair<std::string, int>> streams = {{"join", 0}};
  for (int k = 0; k < 18; ++k) streams.push_back({absl::StrCat("p", k), k});
  f.SetStreams(streams);
  ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
  ASSERT_TRUE(f.Run(EventIdContinuityPass()).ok());
  // p0 is on join's stream.
  EXPECT_EQ(f.context().num_events, 17);
  std::vector<int> expected;
  for (int k = 1; k < 18; ++k) {
    EXPECT_EQ(f.signal(absl::StrCat("p", k)), k - 1);
    expected.push_back(k - 1);
  }
  EXPECT_EQ(f.waits("join"), expected);
}

// Plans the fork-join's events on three streams, lets `spoil` break what
// they say, and runs the pass.
absl::Status RunOnSpoiledEvents(void (*spoil)(PassFixture&)) {
  PassFixture f(ForkJoin());
  f.SetStreams({{"src", 0}, {"b1", 1}, {"b2", 0}, {"b3", 2}, {"join", 0}});
  absl::Status planned = f.Run(InsertEventsPass());
  if (!planned.ok()) return planned;
  spoil(f);
  return f.Run(EventIdContinuityPass());
}

TEST(EventIdContinuityPassTest, RejectsAnEventSignalledTwice) {
  absl::Status s = RunOnSpoiledEvents([](PassFixture& f) {
    f.context().signal[f.id("b2")] = f.context().signal[f.id("b1")];
  });
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInternal, HasSubstr("signalled twice")));
}

TEST(EventIdContinuityPassTest, RejectsANegativeEventCount) {
  absl::Status s =
      RunOnSpoiledEvents([](PassFixture& f) { f.context().num_events = -1; });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                          HasSubstr("negative event count")));
}

TEST(EventIdContinuityPassTest, RejectsAWaitOnAnUnknownEvent) {
  absl::Status s = RunOnSpoiledEvents([](PassFixture& f) {
    // join is issued last: its row ends the list.
    f.context().waits.items.push_back(f.context().num_events);
    ++f.context().waits.offsets.back();
  });
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInternal, HasSubstr("unknown event")));
}

TEST(EventIdContinuityPassTest, RejectsAWaitOnAnEventNothingSignals) {
  absl::Status s = RunOnSpoiledEvents(
      [](PassFixture& f) { f.context().signal[f.id("b1")] = -1; });
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInternal, HasSubstr("nothing signals")));
}

TEST(EventIdContinuityPassTest, NeedsEvents) {
  PassFixture f(ForkJoin());
  absl::Status s = f.Run(EventIdContinuityPass());
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                          HasSubstr("before events exist")));
}

}  // namespace
}  // namespace weft::scheduler
