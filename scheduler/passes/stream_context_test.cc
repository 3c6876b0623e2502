#include "scheduler/passes/stream_context.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/passes/pass_test_util.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using testing::GraphMaker;
using testing::PassFixture;

TEST(ClockArenaTest, DenseRowsStartEmptyAndKeepTheirVersions) {
  ClockArena arena(5);
  ASSERT_TRUE(arena.dense());
  EXPECT_EQ(arena.num_versions(), 1);
  const int32_t row[5] = {3, 0, 7, 1, 2};
  EXPECT_EQ(arena.AddRow(row), 1);
  for (int s = 0; s < 5; ++s) {
    EXPECT_EQ(arena.Known(0, s), 0);
    EXPECT_EQ(arena.Known(1, s), row[s]);
  }
}

TEST(ClockArenaTest, CopyRowRefinesACopyAndLeavesTheOriginal) {
  ClockArena arena(6);
  const int32_t a[6] = {1, 9, 0, 4, 4, 2};
  const int32_t b[6] = {5, 2, 3, 4, 0, 8};
  const int32_t va = arena.AddRow(a);
  const int32_t vb = arena.AddRow(b);
  int32_t* row = arena.CopyRow(va);
  const int32_t vc = arena.num_versions() - 1;
  EXPECT_EQ(vc, 3);
  arena.MaxInto(row, arena.Row(vb));
  const std::vector<int32_t> expected = {5, 9, 3, 4, 4, 8};
  for (int s = 0; s < 6; ++s) {
    EXPECT_EQ(arena.Known(vc, s), expected[s]) << "stream " << s;
    EXPECT_EQ(arena.Known(va, s), a[s]) << "stream " << s;
    EXPECT_EQ(arena.Known(vb, s), b[s]) << "stream " << s;
  }
}

TEST(ClockArenaTest, ManyRowsGrowInBlocksWithoutLosingAny) {
  // More rows than one block holds, each a copy of the last plus one.
  ClockArena arena(3);
  int32_t version = 0;
  for (int i = 1; i <= 5000; ++i) {
    int32_t* row = arena.CopyRow(version);
    row[i % 3] += 1;
    version = arena.num_versions() - 1;
  }
  EXPECT_EQ(version, 5000);
  EXPECT_EQ(arena.Known(version, 0) + arena.Known(version, 1) +
                arena.Known(version, 2),
            5000);
  EXPECT_EQ(arena.Known(3, 0), 1);  // rows 1..3 added one to 1, 2, 0
  EXPECT_EQ(arena.Known(3, 1), 1);
  EXPECT_EQ(arena.Known(3, 2), 1);
}

TEST(ClockArenaTest, NarrowRowsWhileSequenceNumbersFitSixteenBits) {
  EXPECT_FALSE(ClockArena(3).narrow());
  EXPECT_FALSE(ClockArena(3, ClockArena::kNarrowMax + 1).narrow());
  EXPECT_FALSE(ClockArena(ClockArena::kDenseStreams + 1, 1).narrow());
  ClockArena arena(10, ClockArena::kNarrowMax);
  ASSERT_TRUE(arena.dense());
  ASSERT_TRUE(arena.narrow());
  // Counters above 32767 compare as unsigned.
  uint16_t* a = arena.CopyRowAs<uint16_t>(0);
  a[0] = 40000;
  a[9] = 7;
  const int32_t va = arena.num_versions() - 1;
  uint16_t* b = arena.CopyRowAs<uint16_t>(0);
  b[0] = 100;
  b[3] = ClockArena::kNarrowMax;
  const int32_t vb = arena.num_versions() - 1;
  arena.MaxRowAs<uint16_t>(va, vb);
  const int32_t vc = arena.num_versions() - 1;
  const std::vector<int32_t> expected = {40000, 0, 0, 65535, 0, 0, 0, 0, 0, 7};
  for (int s = 0; s < 10; ++s) {
    EXPECT_EQ(arena.Known(vc, s), expected[s]) << "stream " << s;
    EXPECT_EQ(arena.Known(0, s), 0) << "stream " << s;
  }
  EXPECT_EQ(arena.Known(va, 0), 40000);
  EXPECT_EQ(arena.Known(vb, 0), 100);
  // Growing keeps every row.
  int32_t version = vc;
  for (int i = 0; i < 5000; ++i) {
    uint16_t* row = arena.CopyRowAs<uint16_t>(version);
    row[1] += 1;
    version = arena.num_versions() - 1;
  }
  EXPECT_EQ(arena.Known(version, 1), 5000);
  EXPECT_EQ(arena.Known(version, 0), 40000);
  EXPECT_EQ(arena.Known(vc + 1, 1), 1);
}

TEST(ClockArenaTest, AWindowKeepsTheLatestRowsAndForgetsTheRest) {
  ClockArena arena(3);
  // Rows that fit the budget: every one is kept.
  arena.Reserve(10, /*max_bytes=*/1 << 20);
  EXPECT_EQ(arena.window(), 0);
  ClockArena windowed(3);
  windowed.Reserve(3 * ClockArena::kMinWindow, /*max_bytes=*/1);
  const int32_t window = windowed.window();
  ASSERT_EQ(window, ClockArena::kMinWindow);
  // Each row: stream 0 counts its version, stream 1 stays 7.
  for (int32_t v = 1; v <= 2 * window + 5; ++v) {
    int32_t* row = windowed.CopyRow(0);
    row[0] = v;
    row[1] = 7;
    ASSERT_EQ(windowed.num_versions() - 1, v);
  }
  const int32_t last = windowed.num_versions() - 1;
  for (int32_t v = last - window + 1; v <= last; ++v) {
    ASSERT_EQ(windowed.Known(v, 0), v);
    ASSERT_EQ(windowed.Known(v, 1), 7);
  }
  for (int32_t v = 0; v <= last - window; ++v) {
    ASSERT_EQ(windowed.Known(v, 0), 0) << v;
    ASSERT_EQ(windowed.Known(v, 1), 0) << v;
  }
  EXPECT_TRUE(windowed.Stale(last - window + 1));
  EXPECT_TRUE(windowed.Stale(last - window * 3 / 4));
  EXPECT_FALSE(windowed.Stale(last - window * 3 / 4 + 1));
  EXPECT_FALSE(arena.Stale(0));
  // A copy of the oldest kept row carries it forward.
  int32_t* row = windowed.CopyRow(last - window + 2);
  EXPECT_EQ(row[0], last - window + 2);
}

TEST(ClockArenaTest, SparseBeyondTheDenseLimit) {
  ClockArena arena(ClockArena::kDenseStreams + 1);
  ASSERT_FALSE(arena.dense());
  const std::vector<ClockArena::Entry> clock = {{2, 5}, {70, 1}};
  const int32_t v = arena.Add(clock);
  EXPECT_EQ(arena.Known(v, 2), 5);
  EXPECT_EQ(arena.Known(v, 3), 0);
  EXPECT_EQ(arena.Known(v, 70), 1);
}

TEST(StreamContextTest, SharedQueryAnswersReachability) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("a", "x:w").Node("b", "x:r y:w").Node("c", "y:r").Node("d", "x:r");
  PassFixture f(m.Build());
  ReachabilityQuery& query = f.context().query();
  EXPECT_EQ(&query, &f.context().query());  // one per context
  EXPECT_TRUE(query.Reaches(f.id("a"), f.id("c")));
  EXPECT_FALSE(query.Reaches(f.id("b"), f.id("d")));
  EXPECT_FALSE(query.Reaches(f.id("c"), f.id("a")));
}

}  // namespace
}  // namespace weft::scheduler
