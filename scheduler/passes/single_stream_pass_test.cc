#include "scheduler/passes/single_stream_pass.h"

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

TEST(SingleStreamPassTest, OneStreamForEveryEngineOfADevice) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w").Node("b", "x:r y:w", {.engine = Engine::kCopy});
  m.Node("c", "x:r z:w").Node("d", "y:r z:r", {.engine = Engine::kHost});
  PassFixture f(m.Build());
  ASSERT_TRUE(f.Run(SingleStreamPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 1u);
  EXPECT_EQ(f.context().streams[0].engine, Engine::kCompute);
  EXPECT_EQ(f.context().streams[0].kind, LogicalStream::Kind::kSingle);
  for (const char* n : {"a", "b", "c", "d"}) {
    EXPECT_EQ(f.stream(n), 0) << n;
    EXPECT_EQ(f.choice(n).why, StreamChoice::Why::kSingle) << n;
  }
}

TEST(SingleStreamPassTest, OneStreamPerDeviceInOrderOfFirstUse) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("a", "x:w", {.device = 1});
  m.Node("b", "x:r y:w", {.device = 0});
  m.Node("c", "y:r", {.device = 1});
  PassFixture f(m.Build());
  ASSERT_TRUE(f.Run(SingleStreamPass()).ok());
  ASSERT_EQ(f.context().streams.size(), 2u);
  EXPECT_EQ(f.context().streams[0].device, 1);
  EXPECT_EQ(f.context().streams[1].device, 0);
  EXPECT_EQ(f.stream("a"), 0);
  EXPECT_EQ(f.stream("b"), 1);
  EXPECT_EQ(f.stream("c"), 0);
}

TEST(SingleStreamPassTest, RejectsLabels) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:r", {.label = "io"});
  PassFixture f(m.Build());
  absl::Status s = f.Run(SingleStreamPass());
  EXPECT_THAT(s,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("graph.nodes[1].stream_label: stream label "
                                 "'io' is not allowed in SINGLE stream mode")));
}

TEST(SingleStreamPassTest, PeerIsTheSourceDevicesStream) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("p", "x:w", {.device = 1});
  m.Node("cp", "x:r y:w", {.engine = Engine::kCopy, .device = 0});
  m.Node("r", "y:r", {.device = 2});
  PassFixture f(m.Build());
  f.SetPeerDevices({{"cp", 1}});
  ASSERT_TRUE(f.Run(SingleStreamPass()).ok());
  EXPECT_EQ(f.stream("p"), 0);
  EXPECT_EQ(f.stream("cp"), 1);
  EXPECT_EQ(f.peer("cp"), 0);
  EXPECT_EQ(f.stream("r"), 2);
  EXPECT_EQ(f.peer("r"), -1);
}

}  // namespace
}  // namespace weft::scheduler
