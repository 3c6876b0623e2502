#include "scheduler/memory/arena_bounds.h"

#include <algorithm>
#include <cstdint>
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

}  // namespace
}  // namespace weft::scheduler::memory
