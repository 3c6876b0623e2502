#include "scheduler/min_heap.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace weft::scheduler {
namespace {

TEST(MinHeapTest, StartsEmpty) {
  MinHeap<int> heap;
  EXPECT_TRUE(heap.empty());
  EXPECT_EQ(heap.size(), 0u);
}

TEST(MinHeapTest, PopsInAscendingOrder) {
  MinHeap<int> heap;
  for (int k : {5, 3, 9, 1, 7, 2, 8}) heap.push(k);
  EXPECT_EQ(heap.size(), 7u);
  std::vector<int> out;
  while (!heap.empty()) {
    out.push_back(heap.top());
    heap.pop();
  }
  EXPECT_EQ(out, (std::vector<int>{1, 2, 3, 5, 7, 8, 9}));
}

// Keys ordered by time, then position, as the simulation's event queue.
struct TimedKey {
  double time;
  int32_t position;
};
bool operator<(const TimedKey& a, const TimedKey& b) {
  return (a.time < b.time) | ((a.time == b.time) & (a.position < b.position));
}

TEST(MinHeapTest, MatchesSortingUnderInterleavedPushAndPop) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> time(0, 20);  // many equal times
  std::uniform_int_distribution<int> coin(0, 2);
  MinHeap<TimedKey> heap;
  std::vector<TimedKey> mirror;  // what the heap should hold
  int32_t next_position = 0;
  for (int step = 0; step < 5000; ++step) {
    if (mirror.empty() || coin(rng) != 0) {
      const TimedKey key{static_cast<double>(time(rng)), next_position++};
      heap.push(key);
      mirror.push_back(key);
    } else {
      auto least = std::min_element(mirror.begin(), mirror.end());
      ASSERT_FALSE(heap.empty());
      EXPECT_EQ(heap.top().time, least->time);
      EXPECT_EQ(heap.top().position, least->position);
      heap.pop();
      mirror.erase(least);
    }
    ASSERT_EQ(heap.size(), mirror.size());
  }
  heap.clear();
  EXPECT_TRUE(heap.empty());
}

}  // namespace
}  // namespace weft::scheduler
