#include "scheduler/memory/conflict_graph.h"

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/memory/test_plans.h"
#include "scheduler/plan.h"
#include "scheduler/planner.h"

namespace weft::scheduler::memory {
namespace {

using ::weft::scheduler::memory::testing::RandomCase;
using ::weft::scheduler::memory::testing::RandomGraph;

// The lifetimes of a random plan (test_plans.h) of seed `seed`.
absl::StatusOr<Lifetimes> RandomLifetimes(uint32_t seed) {
  testing::RandomPlanCase c = RandomCase(seed);
  const Graph g = RandomGraph(seed, c.graph);
  PlannerOptions options = c.planner;
  options.explain = false;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  if (!plan.ok()) return plan.status();
  return Lifetimes::Compute(g, *plan);
}

// The conflict graph from the sweep equals the pairs MayBeLiveTogether
// names.
TEST(ConflictGraphPropertyTest, ConflictGraphIsExact) {
  for (uint32_t seed = 0; seed < 1500; ++seed) {
    absl::StatusOr<Lifetimes> lifetimes = RandomLifetimes(seed);
    ASSERT_TRUE(lifetimes.ok()) << lifetimes.status();
    const Lifetimes& lt = *lifetimes;
    for (int d = 0; d < lt.num_devices(); ++d) {
      const ConflictGraph cg = BuildConflictGraph(lt, d);
      for (size_t i = 0; i < cg.copies.size(); ++i) {
        std::vector<int32_t> expected;
        for (size_t j = 0; j < cg.copies.size(); ++j) {
          if (i != j && lt.MayBeLiveTogether(cg.copies[i], cg.copies[j])) {
            expected.push_back(static_cast<int32_t>(j));
          }
        }
        ASSERT_THAT(cg.conflicts.Row(i), ::testing::ElementsAreArray(expected))
            << "seed " << seed << " device " << d << " copy " << cg.copies[i];
      }
    }
  }
}

// A budget of conflict pairs gives the whole graph exactly when it holds
// that many pairs or fewer (counting issue-order overlaps ahead gives up
// early, never too early).
TEST(ConflictGraphPropertyTest, BudgetIsExact) {
  int tight = 0;
  for (uint32_t seed = 0; seed < 600; ++seed) {
    absl::StatusOr<Lifetimes> lifetimes = RandomLifetimes(seed);
    ASSERT_TRUE(lifetimes.ok()) << lifetimes.status();
    for (int d = 0; d < lifetimes->num_devices(); ++d) {
      const ConflictGraph all = BuildConflictGraph(*lifetimes, d);
      const int64_t pairs =
          static_cast<int64_t>(all.conflicts.items.size()) / 2;
      if (pairs == 0) continue;
      const ConflictGraph at = BuildConflictGraph(*lifetimes, d, pairs);
      ASSERT_TRUE(at.complete) << "seed " << seed << " device " << d;
      EXPECT_EQ(at.conflicts.items, all.conflicts.items) << seed;
      ASSERT_FALSE(BuildConflictGraph(*lifetimes, d, pairs - 1).complete)
          << "seed " << seed << " device " << d;
      ++tight;
    }
  }
  EXPECT_GT(tight, 300);
}

}  // namespace
}  // namespace weft::scheduler::memory
