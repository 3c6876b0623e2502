#include "scheduler/passes/stream_id_continuity_pass.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/passes/pass_test_util.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using testing::GraphMaker;
using ::testing::HasSubstr;
using testing::PassFixture;
using ::weft::testing::StatusIs;

TEST(StreamIdContinuityPassTest, DenseInOrderOfFirstUse) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:rw").Node("c", "x:rw");
  PassFixture f(m.Build());
  f.SetStreams({{"a", 3}, {"b", 1}, {"c", 3}});
  f.context().streams[3].label = "three";
  f.context().streams[2].alive = false;
  ASSERT_TRUE(f.Run(StreamIdContinuityPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 2u);
  EXPECT_EQ(f.stream("a"), 0);
  EXPECT_EQ(f.stream("b"), 1);
  EXPECT_EQ(f.stream("c"), 0);
  EXPECT_EQ(f.context().streams[0].label, "three");
}

TEST(StreamIdContinuityPassTest, EveryNodeNeedsAStream) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:rw");
  PassFixture f(m.Build());
  f.SetStreams({{"a", 0}});
  absl::Status s = f.Run(StreamIdContinuityPass());
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInternal, HasSubstr("'b' has no stream")));
}

TEST(StreamIdContinuityPassTest, MustRunBeforeEvents) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w");
  PassFixture f(m.Build());
  f.SetStreams({{"a", 0}});
  f.context().events_planned = true;
  absl::Status s = f.Run(StreamIdContinuityPass());
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInternal, HasSubstr("before events")));
}

TEST(StreamIdContinuityPassTest, PeerStreamsCountAsUses) {
  // cp's stream comes first, then its peer stream, then b's.
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("cp", "x:r y:w", {.engine = Engine::kCopy});
  m.Node("b", "y:rw");
  PassFixture f(m.Build());
  f.SetStreams({{"cp", 4}, {"b", 1}});
  f.SetPeerStreams({{"cp", 2}});
  f.context().streams[2].label = "peer";
  ASSERT_TRUE(f.Run(StreamIdContinuityPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 3u);
  EXPECT_EQ(f.stream("cp"), 0);
  EXPECT_EQ(f.peer("cp"), 1);
  EXPECT_EQ(f.stream("b"), 2);
  EXPECT_EQ(f.peer("b"), -1);
  EXPECT_EQ(f.context().streams[1].label, "peer");
}

}  // namespace
}  // namespace weft::scheduler
