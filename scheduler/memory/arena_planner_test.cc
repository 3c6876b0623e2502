#include "scheduler/memory/arena_planner.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/memory/arena_bounds.h"
#include "scheduler/memory/conflict_graph.h"
#include "scheduler/memory/dnn_graphs.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/memory/test_plans.h"
#include "scheduler/planner.h"
#include "scheduler/test_util.h"

namespace weft::scheduler::memory {
namespace {

using ::weft::scheduler::memory::testing::BruteBefore;
using ::weft::scheduler::memory::testing::BruteForceBefore;
using ::weft::scheduler::memory::testing::RandomCase;
using ::weft::scheduler::memory::testing::RandomGraph;
using ::weft::scheduler::memory::testing::WithBuffers;
using ::weft::scheduler::testing::GraphMaker;

struct Planned {
  Plan plan;
  Lifetimes lifetimes;
  ArenaPlan arenas;
  int64_t offset(BufferId b, int device = 0) const {
    return arenas.offsets[lifetimes.Find(b, device)];
  }
  // The copies on `device` (Lifetimes numbering) and their aligned sizes.
  void DeviceCopies(int device, std::vector<int32_t>* copies,
                    std::vector<int64_t>* sizes) const {
    for (int k = 0; k < lifetimes.num_copies(); ++k) {
      if (lifetimes.copy(k).device != device) continue;
      copies->push_back(k);
      sizes->push_back(arenas.sizes[k]);
    }
  }
};

Planned PlanAll(const Graph& graph, PlannerOptions options = {},
                ArenaOptions arena_options = {}) {
  Planned p;
  options.explain = false;
  absl::StatusOr<Plan> plan = PlanGraph(graph, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return p;
  p.plan = *std::move(plan);
  absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(graph, p.plan);
  EXPECT_TRUE(lt.ok()) << lt.status();
  if (!lt.ok()) return p;
  p.lifetimes = *std::move(lt);
  p.arenas = PlanArenas(p.lifetimes, arena_options);
  return p;
}

TEST(ArenaPlannerTest, Chain) {
  GraphMaker m;
  m.Buffer("x", 1000, DType::kBytes)
      .Buffer("y", 2000, DType::kBytes)
      .Buffer("z", 500, DType::kBytes);
  m.Node("a", "x:w").Node("b", "x:r y:w").Node("c", "y:r z:w");
  const Planned p = PlanAll(WithBuffers(m.Build(), {"z"}));
  EXPECT_EQ(p.offset(1), 0);
  EXPECT_EQ(p.offset(0), 2048);
  EXPECT_EQ(p.offset(2), 2048);
  ASSERT_EQ(p.arenas.devices.size(), 1u);
  const DeviceArena& arena = p.arenas.devices[0];
  EXPECT_EQ(arena.arena_bytes, 3072);
  EXPECT_EQ(arena.lower_bound_bytes, 3072);
  EXPECT_EQ(arena.peak_live_bytes, 3072);
  EXPECT_EQ(arena.no_reuse_bytes, 3584);
  EXPECT_EQ(arena.conflicts, 2);
}

TEST(ArenaPlannerTest, Diamond) {
  GraphMaker m;
  m.Buffer("x", 4096, DType::kBytes)
      .Buffer("y", 1024, DType::kBytes)
      .Buffer("z", 2048, DType::kBytes)
      .Buffer("out", 512, DType::kBytes);
  m.Node("a", "x:w").Node("b", "x:r y:w").Node("c", "x:r z:w");
  m.Node("d", "y:r z:r out:w");
  const Planned p = PlanAll(WithBuffers(m.Build(), {"out"}));
  ASSERT_NE(p.plan.nodes[1].stream, p.plan.nodes[2].stream);
  EXPECT_EQ(p.offset(0), 0);     // x
  EXPECT_EQ(p.offset(2), 4096);  // z
  EXPECT_EQ(p.offset(1), 6144);  // y
  EXPECT_EQ(p.offset(3), 0);     // out: x is done once d starts
  EXPECT_EQ(p.arenas.devices[0].arena_bytes, 7168);
  EXPECT_EQ(p.arenas.devices[0].lower_bound_bytes, 7168);
}

Graph TwoBranches() {
  GraphMaker m;
  for (const char* name : {"x", "u", "y", "v", "out"}) {
    m.Buffer(name, 1024, DType::kBytes);
  }
  m.Node("a", "x:w").Node("a2", "x:r u:w");
  m.Node("b", "y:w").Node("b2", "y:r v:w");
  m.Node("j", "u:r v:r out:w");
  return WithBuffers(m.Build(), {"out"});
}

TEST(ArenaPlannerTest, ParallelBranchesOnTwoStreamsDoNotShare) {
  const Planned p = PlanAll(TwoBranches());
  ASSERT_NE(p.plan.nodes[0].stream, p.plan.nodes[2].stream);
  EXPECT_EQ(p.offset(0), 0);     // x
  EXPECT_EQ(p.offset(1), 1024);  // u
  EXPECT_EQ(p.offset(2), 2048);  // y: b may run while a2 reads x
  EXPECT_EQ(p.offset(3), 3072);  // v
  EXPECT_EQ(p.offset(4), 0);     // out
  // More than issue order alone needs (3072): the streams overlap, as the
  // timed executions show.
  EXPECT_EQ(p.arenas.devices[0].arena_bytes, 4096);
  EXPECT_EQ(p.arenas.devices[0].peak_live_bytes, 3072);
  EXPECT_EQ(p.arenas.devices[0].lower_bound_bytes, 4096);
}

TEST(ArenaPlannerTest, OneStreamLetsTheBranchesShare) {
  PlannerOptions options;
  options.stream_mode = StreamMode::kSingle;
  const Planned p = PlanAll(TwoBranches(), options);
  EXPECT_EQ(p.offset(0), 0);     // x
  EXPECT_EQ(p.offset(1), 1024);  // u
  EXPECT_EQ(p.offset(2), 0);     // y reuses x
  EXPECT_EQ(p.offset(3), 2048);  // v
  EXPECT_EQ(p.offset(4), 0);     // out
  EXPECT_EQ(p.arenas.devices[0].arena_bytes, 3072);
}

// Inverted residual blocks: each block's input and output must sit at
// opposite ends of the arena for the expanded tensors to fit between them.
TEST(ArenaPlannerTest, InvertedResidualChainMeetsTheBound) {
  const Graph g = MobileNetLike(300);
  const Planned p = PlanAll(g);
  const DeviceArena& arena = p.arenas.devices[0];
  EXPECT_EQ(arena.arena_bytes, arena.lower_bound_bytes);
  EXPECT_EQ(arena.heuristic, ArenaHeuristic::kTwoEnded);
  ArenaOptions by_size;
  by_size.heuristics = {ArenaHeuristic::kBySize};
  EXPECT_GT(PlanAll(g, {}, by_size).arenas.devices[0].arena_bytes,
            arena.lower_bound_bytes);
}

TEST(ArenaPlannerTest, AlignsOffsetsAndSizes) {
  GraphMaker m;
  m.Buffer("x", 10, DType::kBytes).Buffer("y", 10, DType::kBytes);
  m.Node("a", "x:w y:w");
  ArenaOptions options;
  options.alignment = 128;
  const Planned p = PlanAll(m.Build(), {}, options);
  EXPECT_EQ(p.arenas.devices[0].arena_bytes, 256);
  EXPECT_EQ(p.offset(0) % 128, 0);
  EXPECT_EQ(p.offset(1) % 128, 0);
  EXPECT_NE(p.offset(0), p.offset(1));
}

TEST(ArenaPlannerTest, ReportsTheBudget) {
  ArenaOptions options;
  options.budget_bytes = {1 << 20};
  const Planned p = PlanAll(TwoBranches(), {}, options);
  EXPECT_EQ(p.arenas.devices[0].budget_bytes, 1 << 20);
  EXPECT_EQ(p.arenas.devices[0].spilled_bytes, 0);
}

// No two copies that may be live together (by a brute-force closure of the
// plan's order) share a byte, for every heuristic.
TEST(ArenaPlannerPropertyTest, CopiesLiveTogetherNeverOverlap) {
  int64_t shared = 0;
  for (uint32_t seed = 0; seed < 5000; ++seed) {
    testing::RandomPlanCase c = RandomCase(seed);
    const Graph g = RandomGraph(seed, c.graph);
    ArenaOptions options;
    options.heuristics = {
        kAllArenaHeuristics[seed % std::size(kAllArenaHeuristics)]};
    if (seed % 6 == 5) options.heuristics = {ArenaHeuristic::kReleaseOrder};
    if (seed % 7 == 6) options.max_conflicts = 1;  // no conflict graph
    if (seed % 11 == 10) {  // placed against a large graph after all
      options.max_conflicts = 1;
      options.place_large_graphs = true;
    }
    const Planned p = PlanAll(g, c.planner, options);
    const auto bf = BruteForceBefore(p.plan);
    const Lifetimes& lt = p.lifetimes;
    for (int a = 0; a < lt.num_copies(); ++a) {
      const int d = lt.copy(a).device;
      const int64_t oa = p.arenas.offsets[a];
      const int64_t ea = oa + p.arenas.sizes[a];
      ASSERT_EQ(oa % 256, 0);
      ASSERT_LE(ea, p.arenas.devices[d].arena_bytes);
      for (int b = a + 1; b < lt.num_copies(); ++b) {
        if (lt.copy(b).device != d) continue;
        const int64_t ob = p.arenas.offsets[b];
        const int64_t eb = ob + p.arenas.sizes[b];
        const bool overlap = oa < eb && ob < ea;
        if (!overlap) continue;
        ++shared;
        ASSERT_TRUE(BruteBefore(lt, bf, a, b) || BruteBefore(lt, bf, b, a))
            << "seed " << seed << " copies " << a << " and " << b;
      }
    }
    for (const DeviceArena& arena : p.arenas.devices) {
      ASSERT_GE(arena.arena_bytes, arena.lower_bound_bytes) << seed;
      ASSERT_LE(arena.arena_bytes, arena.no_reuse_bytes) << seed;
    }
  }
  EXPECT_GT(shared, 1000);  // reuse happens
}

// Where every copy of a device is live at once, the arena is their sum,
// stacked heaviest first without a conflict graph: the same offsets as the
// full search places (all pairs conflict, so ordering by conflicts falls
// back to size), and the conflicts counted as every pair.
TEST(ArenaPlannerPropertyTest, CopiesAllLiveAtOnceStackWithoutTheSearch) {
  int stacked = 0;
  for (uint32_t seed = 0; seed < 2000; ++seed) {
    testing::RandomPlanCase c = RandomCase(seed);
    const Graph g = RandomGraph(seed, c.graph);
    const Planned p = PlanAll(g, c.planner);
    ArenaOptions full;
    full.heuristics = {ArenaHeuristic::kByConflicts};
    const ArenaPlan searched = PlanArenas(p.lifetimes, full);
    ASSERT_EQ(searched.devices.size(), p.arenas.devices.size());
    for (size_t d = 0; d < searched.devices.size(); ++d) {
      const DeviceArena& arena = p.arenas.devices[d];
      if (arena.no_reuse_bytes != arena.lower_bound_bytes) continue;
      std::vector<int32_t> copies;
      std::vector<int64_t> sizes;
      p.DeviceCopies(static_cast<int>(d), &copies, &sizes);
      if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) continue;
      ++stacked;
      EXPECT_EQ(arena.heuristic, ArenaHeuristic::kBySize) << seed;
      EXPECT_EQ(arena.arena_bytes, arena.no_reuse_bytes) << seed;
      EXPECT_EQ(arena.conflicts, searched.devices[d].conflicts) << seed;
      EXPECT_EQ(arena.arena_bytes, searched.devices[d].arena_bytes) << seed;
      for (const int32_t k : copies) {
        EXPECT_EQ(p.arenas.offsets[k], searched.offsets[k])
            << "seed " << seed << " copy " << k;
      }
    }
  }
  EXPECT_GT(stacked, 100);
}

// Stopping at the lower bound and raising it only when no arena meets it
// never costs bytes: all heuristics together place in no more than any of
// those that do not depend on the bound alone (without the local search,
// which only lowers an arena but from another start may land elsewhere).
TEST(ArenaPlannerPropertyTest, AllHeuristicsBeatEachAlone) {
  for (uint32_t seed = 0; seed < 400; ++seed) {
    testing::RandomPlanCase c = RandomCase(seed);
    const Graph g = RandomGraph(seed, c.graph);
    const Planned p = PlanAll(g, c.planner);
    for (const ArenaHeuristic h :
         {ArenaHeuristic::kBySize, ArenaHeuristic::kInOrder,
          ArenaHeuristic::kByConflicts, ArenaHeuristic::kByLifetime}) {
      ArenaOptions options;
      options.heuristics = {h};
      options.lower_top_work_per_copy = 0;
      const ArenaPlan alone = PlanArenas(p.lifetimes, options);
      ASSERT_EQ(alone.devices.size(), p.arenas.devices.size());
      for (size_t d = 0; d < alone.devices.size(); ++d) {
        EXPECT_LE(p.arenas.devices[d].arena_bytes, alone.devices[d].arena_bytes)
            << "seed " << seed << " " << ArenaHeuristicName(h);
        EXPECT_LE(p.arenas.devices[d].lower_bound_bytes,
                  p.arenas.devices[d].arena_bytes);
      }
    }
  }
}

TEST(ArenaPlannerTest, WithoutAConflictGraphReleasesInIssueOrder) {
  ArenaOptions options;
  options.max_conflicts = 1;
  PlannerOptions single;
  single.stream_mode = StreamMode::kSingle;
  const Planned p = PlanAll(TwoBranches(), single, options);
  EXPECT_EQ(p.arenas.devices[0].heuristic, ArenaHeuristic::kReleaseOrder);
  EXPECT_EQ(p.arenas.devices[0].conflicts, -1);
  EXPECT_EQ(p.offset(0), 0);     // x
  EXPECT_EQ(p.offset(1), 1024);  // u
  EXPECT_EQ(p.offset(2), 0);     // y takes x's block, free after a2
  EXPECT_EQ(p.offset(3), 2048);  // v
  EXPECT_EQ(p.offset(4), 0);     // out takes y's block
  EXPECT_EQ(p.arenas.devices[0].arena_bytes, 3072);
}

// Reuse without a conflict graph follows happens-before: on parallel
// streams a block is taken only once its last holder is known to have
// finished, and a block at the top grows to fit.
TEST(ArenaPlannerTest, WithoutAConflictGraphStreamsWaitForKnowledge) {
  ArenaOptions options;
  options.max_conflicts = 1;
  const Planned p = PlanAll(TwoBranches(), {}, options);
  EXPECT_EQ(p.arenas.devices[0].heuristic, ArenaHeuristic::kReleaseOrder);
  EXPECT_EQ(p.offset(0), 0);     // x
  EXPECT_EQ(p.offset(1), 1024);  // u
  EXPECT_EQ(p.offset(2), 2048);  // y: b does not know that a2 finished
  EXPECT_EQ(p.offset(3), 3072);  // v
  EXPECT_EQ(p.offset(4), 0);     // out: j waits for both branches
  EXPECT_EQ(p.arenas.devices[0].arena_bytes, 4096);
}

// Without a conflict graph, blocks freed on parallel streams are reused
// once the streams know they are free, and do not break the arena into
// pieces: on random DAGs (1 to 3 inputs among the 32 latest buffers, one
// device, 32 streams) the arena stays near that of the greedy by size
// with the conflict graph. At 16k nodes many copies find no known-free
// block among the first few of their size; the tries the other copies
// left them keep that arena within 3% (32 tries for each copy: 4.4% over).
TEST(ArenaPlannerTest, WithoutAConflictGraphRandomDagsStayNearTheGreedy) {
  for (const int nodes : {2000, 6000, 16000}) {
    const Graph g = RandomDag(nodes, /*seed=*/nodes);
    ArenaOptions release;
    release.heuristics = {ArenaHeuristic::kReleaseOrder};
    release.max_conflicts = 1;
    const Planned p = PlanAll(g, {}, release);
    ArenaOptions by_size;
    by_size.heuristics = {ArenaHeuristic::kBySize};
    by_size.lower_top_work_per_copy = 0;
    by_size.max_conflicts = int64_t{1} << 40;
    const ArenaPlan greedy = PlanArenas(p.lifetimes, by_size);
    const int64_t percent = nodes >= 16000 ? 103 : 105;
    EXPECT_LE(p.arenas.devices[0].arena_bytes,
              greedy.devices[0].arena_bytes * percent / 100)
        << nodes << " nodes";
  }
}

// Over budget, a device past max_conflicts is placed by size against a
// conflict graph of up to max_large_conflicts pairs as well, and the
// smaller arena kept; within budget (or with no larger graph allowed) the
// graph is not built. On random DAGs the greedy by size beats release
// order.
TEST(ArenaPlannerTest, OverBudgetALargerConflictGraphIsPlacedBySize) {
  int smaller = 0;
  for (const int nodes : {1500, 3000}) {
    const Graph g = RandomDag(nodes, /*seed=*/nodes);
    ArenaOptions release;
    release.max_conflicts = 1;
    const Planned p = PlanAll(g, {}, release);
    const DeviceArena& released = p.arenas.devices[0];
    ASSERT_EQ(released.conflicts, -1);
    ASSERT_EQ(released.heuristic, ArenaHeuristic::kReleaseOrder);

    ArenaOptions within = release;
    within.budget_bytes = {released.arena_bytes};
    EXPECT_EQ(PlanArenas(p.lifetimes, within).devices[0].conflicts, -1);

    ArenaOptions over = release;
    over.budget_bytes = {released.arena_bytes / 2};
    ArenaOptions never = over;
    never.max_large_conflicts = -1;
    EXPECT_EQ(PlanArenas(p.lifetimes, never).devices[0].conflicts, -1);

    const ArenaPlan large = PlanArenas(p.lifetimes, over);
    const DeviceArena& arena = large.devices[0];
    EXPECT_GT(arena.conflicts, 0) << nodes;
    EXPECT_LE(arena.arena_bytes, released.arena_bytes) << nodes;
    EXPECT_GE(arena.arena_bytes, arena.lower_bound_bytes) << nodes;
    // The graph only adds bounds to those found without it.
    EXPECT_GE(arena.lower_bound_bytes, released.lower_bound_bytes) << nodes;
    smaller += arena.arena_bytes < released.arena_bytes;
    // The same as asking for it without a budget.
    ArenaOptions asked = release;
    asked.place_large_graphs = true;
    const ArenaPlan again = PlanArenas(p.lifetimes, asked);
    EXPECT_EQ(again.devices[0].arena_bytes, arena.arena_bytes) << nodes;
    EXPECT_EQ(again.offsets, large.offsets) << nodes;
  }
  EXPECT_GT(smaller, 0);
}

// GrowClique returns a clique at least as heavy as its seed, on the
// conflict graphs of random plans.
TEST(ArenaPlannerPropertyTest, GrownCliquesAreCliques) {
  int grew = 0;
  for (uint32_t seed = 0; seed < 2000; ++seed) {
    testing::RandomPlanCase c = RandomCase(seed);
    const Graph g = RandomGraph(seed, c.graph);
    const Planned p = PlanAll(g, c.planner);
    const Lifetimes& lt = p.lifetimes;
    for (int d = 0; d < lt.num_devices(); ++d) {
      const ConflictGraph cg = BuildConflictGraph(lt, d);
      const int n = static_cast<int>(cg.copies.size());
      if (n == 0) continue;
      std::vector<int64_t> sizes(n);
      for (int k = 0; k < n; ++k) sizes[k] = p.arenas.sizes[cg.copies[k]];
      const int32_t start = static_cast<int32_t>(seed % n);
      const std::vector<int32_t> clique =
          GrowClique(cg.conflicts, sizes, {start}, 32);
      int64_t bytes = 0;
      for (size_t i = 0; i < clique.size(); ++i) {
        bytes += sizes[clique[i]];
        for (size_t j = i + 1; j < clique.size(); ++j) {
          ASSERT_NE(clique[i], clique[j]) << seed;
          ASSERT_TRUE(
              lt.MayBeLiveTogether(cg.copies[clique[i]], cg.copies[clique[j]]))
              << "seed " << seed << " device " << d;
        }
      }
      ASSERT_GE(bytes, sizes[start]) << seed;
      ASSERT_LE(bytes, p.arenas.devices[d].arena_bytes) << seed;
      grew += clique.size() > 1;
    }
  }
  EXPECT_GT(grew, 1000);
}

// The heaviest clique of the conflict graph, by enumeration.
int64_t BruteMaxClique(const Lifetimes& lt, const std::vector<int32_t>& copies,
                       const std::vector<int64_t>& sizes) {
  const int n = static_cast<int>(copies.size());
  int64_t best = 0;
  for (uint32_t set = 1; set < (uint32_t{1} << n); ++set) {
    int64_t bytes = 0;
    bool clique = true;
    for (int i = 0; i < n && clique; ++i) {
      if (!((set >> i) & 1)) continue;
      bytes += sizes[i];
      for (int j = i + 1; j < n && clique; ++j) {
        if ((set >> j) & 1) {
          clique = lt.MayBeLiveTogether(copies[i], copies[j]);
        }
      }
    }
    if (clique) best = std::max(best, bytes);
  }
  return best;
}

// AntichainBound never exceeds the heaviest clique, and on one stream
// (copies then used on one stream each) it is that clique.
TEST(ArenaPlannerPropertyTest, AntichainBoundIsTheHeaviestCliqueOrLess) {
  int exact = 0;
  for (uint32_t seed = 0; seed < 600; ++seed) {
    testing::RandomPlanCase c = RandomCase(seed);
    c.graph.num_buffers = 14;
    const bool single = seed % 2 == 0;
    if (single) {
      c.planner.num_devices = 1;
      c.planner.stream_mode = StreamMode::kSingle;
    }
    const Graph g = RandomGraph(seed, c.graph);
    const Planned p = PlanAll(g, c.planner);
    const Lifetimes& lt = p.lifetimes;
    for (int d = 0; d < lt.num_devices(); ++d) {
      std::vector<int32_t> copies;
      std::vector<int64_t> sizes;
      p.DeviceCopies(d, &copies, &sizes);
      if (copies.empty() || copies.size() > 16) continue;
      const int64_t bound = AntichainBound(lt, copies, sizes);
      const int64_t clique = BruteMaxClique(lt, copies, sizes);
      ASSERT_LE(bound, clique) << "seed " << seed << " device " << d;
      ASSERT_LE(p.arenas.devices[d].lower_bound_bytes, clique) << seed;
      if (single) {
        ASSERT_EQ(bound, clique) << "seed " << seed;
        ++exact;
      }
    }
  }
  EXPECT_GT(exact, 200);
}

// Calls `check(lifetimes, copies, sizes, clique, seed)` for each device of
// at most 16 copies of the random plans of seeds 0 to 599 (14 buffers
// each), `clique` the heaviest clique among its copies by enumeration.
template <typename Check>
void ForEachSmallDevice(Check check) {
  for (uint32_t seed = 0; seed < 600; ++seed) {
    testing::RandomPlanCase c = RandomCase(seed);
    c.graph.num_buffers = 14;
    const Graph g = RandomGraph(seed, c.graph);
    const Planned p = PlanAll(g, c.planner);
    const Lifetimes& lt = p.lifetimes;
    for (int d = 0; d < lt.num_devices(); ++d) {
      std::vector<int32_t> copies;
      std::vector<int64_t> sizes;
      p.DeviceCopies(d, &copies, &sizes);
      if (copies.empty() || copies.size() > 16) continue;
      check(lt, copies, sizes, BruteMaxClique(lt, copies, sizes), seed);
    }
  }
}

// LocalCliqueBound finds a clique: never above the heaviest clique (by
// enumeration), and with every copy a candidate at least the copies live
// at its position in issue order.
TEST(ArenaPlannerPropertyTest, LocalCliqueBoundIsAClique) {
  int raised = 0;
  ForEachSmallDevice(
      [&](const Lifetimes& lt, const std::vector<int32_t>& copies,
          const std::vector<int64_t>& sizes, int64_t clique, uint32_t seed) {
        for (int32_t at = 0; at < lt.num_positions(); at += 3) {
          int64_t live = 0;
          for (size_t k = 0; k < copies.size(); ++k) {
            const BufferCopy& copy = lt.copy(copies[k]);
            if (copy.first <= at && at <= copy.last) live += sizes[k];
          }
          for (const int candidates : {2, 64}) {
            const int64_t bound =
                LocalCliqueBound(lt, copies, sizes, at, candidates, 1 << 16);
            ASSERT_LE(bound, clique) << "seed " << seed << " at " << at;
            if (candidates >= static_cast<int>(copies.size())) {
              ASSERT_GE(bound, live) << "seed " << seed << " at " << at;
              raised += bound > live;
            }
          }
        }
      });
  EXPECT_GT(raised, 100);
}

// NeighborhoodCliqueBound finds a clique containing its seed: never above
// the heaviest clique (by enumeration), and with every neighbour kept,
// the heaviest over all seeds is that clique.
TEST(ArenaPlannerPropertyTest, NeighborhoodCliqueBoundIsTheHeaviestAroundIt) {
  int checked = 0;
  ForEachSmallDevice(
      [&](const Lifetimes& lt, const std::vector<int32_t>& copies,
          const std::vector<int64_t>& sizes, int64_t clique, uint32_t seed) {
        int64_t heaviest = 0;
        for (size_t k = 0; k < copies.size(); ++k) {
          for (const int neighbors : {1, 64}) {
            const int64_t bound = NeighborhoodCliqueBound(
                lt, copies, sizes, static_cast<int32_t>(k), neighbors, 1 << 20);
            ASSERT_LE(bound, clique) << "seed " << seed << " copy " << k;
            ASSERT_GE(bound, sizes[k]) << "seed " << seed << " copy " << k;
            if (neighbors == 64) heaviest = std::max(heaviest, bound);
          }
        }
        ASSERT_EQ(heaviest, clique) << "seed " << seed;
        ++checked;
      });
  EXPECT_GT(checked, 300);
}

// Without a conflict graph, the cliques around the copies ending highest
// raise the lower bound above what the cliques near the peaks and the
// top's first uses find, on a random DAG issued in the memory-aware order,
// whose conflicts reach far in issue order (26.2 MB against 33.8 MB).
TEST(ArenaPlannerTest, WithoutAConflictGraphNeighborhoodsRaiseTheBound) {
  const Graph g = RandomDag(1000, /*seed=*/2);
  PlannerOptions aware;
  aware.memory_order = MemoryOrderKind::kMemoryAware;
  ArenaOptions local;
  local.max_conflicts = 1;
  local.neighborhood_clique_neighbors = 0;
  const Planned p = PlanAll(g, aware, local);
  ArenaOptions neighborhoods = local;
  neighborhoods.neighborhood_clique_neighbors = 128;
  const ArenaPlan with_neighborhoods = PlanArenas(p.lifetimes, neighborhoods);
  const DeviceArena& before = p.arenas.devices[0];
  const DeviceArena& after = with_neighborhoods.devices[0];
  EXPECT_EQ(after.arena_bytes, before.arena_bytes);
  EXPECT_GE(after.lower_bound_bytes, before.lower_bound_bytes * 5 / 4);
  EXPECT_LE(after.lower_bound_bytes, after.arena_bytes);
}

// Without a conflict graph, cliques among the copies near the peaks and
// the top raise the lower bound above the peaks on random DAGs.
TEST(ArenaPlannerTest, WithoutAConflictGraphLocalCliquesRaiseTheBound) {
  const Graph g = RandomDag(300, /*seed=*/3);
  ArenaOptions peaks_only;
  peaks_only.max_conflicts = 1;
  peaks_only.local_clique_candidates = 0;
  peaks_only.neighborhood_clique_neighbors = 0;
  const Planned p = PlanAll(g, {}, peaks_only);
  ArenaOptions local = peaks_only;
  local.local_clique_candidates = 256;
  const ArenaPlan with_cliques = PlanArenas(p.lifetimes, local);
  const DeviceArena& before = p.arenas.devices[0];
  const DeviceArena& after = with_cliques.devices[0];
  EXPECT_EQ(after.arena_bytes, before.arena_bytes);
  EXPECT_GT(after.lower_bound_bytes, before.lower_bound_bytes);
  EXPECT_LE(after.lower_bound_bytes, after.arena_bytes);
}

}  // namespace
}  // namespace weft::scheduler::memory
