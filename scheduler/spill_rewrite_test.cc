// Victim choice of the spill rewrite: Belady's rule, victims that fit
// again stay, and the tighter rule where sizes differ.
#include "scheduler/spill_rewrite.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/planner.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using memory::Lifetimes;
using ::testing::ElementsAre;
using ::weft::scheduler::testing::GraphMaker;

// The buffers each rewrite spills, in order.
std::vector<BufferId> Spilled(const Rewrite& rewrite) {
  std::vector<BufferId> buffers;
  for (const Spill& spill : rewrite.spills) buffers.push_back(spill.buffer);
  return buffers;
}

// Chooses the spills of `graph`, planned for one device on one stream (so
// issue order is node order), under `target` bytes with `rule`.
Rewrite Choose(const Graph& graph, int64_t target, EvictionRule rule) {
  PlannerOptions options;
  options.stream_mode = StreamMode::kSingle;
  absl::StatusOr<Plan> plan = PlanGraph(graph, options);
  EXPECT_OK(plan);
  absl::StatusOr<Lifetimes> lifetimes = Lifetimes::Compute(graph, *plan);
  EXPECT_OK(lifetimes);
  Rewrite rewrite;
  ChooseSpills(graph, *plan, *lifetimes, /*device=*/0, target,
               std::vector<uint8_t>(graph.num_buffers(), 0),
               WritePositions(graph, *plan), rule, &rewrite);
  return rewrite;
}

// L (768 bytes) is used again last, S (256) before it; X's write leaves
// 180 bytes missing under 1100.
Graph LargeAndSmall() {
  GraphMaker m;
  m.Buffer("L", 768, DType::kBytes)
      .Buffer("S", 256, DType::kBytes)
      .Buffer("X", 256, DType::kBytes);
  m.Node("makeL", "L:w").Node("makeS", "S:w").Node("makeX", "X:w");
  m.Node("readS", "S:r").Node("readL", "L:r");
  return m.Build();
}

TEST(SpillRewriteTest, FurthestEvictsTheCopyUsedLast) {
  const Graph g = LargeAndSmall();
  const Rewrite rewrite = Choose(g, 1100, EvictionRule::kFurthest);
  EXPECT_THAT(Spilled(rewrite), ElementsAre(g.FindBuffer("L")));
  EXPECT_EQ(TrafficBytes(g, rewrite), 2 * 768);
}

TEST(SpillRewriteTest, TighterEvictsTheSmallerCopyThatIsEnough) {
  const Graph g = LargeAndSmall();
  const Rewrite rewrite = Choose(g, 1100, EvictionRule::kTighter);
  EXPECT_THAT(Spilled(rewrite), ElementsAre(g.FindBuffer("S")));
  EXPECT_EQ(TrafficBytes(g, rewrite), 2 * 256);
  ASSERT_EQ(rewrite.fills.size(), 1u);
  EXPECT_EQ(rewrite.fills[0].buffer, g.FindBuffer("S"));
}

// S (256) is used again last and goes first, which is not enough; L goes
// too, after which S fits again and stays.
TEST(SpillRewriteTest, VictimsThatFitAgainStay) {
  GraphMaker m;
  m.Buffer("S", 256, DType::kBytes)
      .Buffer("L", 768, DType::kBytes)
      .Buffer("X", 512, DType::kBytes);
  m.Node("makeS", "S:w").Node("makeL", "L:w").Node("makeX", "X:w");
  m.Node("readL", "L:r").Node("readS", "S:r");
  const Graph g = m.Build();
  const Rewrite rewrite = Choose(g, 1100, EvictionRule::kFurthest);
  EXPECT_THAT(Spilled(rewrite), ElementsAre(g.FindBuffer("L")));
  EXPECT_EQ(TrafficBytes(g, rewrite), 2 * 768);
}

}  // namespace
}  // namespace weft::scheduler
