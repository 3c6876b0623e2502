#include "scheduler/passes/assign_by_label_pass.h"

#include "gtest/gtest.h"
#include "scheduler/passes/pass_test_util.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using testing::GraphMaker;
using testing::PassFixture;

TEST(AssignByLabelPassTest, SameLabelDeviceAndEngineShareAStream) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w", {.label = "io"});
  m.Node("b", "y:w", {.label = "io"});  // independent of a: same stream
  m.Node("c", "z:w");
  m.Node("d", "x:r", {.label = "other"});
  m.Node("e", "y:r", {.label = "io", .device = 1});
  m.Node("f", "z:r", {.label = "io", .engine = Engine::kCopy});
  PassFixture f(m.Build());
  ASSERT_TRUE(f.Run(AssignByLabelPass()).ok());
  const auto& streams = f.context().streams;
  ASSERT_EQ(streams.size(), 4u);
  EXPECT_EQ(f.stream("a"), 0);
  EXPECT_EQ(f.stream("b"), 0);
  EXPECT_EQ(f.stream("c"), -1);  // left to later passes
  EXPECT_EQ(f.stream("d"), 1);
  EXPECT_EQ(f.stream("e"), 2);
  EXPECT_EQ(f.stream("f"), 3);
  EXPECT_EQ(streams[0].label, "io");
  EXPECT_EQ(streams[0].kind, LogicalStream::Kind::kLabel);
  EXPECT_EQ(streams[1].label, "other");
  EXPECT_EQ(streams[2].device, 1);
  EXPECT_EQ(streams[3].engine, Engine::kCopy);
  EXPECT_EQ(f.choice("b").why, StreamChoice::Why::kLabel);
}

TEST(AssignByLabelPassTest, KeepsStreamsAlreadyAssigned) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w", {.label = "io"});
  m.Node("b", "x:r", {.label = "io"});
  PassFixture f(m.Build());
  f.SetStreams({{"a", 0}});
  ASSERT_TRUE(f.Run(AssignByLabelPass()).ok());
  EXPECT_EQ(f.stream("a"), 0);
  EXPECT_EQ(f.stream("b"), 1);
  EXPECT_EQ(f.context().streams.size(), 2u);
}

}  // namespace
}  // namespace weft::scheduler
