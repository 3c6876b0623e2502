#include "scheduler/reachability.h"

#include <algorithm>
#include <numeric>
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

TEST(CsrTest, Transpose) {
  Csr preds = FromRows({{}, {0}, {0, 1}, {1}});
  Csr succs = preds.Transpose(4);
  ASSERT_EQ(succs.rows(), 4);
  EXPECT_THAT(succs.Row(0), ElementsAre(1, 2));
  EXPECT_THAT(succs.Row(1), ElementsAre(2, 3));
  EXPECT_TRUE(succs.Row(2).empty());
  EXPECT_TRUE(succs.Row(3).empty());
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

}  // namespace
}  // namespace weft::scheduler
