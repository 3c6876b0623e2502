#include "scheduler/reachability.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;

Csr FromRows(const std::vector<std::vector<int32_t>>& rows) {
  Csr csr;
  for (const auto& row : rows) {
    csr.items.insert(csr.items.end(), row.begin(), row.end());
    csr.offsets.push_back(static_cast<int32_t>(csr.items.size()));
  }
  return csr;
}

TEST(ReachabilityTest, SmallDiamond) {
  // 0 -> 1 -> 3, 0 -> 2 -> 3, 4 alone.
  Csr preds = FromRows({{}, {0}, {0}, {1, 2}, {}});
  Csr succs = preds.Transpose(5);
  std::vector<NodeId> order = {0, 1, 2, 3, 4};
  ReachabilityIndex index(preds, succs, order);
  ReachabilityQuery q(index, preds);
  EXPECT_TRUE(q.Reaches(0, 3));
  EXPECT_TRUE(q.Reaches(1, 3));
  EXPECT_FALSE(q.Reaches(1, 2));
  EXPECT_FALSE(q.Reaches(3, 0));
  EXPECT_FALSE(q.Reaches(0, 0));
  EXPECT_FALSE(q.Reaches(0, 4));
  EXPECT_EQ(index.depth(3), 2);
  EXPECT_EQ(index.depth(4), 0);
  const std::vector<NodeId> targets = {2, 4};
  EXPECT_TRUE(q.ReachesAny(0, targets));
  EXPECT_FALSE(q.ReachesAny(1, targets));
}

// Random DAGs with long ranges, checked against a brute-force closure.
TEST(ReachabilityTest, MatchesBruteForce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 50 + trial * 10;
    // A hidden topological order; edges go forward in it.
    std::vector<NodeId> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::vector<int32_t>> rows(n);
    std::uniform_real_distribution<double> coin(0, 1);
    const double density = trial % 2 == 0 ? 1.5 / n : 4.0 / n;
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < j; ++i) {
        // Mostly local edges, some long ones.
        const double p = (j - i < 8 ? 0.2 : density);
        if (coin(rng) < p) rows[order[j]].push_back(order[i]);
      }
    }
    for (auto& row : rows) std::sort(row.begin(), row.end());
    Csr preds = FromRows(rows);
    Csr succs = preds.Transpose(n);
    ReachabilityIndex index(preds, succs, order);
    ReachabilityQuery q(index, preds);

    std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));
    for (NodeId v : order) {
      for (NodeId p : rows[v]) {
        reach[p][v] = true;
        for (int a = 0; a < n; ++a) {
          if (reach[a][p]) reach[a][v] = true;
        }
      }
    }
    for (int u = 0; u < n; ++u) {
      for (int v = 0; v < n; ++v) {
        ASSERT_EQ(q.Reaches(u, v), reach[u][v])
            << "trial " << trial << " " << u << " -> " << v;
        if (reach[u][v]) {
          ASSERT_TRUE(index.MayReach(u, v));
        }
      }
    }
    // ReachesAny agrees with the disjunction.
    std::uniform_int_distribution<int> pick(0, n - 1);
    for (int k = 0; k < 200; ++k) {
      const NodeId u = pick(rng);
      std::vector<NodeId> targets = {pick(rng), pick(rng), pick(rng)};
      bool expected = false;
      for (NodeId t : targets) expected = expected || reach[u][t];
      ASSERT_EQ(q.ReachesAny(u, targets), expected);
    }
  }
}

// A random DAG over a shuffled topological order, with long edges.
struct RandomDag {
  std::vector<NodeId> order;
  Csr preds;
  std::vector<std::vector<bool>> reach;  // reach[u][v]: a path u -> v
};

RandomDag MakeRandomDag(std::mt19937& rng, int n, double density) {
  RandomDag dag;
  dag.order.resize(n);
  std::iota(dag.order.begin(), dag.order.end(), 0);
  std::shuffle(dag.order.begin(), dag.order.end(), rng);
  std::vector<std::vector<int32_t>> rows(n);
  std::uniform_real_distribution<double> coin(0, 1);
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < j; ++i) {
      if (coin(rng) < (j - i < 8 ? 0.2 : density)) {
        rows[dag.order[j]].push_back(dag.order[i]);
      }
    }
  }
  for (auto& row : rows) std::sort(row.begin(), row.end());
  dag.preds = FromRows(rows);
  dag.reach.assign(n, std::vector<bool>(n, false));
  for (NodeId v : dag.order) {
    for (NodeId p : rows[v]) {
      dag.reach[p][v] = true;
      for (int a = 0; a < n; ++a) {
        if (dag.reach[a][p]) dag.reach[a][v] = true;
      }
    }
  }
  return dag;
}

TEST(IntervalLabelsTest, NeverRuleOutAPath) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 40 + trial * 7;
    RandomDag dag = MakeRandomDag(rng, n, 3.0 / n);
    IntervalLabels labels(dag.preds, dag.preds.Transpose(n));
    ASSERT_FALSE(labels.empty());
    int ruled_out = 0;
    for (int u = 0; u < n; ++u) {
      for (int v = 0; v < n; ++v) {
        if (dag.reach[u][v]) {
          ASSERT_TRUE(labels.MayReach(u, v)) << u << " -> " << v;
        } else {
          ruled_out += !labels.MayReach(u, v);
        }
      }
    }
    // The cut is worth something: it rules out some pairs.
    EXPECT_GT(ruled_out, 0);
  }
}

TEST(ReachabilityTest, LabelReturnsAncestorsOfThePredecessors) {
  // 0 -> 1 -> 2 and 0 -> 2: the edge 0 -> 2 is implied through 1.
  Csr preds = FromRows({{}, {0}, {0, 1}});
  ReachabilityIndex index(3);
  EXPECT_EQ(index.Label(0, 0, preds.Row(0)), 0u);
  EXPECT_EQ(index.Label(1, 1, preds.Row(1)), 0u);
  // In 2's frame bit 1 is node 0 (two positions back): an ancestor of 1.
  EXPECT_EQ(index.Label(2, 2, preds.Row(2)), 0b10u);
  EXPECT_EQ(index.window(2), 0b11u);
  EXPECT_EQ(index.depth(2), 2);
  EXPECT_TRUE(index.intervals().empty());
}

// Without interval labels in the index, a query builds its own once its
// searches pass the budget, and stays exact before and after.
TEST(ReachabilityTest, QueryBuildsIntervalsPastItsBudget) {
  std::mt19937 rng(5);
  const int n = 400;
  RandomDag dag = MakeRandomDag(rng, n, 1.0 / n);
  ReachabilityIndex index(n);
  for (int i = 0; i < n; ++i) {
    index.Label(dag.order[i], i, dag.preds.Row(dag.order[i]));
  }
  ReachabilityQuery lazy(index, dag.preds, /*interval_budget=*/50);
  ReachabilityQuery never(index, dag.preds, /*interval_budget=*/1 << 30);
  for (int u = 0; u < n; ++u) {
    for (int v = 0; v < n; ++v) {
      ASSERT_EQ(lazy.Reaches(u, v), dag.reach[u][v]) << u << " -> " << v;
      ASSERT_EQ(never.Reaches(u, v), dag.reach[u][v]) << u << " -> " << v;
    }
  }
  EXPECT_TRUE(lazy.built_intervals());
  EXPECT_FALSE(never.built_intervals());
  EXPECT_LT(lazy.nodes_searched(), never.nodes_searched());
}

TEST(ReachabilityTest, TryReachesAnyGivesUpPastItsLimit) {
  // A chain 0 -> 1 -> ... -> 199: 0 reaches 199 only through all of it.
  const int n = 200;
  std::vector<std::vector<int32_t>> rows(n);
  for (int i = 1; i < n; ++i) rows[i] = {i - 1};
  Csr preds = FromRows(rows);
  std::vector<NodeId> order(n);
  std::iota(order.begin(), order.end(), 0);
  ReachabilityIndex index(n);
  for (int i = 0; i < n; ++i) index.Label(i, i, preds.Row(i));
  ReachabilityQuery query(index, preds);
  const NodeId target = n - 1;
  EXPECT_EQ(query.TryReachesAny(0, absl::MakeConstSpan(&target, 1), 10),
            std::nullopt);
  EXPECT_EQ(query.TryReachesAny(0, absl::MakeConstSpan(&target, 1), 1000),
            std::optional<bool>(true));
  // Within the window: settled by one bit, no search at all.
  const NodeId near = 50;
  EXPECT_EQ(query.TryReachesAny(0, absl::MakeConstSpan(&near, 1), 0),
            std::optional<bool>(true));
  EXPECT_FALSE(query.built_intervals());
}

}  // namespace
}  // namespace weft::scheduler
