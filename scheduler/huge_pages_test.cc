#include "scheduler/huge_pages.h"

#include <cstdint>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace weft::scheduler {
namespace {

TEST(HugePagesTest, SmallRangesAreLeftAlone) {
  std::vector<char> small(4096);
  EXPECT_FALSE(AdviseHugePages(small.data(), small.size()));
  EXPECT_FALSE(AdviseHugePages(nullptr, 8 << 20));
}

TEST(HugePagesTest, ReserveHugeKeepsContentsAndGrows) {
  std::vector<int64_t> v = {1, 2, 3};
  ReserveHuge(v, size_t{1} << 20);  // 8 MiB
  EXPECT_GE(v.capacity(), size_t{1} << 20);
  EXPECT_EQ(v, (std::vector<int64_t>{1, 2, 3}));
  v.resize(size_t{1} << 20);
  std::iota(v.begin(), v.end(), 0);
  EXPECT_EQ(v[12345], 12345);
  EXPECT_EQ(v.back(), (int64_t{1} << 20) - 1);
  const size_t capacity = v.capacity();
  ReserveHuge(v, 10);  // never shrinks
  EXPECT_EQ(v.capacity(), capacity);
}

}  // namespace
}  // namespace weft::scheduler
