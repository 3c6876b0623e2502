#include "scheduler/memory/arena_placement.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/csr.h"

namespace weft::scheduler::memory {
namespace {

// A symmetric conflict graph from pairs.
Csr Conflicts(int n, const std::vector<std::pair<int32_t, int32_t>>& pairs) {
  std::vector<std::vector<int32_t>> rows(n);
  for (const auto& [a, b] : pairs) {
    rows[a].push_back(b);
    rows[b].push_back(a);
  }
  Csr csr;
  for (std::vector<int32_t>& row : rows) {
    std::sort(row.begin(), row.end());
    csr.AppendRow(row);
  }
  return csr;
}

// The smallest arena by first fit over every order: placing the copies of
// an optimal assignment by ascending offset, first fit moves none up.
int64_t BruteForceArena(const Csr& conflicts,
                        const std::vector<int64_t>& sizes) {
  std::vector<int32_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<int64_t> offsets;
  int64_t best = -1;
  do {
    const int64_t arena =
        Place(conflicts, sizes, order, /*first_fit=*/true, &offsets);
    if (best < 0 || arena < best) best = arena;
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

TEST(ArenaPlacementTest, TfliteChainRecordsAsIntervals) {
  // TFLite's memory_management_test chain {16,0,1},{8,1,2},{64,2,3},
  // {32,3,4},{8,4,5}: greedy by size gives offsets 0,64,0,64,0, 96 bytes.
  Csr conflicts;
  conflicts.offsets = {0, 1, 3, 5, 7, 8};
  conflicts.items = {1, 0, 2, 1, 3, 2, 4, 3};
  const std::vector<int64_t> sizes = {16, 8, 64, 32, 8};
  std::vector<int64_t> offsets;
  EXPECT_EQ(PlaceInOrder(conflicts, sizes, {2, 3, 0, 1, 4}, &offsets), 96);
  EXPECT_THAT(offsets, ::testing::ElementsAre(0, 64, 0, 64, 0));
}

// Greedy by size stacks copy 0 on copy 3 and copy 2 above both 0 and 1;
// LowerTop moves 2 under the top by evicting 0, which fits below 3: 1536
// bytes, the clique {1, 2}.
TEST(ArenaPlacementTest, LowerTopBeatsGreedyBySize) {
  const Csr conflicts = Conflicts(4, {{2, 0}, {3, 0}, {2, 1}});
  const std::vector<int64_t> sizes = {512, 1024, 512, 768};
  std::vector<int64_t> offsets;
  int64_t arena = PlaceInOrder(conflicts, sizes, {1, 3, 0, 2}, &offsets);
  EXPECT_EQ(arena, 1792);
  EXPECT_THAT(offsets, ::testing::ElementsAre(768, 0, 1280, 0));
  int64_t work_left = 1000;
  arena = LowerTop(conflicts, sizes, arena, &work_left, &offsets);
  EXPECT_EQ(arena, 1536);
  EXPECT_THAT(offsets, ::testing::ElementsAre(0, 0, 1024, 512));
  // Nothing fits under the clique: the assignment stays.
  EXPECT_EQ(LowerTop(conflicts, sizes, arena, &work_left, &offsets), 1536);
  EXPECT_THAT(offsets, ::testing::ElementsAre(0, 0, 1024, 512));
  // Without work left nothing moves.
  std::vector<int64_t> greedy = {768, 0, 1280, 0};
  work_left = 0;
  EXPECT_EQ(LowerTop(conflicts, sizes, 1792, &work_left, &greedy), 1792);
  EXPECT_THAT(greedy, ::testing::ElementsAre(768, 0, 1280, 0));
}

// LowerTop keeps copies that conflict apart, never raises the arena, and
// never goes below the optimum; it often reaches the optimum.
TEST(ArenaPlacementPropertyTest, LowerTopIsValidAndNeverBelowTheOptimum) {
  int lowered = 0;
  int optimal = 0;
  for (uint32_t seed = 0; seed < 300; ++seed) {
    std::mt19937 rng(seed);
    const int n = 3 + static_cast<int>(rng() % 4);
    std::vector<std::pair<int32_t, int32_t>> pairs;
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        if (rng() % 2 == 0) pairs.emplace_back(b, a);
      }
    }
    const Csr conflicts = Conflicts(n, pairs);
    std::vector<int64_t> sizes(n);
    for (int64_t& size : sizes) size = 256 * (1 + rng() % 4);
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return sizes[a] > sizes[b]; });
    std::vector<int64_t> offsets;
    int64_t arena = PlaceInOrder(conflicts, sizes, order, &offsets);
    const int64_t greedy = arena;
    int64_t work_left = 20000;
    for (;;) {
      const int64_t next =
          LowerTop(conflicts, sizes, arena, &work_left, &offsets);
      ASSERT_LE(next, arena) << seed;
      if (next == arena) break;
      arena = next;
    }
    int64_t top = 0;
    for (int a = 0; a < n; ++a) {
      ASSERT_GE(offsets[a], 0) << seed;
      top = std::max(top, offsets[a] + sizes[a]);
      for (const int32_t b : conflicts.Row(a)) {
        ASSERT_TRUE(offsets[a] + sizes[a] <= offsets[b] ||
                    offsets[b] + sizes[b] <= offsets[a])
            << "seed " << seed << " copies " << a << " and " << b;
      }
    }
    ASSERT_EQ(top, arena) << seed;
    const int64_t optimum = BruteForceArena(conflicts, sizes);
    ASSERT_GE(arena, optimum) << seed;
    lowered += arena < greedy;
    optimal += arena == optimum;
  }
  EXPECT_GT(lowered, 5);
  EXPECT_GT(optimal, 290);
}

// The placement rule written plainly: each copy's placed conflicting
// copies sorted, either end of `height` where free, else the smallest gap
// that fits (the lowest with first fit), else above them all.
std::vector<int64_t> ReferencePlace(const Csr& conflicts,
                                    const std::vector<int64_t>& sizes,
                                    const std::vector<int32_t>& order,
                                    bool first_fit, int64_t height) {
  std::vector<int64_t> offsets(sizes.size(), -1);
  for (const int32_t k : order) {
    std::vector<std::pair<int64_t, int64_t>> placed;
    for (const int32_t a : conflicts.Row(k)) {
      if (offsets[a] >= 0 && sizes[a] > 0) {
        placed.emplace_back(offsets[a], offsets[a] + sizes[a]);
      }
    }
    std::sort(placed.begin(), placed.end());
    const int64_t size = sizes[k];
    int64_t offset = -1;
    if (height >= size && size > 0) {
      bool low = true, high = true;
      for (const auto& [at, end] : placed) {
        low = low && at >= size;
        high = high && (end <= height - size || at >= height);
      }
      offset = low ? 0 : high ? height - size : -1;
    }
    if (offset < 0) {
      int64_t top = 0, best = -1, best_gap = INT64_MAX;
      for (const auto& [at, end] : placed) {
        const int64_t gap = at - top;
        if (gap >= size && gap > 0 && gap < best_gap) {
          best = top;
          best_gap = gap;
          if (first_fit) break;
        }
        top = std::max(top, end);
      }
      offset = best >= 0 ? best : top;
    }
    offsets[k] = offset;
  }
  return offsets;
}

// Place gives the rule's offsets on graphs from sparse to complete (dense
// ones take the walk over all placed copies instead of sorting each
// copy's neighbors), with zero sizes, first fit and both ends.
TEST(ArenaPlacementPropertyTest, PlaceFollowsTheRuleAtEveryDensity) {
  int dense = 0;
  for (uint32_t seed = 0; seed < 400; ++seed) {
    std::mt19937 rng(seed);
    const int n = 1 + static_cast<int>(rng() % 120);
    const uint32_t percent = rng() % 101;
    std::vector<std::pair<int32_t, int32_t>> pairs;
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        if (rng() % 100 < percent) pairs.emplace_back(b, a);
      }
    }
    const Csr conflicts = Conflicts(n, pairs);
    const double mean = 2.0 * static_cast<double>(pairs.size()) / n;
    dense += 2.0 * static_cast<double>(pairs.size()) *
                 std::log2(std::max(mean, 2.0)) >
             static_cast<double>(n) * n;
    std::vector<int64_t> sizes(n);
    for (int64_t& size : sizes) size = 256 * (rng() % 6);  // some zero
    std::vector<int32_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const bool first_fit = rng() % 2 == 0;
    const int64_t height = rng() % 3 == 0 ? 256 * (rng() % 40) : 0;
    std::vector<int64_t> offsets;
    const int64_t arena =
        Place(conflicts, sizes, order, first_fit, &offsets, height);
    const std::vector<int64_t> expected =
        ReferencePlace(conflicts, sizes, order, first_fit, height);
    ASSERT_EQ(offsets, expected) << "seed " << seed;
    int64_t top = 0;
    for (int a = 0; a < n; ++a) top = std::max(top, offsets[a] + sizes[a]);
    ASSERT_EQ(arena, top) << "seed " << seed;
  }
  EXPECT_GT(dense, 100);
  EXPECT_LT(dense, 350);
}

}  // namespace
}  // namespace weft::scheduler::memory
