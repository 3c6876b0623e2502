#include "scheduler/passes/event_id_continuity_pass.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/passes/insert_events_pass.h"
#include "scheduler/passes/pass_test_util.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using testing::GraphMaker;
using testing::PassFixture;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

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
}

TEST(EventIdContinuityPassTest, NeedsEvents) {
  PassFixture f(ForkJoin());
  absl::Status s = f.Run(EventIdContinuityPass());
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("before events exist"));
}

}  // namespace
}  // namespace weft::scheduler
