#include "scheduler/memory/arena_placement.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/csr.h"

namespace weft::scheduler::memory {
namespace {

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

}  // namespace
}  // namespace weft::scheduler::memory
