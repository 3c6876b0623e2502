#include "scheduler/passes/stream_pipeline.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/passes/pass_test_util.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using testing::GraphMaker;
using testing::PassFixture;

// The passes RunStreamPipeline ran, in order, on a small graph in `mode`.
std::vector<std::string> Names(StreamMode mode) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:r");
  PassFixture f(m.Build(), {.mode = mode});
  std::vector<std::pair<std::string, double>> seconds;
  EXPECT_TRUE(RunStreamPipeline(f.context(), &seconds).ok());
  std::vector<std::string> names;
  for (const auto& [name, s] : seconds) names.push_back(name);
  return names;
}

TEST(StreamPipelineTest, PassOrder) {
  EXPECT_THAT(Names(StreamMode::kMulti),
              ElementsAre("assign_by_label", "independent_engine",
                          "assign_by_dependency", "merge_ineffective_streams",
                          "stream_id_continuity", "insert_events",
                          "event_id_continuity", "split_streams"));
  EXPECT_THAT(
      Names(StreamMode::kSingle),
      ElementsAre("single_stream", "stream_id_continuity", "insert_events",
                  "event_id_continuity", "split_streams"));
}

// A labelled node, an all-reduce, a copy and compute work, on one device:
// every rule of the pipeline has something to do.
Graph EveryRule() {
  GraphMaker m;
  m.Buffer("x").Buffer("g").Buffer("h").Buffer("y");
  m.Node("load", "x:w", {.label = "io"});
  m.Node("grad", "x:r g:w");
  m.Node("reduce", "g:rw", {.engine = Engine::kCollective});
  m.Node("side", "x:r h:w");
  m.Node("apply", "g:r h:r y:w");
  m.Node("save", "y:r", {.engine = Engine::kCopy});
  return m.Build();
}

TEST(StreamPipelineTest, RulesInPriorityOrder) {
  PassFixture f(EveryRule());
  ASSERT_TRUE(RunStreamPipeline(f.context()).ok());
  // Streams by first use: io (load), grad's, the collective, side's, copy.
  ASSERT_EQ(f.context().streams.size(), 5u);
  EXPECT_EQ(f.stream("load"), 0);
  EXPECT_EQ(f.stream("grad"), 1);
  EXPECT_EQ(f.stream("reduce"), 2);
  EXPECT_EQ(f.stream("side"), 3);
  EXPECT_EQ(f.stream("apply"), 3);  // side's chain continues to it
  EXPECT_EQ(f.stream("save"), 4);
  EXPECT_EQ(f.context().streams[0].label, "io");
  EXPECT_EQ(f.context().streams[2].engine, Engine::kCollective);
  EXPECT_EQ(f.context().streams[4].engine, Engine::kCopy);
  // Cross-stream edges load -> grad, load -> side, grad -> reduce,
  // reduce -> apply, apply -> save; load's event serves two waiters.
  EXPECT_EQ(f.context().num_events, 4);
  EXPECT_THAT(f.waits("apply"), ElementsAre(f.signal("reduce")));
  EXPECT_EQ(f.waits("side"), f.waits("grad"));
}

TEST(StreamPipelineTest, SingleModeRunsTheSingleChain) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:r", {.device = 1});
  PassFixture f(m.Build(), {.mode = StreamMode::kSingle});
  ASSERT_TRUE(RunStreamPipeline(f.context()).ok());
  EXPECT_EQ(f.context().streams.size(), 2u);
  EXPECT_EQ(f.context().num_events, 1);
  EXPECT_EQ(f.choice("b").why, StreamChoice::Why::kSingle);
}

TEST(StreamPipelineTest, WithoutChoicesPlansTheSameAndRecordsNone) {
  PassFixture with(EveryRule());
  PassFixture without(EveryRule(), {.record_choices = false});
  ASSERT_TRUE(RunStreamPipeline(with.context()).ok());
  ASSERT_TRUE(RunStreamPipeline(without.context()).ok());
  EXPECT_EQ(with.context().choice.size(), 6u);
  EXPECT_TRUE(without.context().choice.empty());
  EXPECT_EQ(without.context().stream_of, with.context().stream_of);
  EXPECT_EQ(without.context().signal, with.context().signal);
  EXPECT_EQ(without.context().waits, with.context().waits);
  EXPECT_EQ(without.context().num_events, with.context().num_events);
}

}  // namespace
}  // namespace weft::scheduler
