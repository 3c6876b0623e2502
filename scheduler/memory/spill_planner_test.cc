#include "scheduler/memory/spill_planner.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/memory/memory_order.h"
#include "scheduler/memory/test_plans.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"

namespace weft::scheduler::memory {
namespace {

using ::testing::HasSubstr;
using ::weft::scheduler::memory::testing::RandomGraph;
using ::weft::scheduler::memory::testing::RandomGraphOptions;
using ::weft::scheduler::testing::GraphMaker;
using ::weft::testing::StatusIs;

// A, B and C are live together; A is read before B.
Graph ThreeLive() {
  GraphMaker m;
  m.Buffer("A", 100, DType::kBytes)
      .Buffer("B", 100, DType::kBytes)
      .Buffer("C", 100, DType::kBytes)
      .Buffer("out", 10, DType::kBytes);
  m.Node("makeA", "A:w").Node("makeB", "B:w").Node("makeC", "C:w");
  m.Node("readA", "A:r").Node("join", "B:r C:r out:w");
  return m.Build();
}

TEST(SpillPlannerTest, EvictsTheFurthestNextUse) {
  absl::StatusOr<SpillPlan> plan =
      PlanSpills(ThreeLive(), {0, 1, 2, 3, 4}, 210);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->peak_bytes, 300);
  EXPECT_EQ(plan->spilled_bytes, 100);  // B, not A
  EXPECT_EQ(plan->spills, 1);
  EXPECT_EQ(plan->lower_bound_bytes, 90);
}

TEST(SpillPlannerTest, NothingSpillsWithinTheBudget) {
  absl::StatusOr<SpillPlan> plan =
      PlanSpills(ThreeLive(), {0, 1, 2, 3, 4}, 300);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->spilled_bytes, 0);
  EXPECT_EQ(plan->lower_bound_bytes, 0);
}

// Two phases whose buffers never meet: their excesses add up.
TEST(SpillPlannerTest, BoundAddsUpSeparatePhases) {
  GraphMaker m;
  for (const char* b : {"A", "B", "C", "D", "E", "F"}) {
    m.Buffer(b, 100, DType::kBytes);
  }
  m.Node("a", "A:w").Node("b", "B:w").Node("c", "C:w").Node("ra", "A:r");
  m.Node("bc", "B:r C:r");
  m.Node("d", "D:w").Node("e", "E:w").Node("f", "F:w").Node("rd", "D:r");
  m.Node("ef", "E:r F:r");
  absl::StatusOr<SpillPlan> plan =
      PlanSpills(m.Build(), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 200);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->lower_bound_bytes, 200);
  EXPECT_EQ(plan->spilled_bytes, 200);  // B, then E
}

// B covers the first shortfall and comes back before the second, which
// then spills again, though every step shares C.
TEST(SpillPlannerTest, BoundFollowsTheGapsBetweenUses) {
  GraphMaker m;
  for (const char* b : {"A", "B", "C", "D"}) m.Buffer(b, 100, DType::kBytes);
  m.Node("makeA", "A:w").Node("makeB", "B:w").Node("makeC", "C:w");
  m.Node("readA", "A:r").Node("makeD", "D:w").Node("readB", "B:r");
  m.Node("readCD", "C:r D:r");
  absl::StatusOr<SpillPlan> plan =
      PlanSpills(m.Build(), {0, 1, 2, 3, 4, 5, 6}, 200);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->peak_bytes, 300);
  EXPECT_EQ(plan->spilled_bytes, 200);
  EXPECT_EQ(plan->lower_bound_bytes, 200);
}

// Evicting S (furthest) leaves the budget short, so L goes too; then S
// fits again and stays.
TEST(SpillPlannerTest, KeepsVictimsThatFitAfterALargerOne) {
  GraphMaker m;
  m.Buffer("S", 10, DType::kBytes)
      .Buffer("L", 100, DType::kBytes)
      .Buffer("X", 100, DType::kBytes);
  m.Node("makeS", "S:w").Node("makeL", "L:w").Node("makeX", "X:w");
  m.Node("readL", "L:r").Node("readS", "S:r");
  absl::StatusOr<SpillPlan> plan = PlanSpills(m.Build(), {0, 1, 2, 3, 4}, 160);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->spilled_bytes, 100);
  EXPECT_EQ(plan->spills, 1);
  EXPECT_EQ(plan->lower_bound_bytes, 50);
}

// L is used again last, S before it, and S alone frees what is missing:
// evicting S spills less than Belady's L.
TEST(SpillPlannerTest, ReportsTheTighterChoiceWhereItSpillsLess) {
  GraphMaker m;
  m.Buffer("L", 768, DType::kBytes)
      .Buffer("S", 256, DType::kBytes)
      .Buffer("X", 256, DType::kBytes);
  m.Node("makeL", "L:w").Node("makeS", "S:w").Node("makeX", "X:w");
  m.Node("readS", "S:r").Node("readL", "L:r");
  absl::StatusOr<SpillPlan> plan = PlanSpills(m.Build(), {0, 1, 2, 3, 4}, 1100);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->spilled_bytes, 256);
  EXPECT_EQ(plan->spills, 1);
  EXPECT_EQ(plan->lower_bound_bytes, 180);
}

TEST(SpillPlannerTest, RefusesANodeAboveTheBudget) {
  EXPECT_OK(PlanSpills(ThreeLive(), {0, 1, 2, 3, 4}, 250));
  EXPECT_THAT(PlanSpills(ThreeLive(), {0, 1, 2, 3, 4}, 205).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("node 'join': its arguments need 210 bytes")));
  EXPECT_THAT(PlanSpills(ThreeLive(), {0, 9}, 1000).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// On random graphs in their memory-aware order: never below the bound,
// nothing spilled within the peak, and a smaller budget never spills less
// than the bound asks.
TEST(SpillPlannerPropertyTest, BetweenTheBoundAndTheLiveBytes) {
  int spilling = 0;
  for (uint32_t seed = 0; seed < 500; ++seed) {
    RandomGraphOptions options;
    options.num_nodes = 20 + seed % 40;
    options.num_buffers = 10 + seed % 30;
    const Graph g = RandomGraph(seed, options);
    absl::StatusOr<Dag> dag = InferDependencies(g);
    ASSERT_OK(dag);
    const MemoryOrder order = MemoryAwareOrder(g, *dag);
    absl::StatusOr<SpillPlan> free =
        PlanSpills(g, order.order, std::numeric_limits<int64_t>::max());
    ASSERT_OK(free);
    EXPECT_EQ(free->spilled_bytes, 0);
    int64_t largest_node = 0;
    for (const NodeId v : order.order) {
      int64_t bytes = 0;
      std::vector<BufferId> seen;
      for (const BufferUse& u : g.Uses(v)) {
        if (std::find(seen.begin(), seen.end(), u.buffer) != seen.end()) {
          continue;
        }
        seen.push_back(u.buffer);
        bytes += static_cast<int64_t>(g.buffer_bytes(u.buffer));
      }
      largest_node = std::max(largest_node, bytes);
    }
    const int64_t budget = std::max(largest_node, free->peak_bytes * 3 / 4);
    absl::StatusOr<SpillPlan> plan = PlanSpills(g, order.order, budget);
    ASSERT_OK(plan) << seed;
    ASSERT_GE(plan->spilled_bytes, plan->lower_bound_bytes) << seed;
    ASSERT_EQ(plan->peak_bytes, free->peak_bytes) << seed;
    spilling += plan->spilled_bytes > 0;
  }
  EXPECT_GT(spilling, 100);
}

}  // namespace
}  // namespace weft::scheduler::memory
