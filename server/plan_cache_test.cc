#include "server/plan_cache.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "scheduler/graph_builder.h"
#include "scheduler/planner.h"
#include "testing/wire_graphs.h"

namespace weft::server {
namespace {

// A checked plan of a chain of `n` nodes on one device.
runtime::CheckedPlan ChainPlan(int n) {
  absl::StatusOr<scheduler::Graph> graph =
      scheduler::BuildGraph(testing::AddChain(n), scheduler::GraphLimits());
  EXPECT_TRUE(graph.ok()) << graph.status();
  scheduler::PlannerOptions options;
  options.num_devices = 1;
  absl::StatusOr<scheduler::Plan> plan = scheduler::PlanGraph(*graph, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<runtime::CheckedPlan> checked = runtime::CheckPlan(
      std::make_shared<const scheduler::Graph>(*std::move(graph)),
      std::make_shared<const scheduler::Plan>(*std::move(plan)), 1);
  EXPECT_TRUE(checked.ok()) << checked.status();
  return *std::move(checked);
}

TEST(PlanCacheTest, FindsWhatItKeptAndCountsHitsAndMisses) {
  PlanCache cache({});
  EXPECT_FALSE(cache.Find("a").has_value());
  const runtime::CheckedPlan plan = ChainPlan(3);
  cache.Insert("a", plan);
  std::optional<runtime::CheckedPlan> found = cache.Find("a");
  ASSERT_TRUE(found.has_value());
  // The same graph and plan, shared rather than copied.
  EXPECT_EQ(found->graph().get(), plan.graph().get());
  EXPECT_EQ(found->plan().get(), plan.plan().get());
  EXPECT_FALSE(cache.Find("b").has_value());
  const PlanCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.nodes, 3);
}

TEST(PlanCacheTest, EvictsTheLeastRecentlyUsedPastMaxEntries) {
  PlanCache cache({/*max_entries=*/2, /*max_nodes=*/1000});
  cache.Insert("a", ChainPlan(1));
  cache.Insert("b", ChainPlan(1));
  ASSERT_TRUE(cache.Find("a").has_value());  // b is now the oldest
  cache.Insert("c", ChainPlan(1));
  EXPECT_TRUE(cache.Find("a").has_value());
  EXPECT_FALSE(cache.Find("b").has_value());
  EXPECT_TRUE(cache.Find("c").has_value());
  EXPECT_EQ(cache.stats().entries, 2);
}

TEST(PlanCacheTest, KeepsItsNodesWithinMaxNodes) {
  PlanCache cache({/*max_entries=*/100, /*max_nodes=*/10});
  cache.Insert("big", ChainPlan(11));  // never kept
  EXPECT_FALSE(cache.Find("big").has_value());
  cache.Insert("a", ChainPlan(4));
  cache.Insert("b", ChainPlan(4));
  cache.Insert("c", ChainPlan(4));  // 12 nodes: a goes
  EXPECT_FALSE(cache.Find("a").has_value());
  EXPECT_TRUE(cache.Find("b").has_value());
  EXPECT_TRUE(cache.Find("c").has_value());
  EXPECT_EQ(cache.stats().nodes, 8);
}

TEST(PlanCacheTest, ReplacesAnEntryOfTheSameKey) {
  PlanCache cache({});
  cache.Insert("a", ChainPlan(2));
  const runtime::CheckedPlan newer = ChainPlan(5);
  cache.Insert("a", newer);
  std::optional<runtime::CheckedPlan> found = cache.Find("a");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->plan().get(), newer.plan().get());
  EXPECT_EQ(cache.stats().entries, 1);
  EXPECT_EQ(cache.stats().nodes, 5);
}

TEST(PlanCacheTest, KeepsNothingWithoutEntries) {
  PlanCache cache({/*max_entries=*/0, /*max_nodes=*/1000});
  cache.Insert("a", ChainPlan(1));
  EXPECT_FALSE(cache.Find("a").has_value());
  EXPECT_EQ(cache.stats().entries, 0);
}

}  // namespace
}  // namespace weft::server
