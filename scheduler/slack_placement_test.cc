#include "scheduler/slack_placement.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/memory/test_plans.h"
#include "scheduler/planner.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using memory::Lifetimes;
using ::testing::ElementsAre;
using ::weft::scheduler::testing::GraphMaker;

// A chain a -> b -> c -> d of 1 KiB buffers on one device, its memory
// planned.
struct Chain {
  Graph graph;
  Plan plan;
  Lifetimes lt;
};
Chain MakeChain() {
  GraphMaker m;
  m.Buffer("x", 1024).Buffer("y", 1024).Buffer("z", 1024).Buffer("w", 1024);
  m.Node("a", "x:w")
      .Node("b", "x:r y:w")
      .Node("c", "y:r z:w")
      .Node("d", "z:r w:w");
  Chain chain{m.Build(), {}, {}};
  PlannerOptions options;
  options.num_devices = 1;
  options.plan_memory = true;
  absl::StatusOr<Plan> plan = PlanGraph(chain.graph, options);
  EXPECT_OK(plan);
  chain.plan = *std::move(plan);
  absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(chain.graph, chain.plan);
  EXPECT_OK(lt);
  chain.lt = *std::move(lt);
  return chain;
}

// The offsets of the copies of x, y, z and w.
std::vector<int64_t> Offsets(const Chain& chain, const Plan& placed) {
  std::vector<int64_t> out;
  for (const char* name : {"x", "y", "z", "w"}) {
    const int c = chain.lt.Find(chain.graph.FindBuffer(name), 0);
    out.push_back(c >= 0 ? placed.buffers[c].offset : -1);
  }
  return out;
}

TEST(SlackPlacementTest, MemoryNeverUsedComesFirst) {
  const Chain chain = MakeChain();
  const std::optional<Plan> placed =
      SlackPlacement(chain.plan, chain.lt, {4096});
  ASSERT_TRUE(placed.has_value());
  EXPECT_THAT(Offsets(chain, *placed), ElementsAre(0, 1024, 2048, 3072));
  EXPECT_EQ(placed->memory[0].arena_bytes, 4096);
}

TEST(SlackPlacementTest, MemoryFreedLongestAgoComesNext) {
  const Chain chain = MakeChain();
  // z gets the fresh third kilobyte; w the first, freed by x after b,
  // before y's second is freed after c.
  std::optional<Plan> placed = SlackPlacement(chain.plan, chain.lt, {3072});
  ASSERT_TRUE(placed.has_value());
  EXPECT_THAT(Offsets(chain, *placed), ElementsAre(0, 1024, 2048, 0));
  // Two kilobytes: every copy on what its predecessor but one freed.
  placed = SlackPlacement(chain.plan, chain.lt, {2048});
  ASSERT_TRUE(placed.has_value());
  EXPECT_THAT(Offsets(chain, *placed), ElementsAre(0, 1024, 0, 1024));
  EXPECT_EQ(placed->memory[0].arena_bytes, 2048);
}

TEST(SlackPlacementTest, NoRoomWithinTheBudget) {
  const Chain chain = MakeChain();
  EXPECT_FALSE(SlackPlacement(chain.plan, chain.lt, {1536}).has_value());
}

TEST(SlackPlacementTest, DevicesWithoutABudgetKeepTheirPlaces) {
  const Chain chain = MakeChain();
  const std::optional<Plan> placed = SlackPlacement(chain.plan, chain.lt, {0});
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(Offsets(chain, *placed), Offsets(chain, chain.plan));
}

// N outputs, each written by a node of its own and live to the end: the
// k-th copy's search looks at every piece before it, N^2 / 2 in all. The
// placement gives up past 256 looks per copy plus about a million, so it
// places 1,000 outputs and not 6,000.
TEST(SlackPlacementTest, GivesUpPastItsSearchBudget) {
  for (const int n : {1000, 6000}) {
    SCOPED_TRACE(n);
    GraphMaker m;
    for (int i = 0; i < n; ++i) {
      m.Buffer(absl::StrCat("b", i), 256);
      m.Node(absl::StrCat("n", i), absl::StrCat("b", i, ":w"));
    }
    std::vector<std::string> outputs;
    for (int i = 0; i < n; ++i) outputs.push_back(absl::StrCat("b", i));
    const Graph graph = memory::testing::WithBuffers(m.Build(), outputs);
    PlannerOptions options;
    options.num_devices = 1;
    options.plan_memory = true;
    options.explain = false;
    absl::StatusOr<Plan> plan = PlanGraph(graph, options);
    ASSERT_OK(plan);
    absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(graph, *plan);
    ASSERT_OK(lt);
    const std::optional<Plan> placed =
        SlackPlacement(*plan, *lt, {int64_t{2} * 256 * n});
    EXPECT_EQ(placed.has_value(), n == 1000);
  }
}

// Random plans under budgets from their arena to twice it: every copy lies
// within its device's budget, and copies whose ranges overlap are used one
// wholly before the other in issue order.
TEST(SlackPlacementPropertyTest, OverlappingCopiesAreOrderedInIssueOrder) {
  int placed_plans = 0;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE(seed);
    const memory::testing::RandomPlanCase c = memory::testing::RandomCase(seed);
    const Graph graph = memory::testing::RandomGraph(seed, c.graph);
    PlannerOptions options = c.planner;
    options.plan_memory = true;
    absl::StatusOr<Plan> plan = PlanGraph(graph, options);
    ASSERT_OK(plan);
    absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(graph, *plan);
    ASSERT_OK(lt);
    std::vector<int64_t> budgets(options.num_devices, 0);
    for (const DeviceMemory& m : plan->memory) {
      if (m.device >= 0 && m.device < options.num_devices) {
        budgets[m.device] = m.arena_bytes * (1 + seed % 4) / 2;
      }
    }
    const std::optional<Plan> placed = SlackPlacement(*plan, *lt, budgets);
    if (!placed.has_value()) continue;
    ++placed_plans;
    ASSERT_EQ(placed->buffers.size(), static_cast<size_t>(lt->num_copies()));
    for (int a = 0; a < lt->num_copies(); ++a) {
      const PlannedBuffer& pa = placed->buffers[a];
      if (pa.size_bytes == 0 || budgets[pa.device] <= 0) continue;
      EXPECT_LE(pa.offset + pa.size_bytes, budgets[pa.device]);
      for (int b = a + 1; b < lt->num_copies(); ++b) {
        const PlannedBuffer& pb = placed->buffers[b];
        if (pb.device != pa.device || pb.size_bytes == 0 ||
            pa.offset >= pb.offset + pb.size_bytes ||
            pb.offset >= pa.offset + pa.size_bytes) {
          continue;
        }
        EXPECT_TRUE(lt->copy(a).last < lt->copy(b).first ||
                    lt->copy(b).last < lt->copy(a).first)
            << graph.buffer(pa.buffer).name << " and "
            << graph.buffer(pb.buffer).name << " on device " << pa.device;
      }
    }
  }
  EXPECT_GE(placed_plans, 150);
}

}  // namespace
}  // namespace weft::scheduler
