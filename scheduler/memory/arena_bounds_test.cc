#include "scheduler/memory/arena_bounds.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/csr.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/memory/test_plans.h"
#include "scheduler/planner.h"

namespace weft::scheduler::memory {
namespace {

// The most bytes live at one instant of execution `e` of `lt` among the
// copies of `device`, by trying every instant a copy starts at: a copy is
// live from the earliest start of its uses to the latest end (forever if
// live to the end), so one that ends as another starts is not live with
// it. Fills `live_at_peak` with the copies live at the earliest such
// instant (local indices).
int64_t BruteForcePeak(const Lifetimes& lt, int device, int e,
                       std::vector<int32_t>* live_at_peak) {
  constexpr double kForever = std::numeric_limits<double>::infinity();
  std::vector<double> starts, ends;
  std::vector<int64_t> sizes;
  for (int c = 0; c < lt.num_copies(); ++c) {
    if (lt.copy(c).device != device) continue;
    double start = kForever, end = 0;
    for (const int32_t position : lt.Uses(c)) {
      if (position < 0) continue;
      start = std::min(start, lt.start_us(e, position));
      end = std::max(end, lt.end_us(e, position));
    }
    if (lt.copy(c).live_to_end) end = kForever;
    starts.push_back(start);
    ends.push_back(end);
    sizes.push_back(static_cast<int64_t>(lt.copy(c).size_bytes));
  }
  int64_t peak = 0;
  double at = kForever;
  for (const double t : starts) {
    if (t == kForever) continue;
    int64_t live = 0;
    for (size_t k = 0; k < starts.size(); ++k) {
      if (starts[k] <= t && t < ends[k]) live += sizes[k];
    }
    if (live > peak || (live == peak && live > 0 && t < at)) {
      peak = live;
      at = t;
    }
  }
  live_at_peak->clear();
  for (size_t k = 0; k < starts.size() && peak > 0; ++k) {
    if (starts[k] <= at && at < ends[k]) {
      live_at_peak->push_back(static_cast<int32_t>(k));
    }
  }
  return peak;
}

// ExecutionPeak against the brute force, on random plans of 10 to 49 nodes
// and on three of 3,000 nodes (whose starts and ends come far enough out of
// order to be sorted by std::sort rather than by insertion).
TEST(ArenaBoundsPropertyTest, ExecutionPeakIsTheBruteForcePeak) {
  int checked = 0;
  for (uint32_t seed = 0; seed < 600; ++seed) {
    testing::RandomPlanCase c = testing::RandomCase(seed);
    if (seed % 200 == 0) {
      c.graph.num_nodes = 3000;
      c.graph.num_buffers = 2000;
    }
    const Graph graph = testing::RandomGraph(seed, c.graph);
    c.planner.explain = false;
    absl::StatusOr<Plan> plan = PlanGraph(graph, c.planner);
    ASSERT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(graph, *plan);
    ASSERT_TRUE(lt.ok()) << lt.status();
    for (int d = 0; d < lt->num_devices(); ++d) {
      std::vector<int32_t> copies;
      std::vector<int64_t> sizes;
      for (int k = 0; k < lt->num_copies(); ++k) {
        if (lt->copy(k).device != d) continue;
        copies.push_back(k);
        sizes.push_back(static_cast<int64_t>(lt->copy(k).size_bytes));
      }
      for (int e = 0; e < Lifetimes::kExecutions; ++e) {
        std::vector<int32_t> live, expected_live;
        const int64_t expected = BruteForcePeak(*lt, d, e, &expected_live);
        ASSERT_EQ(ExecutionPeak(*lt, copies, sizes, e, &live), expected)
            << "seed " << seed << " device " << d << " execution " << e;
        ASSERT_EQ(live, expected_live)
            << "seed " << seed << " device " << d << " execution " << e;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

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

// Around a copy of thousands of neighbors the search keeps to its work:
// it weighs only the heaviest neighbors it could compare, and still finds
// a clique among them. Here 0 conflicts with 1..1500, and those of one
// parity with one another (two cliques of 750).
TEST(ArenaBoundsTest, HeaviestCliqueAroundAHubKeepsToItsWork) {
  constexpr int kNeighbors = 1500;
  Csr conflicts;
  std::vector<int32_t> row;
  for (int a = 1; a <= kNeighbors; ++a) row.push_back(a);
  conflicts.AppendRow(row);
  for (int a = 1; a <= kNeighbors; ++a) {
    row = {0};
    for (int b = 2 - a % 2; b <= kNeighbors; b += 2) {
      if (b != a) row.push_back(b);
    }
    conflicts.AppendRow(row);
  }
  const std::vector<int64_t> sizes(kNeighbors + 1, 1);
  constexpr int64_t kWork = int64_t{1} << 16;
  int64_t work_left = int64_t{1} << 40;
  const std::vector<int32_t> clique =
      HeaviestCliqueAround(conflicts, sizes, 0, kWork, &work_left);
  EXPECT_LE((int64_t{1} << 40) - work_left, 4 * kWork);
  ASSERT_EQ(clique.front(), 0);
  // The heaviest 256 neighbors hold 128 of each parity.
  EXPECT_GE(clique.size(), 129u);
  for (size_t i = 1; i < clique.size(); ++i) {
    EXPECT_EQ(clique[i] % 2, clique[1] % 2);
  }
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
