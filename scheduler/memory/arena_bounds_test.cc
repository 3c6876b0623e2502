#include "scheduler/memory/arena_bounds.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/csr.h"

namespace weft::scheduler::memory {
namespace {

TEST(ArenaBoundsTest, GrowCliqueSwapsForHeavierMembers) {
  // 0-1 conflict; 2 and 3 conflict with 1 and each other, not with 0.
  Csr conflicts;
  conflicts.offsets = {0, 1, 4, 6, 8};
  conflicts.items = {1, 0, 2, 3, 1, 3, 1, 2};
  const std::vector<int64_t> sizes = {300, 100, 200, 200};
  std::vector<int32_t> clique = GrowClique(conflicts, sizes, {0}, 8);
  std::sort(clique.begin(), clique.end());
  EXPECT_THAT(clique, ::testing::ElementsAre(1, 2, 3));
}

TEST(ArenaBoundsTest, HeaviestCliqueAroundBeatsTheGreedyOne) {
  // Around 0: the greedy takes 1 (the heaviest), which conflicts with
  // neither 2 nor 3; {0, 2, 3} is heavier.
  Csr conflicts;
  conflicts.offsets = {0, 3, 4, 6, 8};
  conflicts.items = {1, 2, 3, 0, 0, 3, 0, 2};
  const std::vector<int64_t> sizes = {100, 300, 200, 200};
  std::vector<int32_t> clique = HeaviestCliqueAround(conflicts, sizes, 0, 1000);
  std::sort(clique.begin(), clique.end());
  EXPECT_THAT(clique, ::testing::ElementsAre(0, 2, 3));
  // With no work for the search, the greedy one.
  int64_t work_left = 10;
  clique = HeaviestCliqueAround(conflicts, sizes, 0, 0, &work_left);
  std::sort(clique.begin(), clique.end());
  EXPECT_THAT(clique, ::testing::ElementsAre(0, 1));
  EXPECT_LT(work_left, 10);
}

// On random graphs: a clique containing v, never heavier than the heaviest
// clique containing v (by enumeration), and as heavy with enough work.
TEST(ArenaBoundsPropertyTest, HeaviestCliqueAroundIsTheHeaviest) {
  for (uint32_t seed = 0; seed < 500; ++seed) {
    std::mt19937 rng(seed);
    const int n = 2 + static_cast<int>(rng() % 11);
    std::vector<std::vector<bool>> adjacent(n, std::vector<bool>(n, false));
    Csr conflicts;
    std::vector<std::vector<int32_t>> rows(n);
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        if (rng() % 3 != 0) {
          adjacent[a][b] = adjacent[b][a] = true;
          rows[a].push_back(b);
          rows[b].push_back(a);
        }
      }
    }
    for (const std::vector<int32_t>& row : rows) conflicts.AppendRow(row);
    std::vector<int64_t> sizes(n);
    for (int64_t& size : sizes) size = 1 + rng() % 50;
    const int32_t v = static_cast<int32_t>(rng() % n);
    int64_t heaviest = 0;
    for (uint32_t set = 0; set < (uint32_t{1} << n); ++set) {
      if (!((set >> v) & 1)) continue;
      int64_t bytes = 0;
      bool clique = true;
      for (int a = 0; a < n && clique; ++a) {
        if (!((set >> a) & 1)) continue;
        bytes += sizes[a];
        for (int b = a + 1; b < n && clique; ++b) {
          clique = !((set >> b) & 1) || adjacent[a][b];
        }
      }
      if (clique) heaviest = std::max(heaviest, bytes);
    }
    for (const int64_t work : {int64_t{0}, int64_t{20}, int64_t{1} << 20}) {
      const std::vector<int32_t> clique =
          HeaviestCliqueAround(conflicts, sizes, v, work);
      int64_t bytes = 0;
      ASSERT_TRUE(std::find(clique.begin(), clique.end(), v) != clique.end());
      for (size_t i = 0; i < clique.size(); ++i) {
        bytes += sizes[clique[i]];
        for (size_t j = i + 1; j < clique.size(); ++j) {
          ASSERT_TRUE(adjacent[clique[i]][clique[j]]) << seed;
        }
      }
      ASSERT_LE(bytes, heaviest) << seed;
      if (work == int64_t{1} << 20) {
        ASSERT_EQ(bytes, heaviest) << seed;
      }
    }
  }
}

}  // namespace
}  // namespace weft::scheduler::memory
