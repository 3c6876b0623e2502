// The same graph and options give the same plan on every run: devices,
// streams, events, times, and the memory plan with any spills, whatever
// the addresses the planner's containers land at (hash maps walk in an
// order that follows their addresses; nothing a plan says may follow it).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/memory/dnn_graphs.h"
#include "scheduler/memory/test_plans.h"
#include "scheduler/plan_digest.h"
#include "scheduler/planner.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

struct Digests {
  uint64_t plan = 0;
  uint64_t memory = 0;
  bool operator==(const Digests& o) const {
    return plan == o.plan && memory == o.memory;
  }
};

// Plans `graph` `runs` times, moving the heap between runs; EXPECTs every
// run to give the first run's plan. Returns the first plan.
Plan ExpectSamePlans(const Graph& graph, const PlannerOptions& options,
                     int runs) {
  std::vector<std::unique_ptr<char[]>> ballast;
  Plan first;
  Digests expected;
  for (int run = 0; run < runs; ++run) {
    ballast.push_back(std::make_unique<char[]>(4096 * (run + 1) + 48 * run));
    absl::StatusOr<Plan> plan = PlanGraph(graph, options);
    EXPECT_OK(plan);
    if (!plan.ok()) return first;
    const Digests got{PlanDigest(*plan), MemoryDigest(*plan)};
    if (run == 0) {
      expected = got;
      first = *std::move(plan);
    } else {
      EXPECT_TRUE(got == expected) << "run " << run;
    }
  }
  return first;
}

PlannerOptions Options(int devices, DevicePolicyKind policy,
                       MemoryOrderKind order) {
  PlannerOptions options;
  options.num_devices = devices;
  options.device_policy = policy;
  options.memory_order = order;
  options.plan_memory = true;
  options.simulate = true;
  return options;
}

TEST(PlanDeterminismTest, DnnGraphsUnderEveryMemoryOrderAndBudget) {
  std::vector<std::pair<std::string, Graph>> graphs;
  graphs.emplace_back("nas", memory::NasLike(160));
  graphs.emplace_back("transformer", memory::TransformerStack(150));
  graphs.emplace_back("random", memory::RandomDag(160));
  int fitted = 0;
  for (const auto& [name, graph] : graphs) {
    for (const int devices : {1, 2}) {
      for (const MemoryOrderKind order :
           {MemoryOrderKind::kAuto, MemoryOrderKind::kSubmitted,
            MemoryOrderKind::kMemoryAware}) {
        SCOPED_TRACE(absl::StrCat(name, " on ", devices, ", order ",
                                  static_cast<int>(order)));
        PlannerOptions options =
            Options(devices, PlannerOptions().device_policy, order);
        const Plan free_plan = ExpectSamePlans(graph, options, 3);
        // Under half its arena: fitting, with spills where it must.
        options.memory_budget_bytes.assign(devices,
                                           free_plan.LargestArenaBytes() / 2);
        const Plan budgeted = ExpectSamePlans(graph, options, 3);
        fitted += budgeted.graph != nullptr;
      }
    }
  }
  EXPECT_GT(fitted, 6);
}

TEST(PlanDeterminismTest, RandomPlansUnderEveryPolicy) {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    const memory::testing::RandomPlanCase c = memory::testing::RandomCase(seed);
    const Graph graph = memory::testing::RandomGraph(seed, c.graph);
    PlannerOptions options = c.planner;
    options.plan_memory = true;
    options.simulate = true;
    options.device_policy = static_cast<DevicePolicyKind>(seed % 7);
    options.memory_order = static_cast<MemoryOrderKind>(seed % 3);
    ExpectSamePlans(graph, options, 3);
  }
}

}  // namespace
}  // namespace weft::scheduler
