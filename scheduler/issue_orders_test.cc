#include "scheduler/issue_orders.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using testing::Buffer;
using ::testing::ElementsAre;
using testing::GraphMaker;
using testing::Kernel;

Dag DagOf(const Graph& g) {
  absl::StatusOr<Dag> dag = InferDependencies(g);
  EXPECT_TRUE(dag.ok()) << dag.status();
  return std::move(dag).value();
}

TEST(IssueOrdersTest, PriorityOrderTakesTheHighestReadyKey) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w").Node("b", "y:w").Node("c", "z:w").Node("d", "x:r");
  const Dag dag = DagOf(m.Build());
  // d (after a) has the highest key but waits for a.
  EXPECT_THAT(PriorityOrder({1, 3, 2, 9}, dag), ElementsAre(1, 2, 0, 3));
  // Ties in program order.
  EXPECT_THAT(PriorityOrder({1, 1, 1, 1}, dag), ElementsAre(0, 1, 2, 3));
}

TEST(IssueOrdersTest, EarliestStartQueuesShortUploadsFirst) {
  // `big` ranks higher, but its 1000 us upload would hold up `small`'s
  // 0.4 us one on the device's upload engine.
  std::vector<BufferSpec> buffers = {
      Buffer("x", 25, true), Buffer("y", 0.01, true), Buffer("a", 1, false),
      Buffer("b", 1, false)};
  std::vector<NodeSpec> nodes = {
      Kernel("big", 100, {{0, Access::kRead}, {2, Access::kWrite}}),
      Kernel("small", 10, {{1, Access::kRead}, {3, Access::kWrite}})};
  const Graph g("uploads", std::move(buffers), std::move(nodes));
  const Dag dag = DagOf(g);
  const CostLevels levels = ComputeCostLevels(g, dag);
  const Topology topology = Topology::Default(1);
  const std::vector<int> device = {0, 0};
  EXPECT_THAT(RankOrder(levels, dag), ElementsAre(0, 1));
  EXPECT_THAT(EarliestStartOrder(g, dag, device, levels, topology, 1),
              ElementsAre(1, 0));
}

TEST(IssueOrdersTest, EarliestStartRanksCountOutputsInDownloadOrder) {
  // Both start at once. `second` ranks higher by cost, but the output
  // `first` writes goes down first and the other's after it.
  std::vector<BufferSpec> buffers = {Buffer("o1", 25, false, true),
                                     Buffer("o2", 25, false, true)};
  std::vector<NodeSpec> nodes = {Kernel("first", 10, {{0, Access::kWrite}}),
                                 Kernel("second", 20, {{1, Access::kWrite}})};
  const Graph g("downloads", std::move(buffers), std::move(nodes));
  const Dag dag = DagOf(g);
  const CostLevels levels = ComputeCostLevels(g, dag);
  const std::vector<int> device = {0, 0};
  EXPECT_THAT(RankOrder(levels, dag), ElementsAre(1, 0));
  EXPECT_THAT(
      EarliestStartOrder(g, dag, device, levels, Topology::Default(1), 1),
      ElementsAre(0, 1));
}

TEST(IssueOrdersTest, EarliestStartFollowsDependencies) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("a", "x:w", {.cost = 50}).Node("b", "x:r y:w", {.cost = 1});
  m.Node("c", "y:r", {.cost = 1});
  const Graph g = m.Build();
  const Dag dag = DagOf(g);
  const std::vector<int> device = {0, 0, 0};
  EXPECT_THAT(EarliestStartOrder(g, dag, device, ComputeCostLevels(g, dag),
                                 Topology::Default(1), 1),
              ElementsAre(0, 1, 2));
}

TEST(IssueOrdersTest, IssueByStartKeepsOnlyTopologicalOrders) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("a", "x:w").Node("b", "y:w").Node("c", "x:r");
  Dag dag = DagOf(m.Build());
  ASSERT_THAT(dag.order, ElementsAre(0, 1, 2));
  // b starts first: reissued so.
  IssueByStart({5, 1, 7}, dag);
  EXPECT_THAT(dag.order, ElementsAre(1, 0, 2));
  // c before a would break a dependency: left as it is.
  IssueByStart({5, 1, 2}, dag);
  EXPECT_THAT(dag.order, ElementsAre(1, 0, 2));
}

TEST(IssueOrdersTest, HasOneOrderOnlyForAChain) {
  GraphMaker chain;
  chain.Buffer("x").Node("a", "x:w").Node("b", "x:rw").Node("c", "x:rw");
  EXPECT_TRUE(HasOneOrder(DagOf(chain.Build())));
  GraphMaker fork;
  fork.Buffer("x").Buffer("y");
  fork.Node("a", "x:w").Node("b", "x:r").Node("c", "x:r");
  EXPECT_FALSE(HasOneOrder(DagOf(fork.Build())));
}

}  // namespace
}  // namespace weft::scheduler
