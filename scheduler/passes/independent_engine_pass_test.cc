#include "scheduler/passes/independent_engine_pass.h"

#include "gtest/gtest.h"
#include "scheduler/passes/pass_test_util.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using testing::GraphMaker;
using testing::PassFixture;

TEST(IndependentEnginePassTest, OneCollectiveStreamPerDevice) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("c1", "x:rw", {.engine = Engine::kCollective});
  m.Node("k", "x:r y:w");
  m.Node("c2", "y:rw", {.engine = Engine::kCollective, .device = 1});
  m.Node("c3", "z:rw", {.engine = Engine::kCollective});  // independent
  m.Node("p", "x:r z:w", {.engine = Engine::kCopy});
  PassFixture f(m.Build());
  ASSERT_TRUE(f.Run(IndependentEnginePass()).ok());
  const auto& streams = f.context().streams;
  ASSERT_EQ(streams.size(), 2u);
  EXPECT_EQ(f.stream("c1"), 0);
  EXPECT_EQ(f.stream("c3"), 0);
  EXPECT_EQ(f.stream("c2"), 1);
  EXPECT_EQ(f.stream("k"), -1);
  EXPECT_EQ(f.stream("p"), -1);
  EXPECT_EQ(streams[0].engine, Engine::kCollective);
  EXPECT_EQ(streams[0].kind, LogicalStream::Kind::kIndependent);
  EXPECT_EQ(streams[1].device, 1);
  EXPECT_EQ(f.choice("c3").why, StreamChoice::Why::kIndependent);
}

TEST(IndependentEnginePassTest, LabelledCollectivesKeepTheirLabelStream) {
  GraphMaker m;
  m.Buffer("x");
  m.Node("c1", "x:rw", {.label = "ring", .engine = Engine::kCollective});
  m.Node("c2", "x:rw", {.engine = Engine::kCollective});
  PassFixture f(m.Build());
  f.SetStreams({{"c1", 0}});
  f.context().streams[0].kind = LogicalStream::Kind::kLabel;
  ASSERT_TRUE(f.Run(IndependentEnginePass()).ok());
  EXPECT_EQ(f.stream("c1"), 0);
  EXPECT_EQ(f.stream("c2"), 1);
}

}  // namespace
}  // namespace weft::scheduler
