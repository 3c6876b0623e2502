#include "scheduler/memory/body_uses.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/graph_builder.h"
#include "testing/status_matchers.h"
#include "testing/wire_graphs.h"

namespace weft::scheduler::memory {
namespace {

using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// (buffer name, device) pairs ForEachBodyUse reports for node `v`.
std::vector<std::pair<std::string, int>> BodyUses(
    const Graph& graph, NodeId v,
    const std::vector<std::shared_ptr<const Plan>>& bodies) {
  std::vector<std::pair<std::string, int>> uses;
  ForEachBodyUse(graph, v, bodies, [&](BufferId b, int device) {
    uses.emplace_back(graph.buffer(b).name, device);
  });
  return uses;
}

// A plan of `devices.size()` nodes, node k on devices[k].
std::shared_ptr<const Plan> BodyPlan(const std::vector<int>& devices) {
  Plan plan;
  for (size_t k = 0; k < devices.size(); ++k) {
    PlannedNode pn;
    pn.node = static_cast<NodeId>(k);
    pn.device = devices[k];
    plan.nodes.push_back(pn);
  }
  return std::make_shared<const Plan>(std::move(plan));
}

class BodyUsesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // make (x) on 0; loop over go: step (y += x), stop (go = 0).
    GraphLimits limits;
    limits.num_devices = 2;
    absl::StatusOr<Graph> built =
        BuildGraph(::weft::testing::LoopWithABodyNodeElsewhere(), limits);
    ASSERT_OK(built.status());
    graph_ = std::make_unique<Graph>(*std::move(built));
    ASSERT_EQ(graph_->node(1).name, "loop");
  }
  std::unique_ptr<Graph> graph_;
};

TEST_F(BodyUsesTest, EachBodyNodeUsesItsBuffersOnItsDevice) {
  EXPECT_THAT(BodyUses(*graph_, 1, {BodyPlan({1, 0})}),
              UnorderedElementsAre(std::pair<std::string, int>("x", 1),
                                   std::pair<std::string, int>("y", 1),
                                   std::pair<std::string, int>("go", 0)));
}

TEST_F(BodyUsesTest, BodiesOnOneDeviceTakeTheControlNodesBuffersThere) {
  // Both body nodes on device 1: the device decides the loop, so all its
  // buffers (the condition included) go there.
  std::vector<std::pair<std::string, int>> uses =
      BodyUses(*graph_, 1, {BodyPlan({1, 1})});
  std::sort(uses.begin(), uses.end());
  uses.erase(std::unique(uses.begin(), uses.end()), uses.end());
  EXPECT_THAT(uses, UnorderedElementsAre(std::pair<std::string, int>("go", 1),
                                         std::pair<std::string, int>("x", 1),
                                         std::pair<std::string, int>("y", 1)));
}

TEST_F(BodyUsesTest, NothingForOtherNodesOrMissingPlans) {
  EXPECT_THAT(BodyUses(*graph_, 0, {BodyPlan({1, 0})}), IsEmpty());
  EXPECT_THAT(BodyUses(*graph_, 1, {nullptr}), IsEmpty());
  EXPECT_THAT(BodyUses(*graph_, 1, {}), IsEmpty());
}

}  // namespace
}  // namespace weft::scheduler::memory
