// Schedule quality under the default options, on GrCUDA's benchmark shapes
// (benchmark_graphs.h): the cases where the default reaches the lower bound
// must keep reaching it, and must beat GrCUDA's own policies where those
// fall short. schedule_quality_bench prints the whole table.
#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/benchmark_graphs.h"
#include "scheduler/planner.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

Plan PlanDefault(const Graph& graph, int devices,
                 std::optional<DevicePolicyKind> policy = std::nullopt) {
  PlannerOptions options;
  options.num_devices = devices;
  options.explain = false;
  if (policy.has_value()) options.device_policy = *policy;
  absl::StatusOr<Plan> plan = PlanGraph(graph, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : Plan();
}

double Ratio(const Plan& plan) {
  return plan.estimated_makespan_us / plan.lower_bound_us;
}

std::set<int> DevicesUsed(const Plan& plan) {
  std::set<int> used;
  for (const PlannedNode& pn : plan.nodes) used.insert(pn.device);
  return used;
}

TEST(ScheduleQualityTest, IndependentKernelsSpreadOverEveryDevice) {
  // B5: ten independent kernels, each on its own uploaded input.
  for (int devices : {1, 2, 4, 8}) {
    const BenchmarkCase c = B5BlackScholes(2);
    const Plan plan = PlanDefault(c.graph, devices);
    EXPECT_EQ(static_cast<int>(DevicesUsed(plan).size()), devices);
    EXPECT_LE(Ratio(plan), 1.05) << c.name << " on " << devices;
  }
}

TEST(ScheduleQualityTest, MultiGpuShapesReachTheBound) {
  for (int scale : {1, 4}) {
    for (const BenchmarkCase& c :
         {B5mBlackScholes(scale), B9mCg(scale), B11mMul(scale)}) {
      for (int devices : {1, 2, 4, 8}) {
        const Plan plan = PlanDefault(c.graph, devices);
        EXPECT_LE(Ratio(plan), 1.05) << c.name << " on " << devices;
      }
    }
  }
}

TEST(ScheduleQualityTest, PartitionsThatDoNotDivideEvenlyReachTheBound) {
  // Sixteen partitions on 3 and 5 devices: some device takes one more
  // partition's upload (B1M, B11M) or kernel (B9M, each phase) than the
  // average, and the bound counts it, so these plans are within 5% of
  // optimal (against a bound that spread the work evenly instead, B11M on
  // 5 devices would read 1.25).
  for (const BenchmarkCase& c : {B1mVec(1), B9mCg(1), B11mMul(1)}) {
    for (int devices : {3, 5}) {
      const Plan plan = PlanDefault(c.graph, devices);
      EXPECT_LE(Ratio(plan), 1.05) << c.name << " on " << devices;
    }
  }
}

TEST(ScheduleQualityTest, SpeedupsReachGrcudasPublishedMeans) {
  // GrCUDA's mean speedups on 2, 4 and 8 V100s: 1.53x, 2.21x, 2.62x.
  const double grcuda[] = {1.53, 2.21, 2.62};
  for (const BenchmarkCase& c : {B5mBlackScholes(2), B11mMul(2), B9mCg(2)}) {
    const double one = PlanDefault(c.graph, 1).estimated_makespan_us;
    for (int k = 0; k < 3; ++k) {
      const int devices = 2 << k;
      const double many = PlanDefault(c.graph, devices).estimated_makespan_us;
      EXPECT_GE(one / many, grcuda[k]) << c.name << " on " << devices;
    }
  }
}

TEST(ScheduleQualityTest, BeatsRoundRobinWhereItFallsShort) {
  const BenchmarkCase c = B9mCg(1);
  for (int devices : {2, 4, 8}) {
    const double ours = PlanDefault(c.graph, devices).estimated_makespan_us;
    const double rr =
        PlanDefault(c.graph, devices, DevicePolicyKind::kRoundRobin)
            .estimated_makespan_us;
    EXPECT_LT(ours, rr) << c.name << " on " << devices;
  }
  const BenchmarkCase fj = ForkJoin(16, 4);
  const Plan plan = PlanDefault(fj.graph, 2);
  EXPECT_LE(Ratio(plan), 1.05);
  EXPECT_LT(plan.estimated_makespan_us,
            PlanDefault(fj.graph, 2, DevicePolicyKind::kRoundRobin)
                .estimated_makespan_us);
}

// HITS trades a large array between its two score chains every iteration
// and the image pipeline joins whole images from two devices: with copies
// that cross as soon as their data is written, both stay near the bound
// on several devices; made by the readers once all their inputs are ready,
// they do not (1.089 and 1.173).
TEST(ScheduleQualityTest, EagerCopiesKeepCrossingDataOffTheCriticalPath) {
  for (int devices : {2, 4}) {
    const Plan hits = PlanDefault(B7Hits(1).graph, devices);
    EXPECT_LE(Ratio(hits), 1.03) << "B7 on " << devices;
    const Plan image = PlanDefault(B8Image(1).graph, devices);
    EXPECT_LE(Ratio(image), 1.05) << "B8 on " << devices;
    EXPECT_FALSE(image.copies.empty()) << "B8 on " << devices;
  }
}

// The multi-GPU ML ensemble: two independent halves of 16 partitions end
// in tails of different lengths. Placed in the submitted order or by exact
// ranks, one half's kernels fill every device first and the other's tail
// runs nearly alone at the end (1.111x on 4 devices); an order by perturbed
// ranks interleaves them.
// At scale 2 the search needs more than 64 orders in a row without a
// better one: it keeps going while its plan is above 1.05x.
TEST(ScheduleQualityTest, PerturbedRanksInterleaveIndependentHalves) {
  for (int scale : {1, 2, 4}) {
    const Plan plan = PlanDefault(B6mMl(scale).graph, 4);
    EXPECT_LE(Ratio(plan), 1.05) << "B6M scale " << scale << " on 4";
  }
  // On 8 devices each half's host input reaches one device first and the
  // others a copy later; the bound counts that (lower_bound_terms.h).
  for (int scale : {1, 4}) {
    const Plan plan = PlanDefault(B6mMl(scale).graph, 8);
    EXPECT_LE(Ratio(plan), 1.05) << "B6M scale " << scale << " on 8";
  }
  // The search is part of the plan: the same graph gets the same plan.
  const Graph graph = B6mMl(1).graph;
  EXPECT_EQ(PlanDefault(graph, 8).estimated_makespan_us,
            PlanDefault(graph, 8).estimated_makespan_us);
}

// B8 on two devices: placed as the walk meets them, the small blur's
// chain stays on one device and `combine_2` then waits for two images
// crossing one device-to-device engine (1.077x). Moving nodes to the other
// device (ImproveByMoves) runs the small Sobel filter beside its reader,
// and moves the two resets of the output together: either alone would add
// a crossing of the output.
TEST(ScheduleQualityTest, MovingNodesSavesCopiesOnABusyEngine) {
  const Plan plan = PlanDefault(B8Image(1).graph, 2);
  EXPECT_LE(Ratio(plan), 1.05);
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    if (B8Image(1).graph.node(plan.nodes[i].node).name != "sobel_small") {
      continue;
    }
    for (size_t j = 0; j < plan.nodes.size(); ++j) {
      if (B8Image(1).graph.node(plan.nodes[j].node).name == "combine_2") {
        EXPECT_EQ(plan.nodes[i].device, plan.nodes[j].device);
      }
    }
  }
}

// Random layered DAGs of 50 and 200 nodes with long, uneven kernels: one
// order by perturbed ranks after another from the best so far reaches
// 1.05x where independent perturbations of the exact ranks stop at 1.06
// to 1.09x.
TEST(ScheduleQualityTest, SearchFromTheBestOrderPacksRandomDags) {
  for (const auto& [nodes, width, devices] :
       {std::tuple{50, 8, 4}, std::tuple{200, 16, 8}}) {
    for (uint32_t seed : {1u, 2u}) {
      const BenchmarkCase c = RandomLayered(nodes, width, seed);
      const Plan plan = PlanDefault(c.graph, devices);
      EXPECT_LE(Ratio(plan), 1.05) << c.name << " on " << devices;
    }
  }
}

// Small random DAGs that the search with eager copies leaves short of the
// bound: the search again with each crossing copy on its reader's stream
// finishes them earlier (with eager copies alone: 1.146, 1.054 and 1.058).
// The first also needs the policy to see when host data another node
// brought to a device is there (1.099 without).
TEST(ScheduleQualityTest, PlansShortOfTheBoundAlsoTryCopiesOnTheReaders) {
  for (const auto& [nodes, width, seed, devices, most] :
       {std::tuple{30, 8, 13u, 4, 1.05}, std::tuple{30, 8, 12u, 4, 1.05},
        std::tuple{100, 32, 13u, 4, 1.05}}) {
    const BenchmarkCase c = RandomLayered(nodes, width, seed);
    const Plan plan = PlanDefault(c.graph, devices);
    EXPECT_LE(Ratio(plan), most) << c.name << " on " << devices;
  }
}

// A random DAG on 4 devices where no node gains by moving alone or with
// a predecessor: swapping a node with the nearest node of another device
// balances them (1.132 without swaps).
TEST(ScheduleQualityTest, SwapsBalanceWhereNoSingleMoveDoes) {
  const BenchmarkCase c = RandomLayered(30, 8, 21);
  EXPECT_LE(Ratio(PlanDefault(c.graph, 4)), 1.09);
}

// A device whose clock runs in real time books each unit's work in issue
// order and cannot go back to a gap that has passed: a plan it can follow
// issues each device's kernels in the order they start. Searched, random
// 50 seed 2 on 4 devices had a kernel issued after one that waits 1.5 ms
// for its inputs, estimated to start in the gap before it (and ran 11%
// late, paced); reissued by simulated start, it keeps its makespan.
TEST(ScheduleQualityTest, SearchedPlansIssueEachDevicesKernelsAsTheyStart) {
  for (uint32_t seed : {1u, 2u}) {
    const BenchmarkCase c = RandomLayered(50, 8, seed);
    for (int devices : {2, 4, 8}) {
      const Plan plan = PlanDefault(c.graph, devices);
      // By device: the latest start of a kernel issued so far.
      std::vector<double> latest(devices, 0);
      for (size_t i = 0; i < plan.estimates.size(); ++i) {
        const int d = plan.nodes[i].device;
        EXPECT_GE(plan.estimates[i].start_us, latest[d])
            << c.name << " on " << devices << ", issue position " << i;
        latest[d] = std::max(latest[d], plan.estimates[i].start_us);
      }
    }
  }
}

TEST(ScheduleQualityTest, UploadThenComputeShapesReachTheBound) {
  // B1 and B10: host inputs come up, their users and the join follow; on
  // several devices the join waits for one copy between devices, which
  // the bound counts.
  for (const BenchmarkCase& c : {B1Vec(1), B10Dl(1), B1mVec(1)}) {
    for (int devices : {1, 2, 4, 8}) {
      const Plan plan = PlanDefault(c.graph, devices);
      EXPECT_LE(Ratio(plan), 1.02) << c.name << " on " << devices;
    }
  }
  // B7 on one device: the two matrices come up one after the other, then
  // the iterations, then two downloads. The bound counts that each score
  // vector comes up before its reader, not before the kernel that
  // rewrites it later (1.05-1.06 at one and two iterations without).
  for (int iterations : {1, 2, 5}) {
    EXPECT_LE(Ratio(PlanDefault(B7Hits(1, iterations).graph, 1)), 1.01)
        << iterations << " iterations";
  }
}

TEST(ScheduleQualityTest, ForkJoinsBalanceTheirBranches) {
  // Branches of uneven length: placed by rank, the long ones first.
  for (const auto& [width, length] : {std::pair{16, 4}, std::pair{16, 16}}) {
    const BenchmarkCase c = ForkJoin(width, length);
    for (int devices : {2, 4, 8}) {
      const Plan plan = PlanDefault(c.graph, devices);
      EXPECT_LE(Ratio(plan), 1.07) << c.name << " on " << devices;
    }
  }
}

TEST(ScheduleQualityTest, RankedIssueOrderIsTopological) {
  const BenchmarkCase c = ForkJoin(16, 4);
  const Plan plan = PlanDefault(c.graph, 8);
  std::vector<int> pos(c.graph.num_nodes(), -1);
  for (int i = 0; i < plan.num_nodes(); ++i) pos[plan.nodes[i].node] = i;
  bool node_order = true;
  for (int i = 0; i < plan.num_nodes(); ++i) {
    node_order = node_order && plan.nodes[i].node == i;
    for (NodeId d : plan.Deps(i)) EXPECT_LT(pos[d], i);
  }
  // Program order issues the branches one after another; the plan does
  // not.
  EXPECT_FALSE(node_order);
}

TEST(ScheduleQualityTest, AChainStaysOnOneDevice) {
  // The shape of examples/vector_pipeline.json: each node reads what the
  // previous one wrote.
  testing::GraphMaker m;
  m.Buffer("x", 4096).Buffer("y", 4096).Buffer("z", 4096).Buffer("t", 4);
  m.Node("fill_x", "x:w", {.cost = 5});
  m.Node("axpy", "x:r y:rw", {.cost = 10});
  m.Node("add", "x:r y:r z:w", {.cost = 10});
  m.Node("halve", "z:rw", {.cost = 5});
  m.Node("sum", "z:r t:w", {.cost = 20});
  const Plan plan = PlanDefault(m.Build(), 2);
  EXPECT_EQ(DevicesUsed(plan).size(), 1u);
  EXPECT_DOUBLE_EQ(plan.estimated_makespan_us, 50);
  EXPECT_DOUBLE_EQ(Ratio(plan), 1.0);
}

}  // namespace
}  // namespace weft::scheduler
