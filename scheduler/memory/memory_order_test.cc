#include "scheduler/memory/memory_order.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/memory/dnn_graphs.h"
#include "scheduler/memory/test_plans.h"
#include "scheduler/test_util.h"

namespace weft::scheduler::memory {
namespace {

using ::testing::ElementsAre;
using ::weft::scheduler::memory::testing::RandomGraph;
using ::weft::scheduler::memory::testing::RandomGraphOptions;
using ::weft::scheduler::memory::testing::WithBuffers;
using ::weft::scheduler::testing::GraphMaker;

Dag MustInfer(const Graph& graph) {
  absl::StatusOr<Dag> dag = InferDependencies(graph);
  EXPECT_TRUE(dag.ok()) << dag.status();
  return dag.ok() ? *std::move(dag) : Dag();
}

bool IsTopological(const Dag& dag, absl::Span<const NodeId> order) {
  std::vector<int> pos(dag.num_nodes(), -1);
  for (size_t k = 0; k < order.size(); ++k) {
    if (order[k] < 0 || order[k] >= dag.num_nodes() || pos[order[k]] >= 0) {
      return false;
    }
    pos[order[k]] = static_cast<int>(k);
  }
  for (NodeId v = 0; v < dag.num_nodes(); ++v) {
    if (pos[v] < 0) return false;
    for (NodeId p : dag.Preds(v)) {
      if (pos[p] > pos[v]) return false;
    }
  }
  return true;
}

TEST(MemoryOrderTest, PeakOfAChain) {
  GraphMaker m;
  m.Buffer("x", 100, DType::kBytes)
      .Buffer("y", 200, DType::kBytes)
      .Buffer("z", 50, DType::kBytes);
  m.Node("a", "x:w").Node("b", "x:r y:w").Node("c", "y:r z:w");
  const Graph g = WithBuffers(m.Build(), {"z"});
  EXPECT_EQ(PeakLiveBytes(g, {0, 1, 2}), 300);
}

TEST(MemoryOrderTest, PrefetchedInputsLiveFromTheStart) {
  GraphMaker m;
  m.Buffer("t", 100, DType::kBytes).Buffer("w", 1000, DType::kBytes);
  m.Node("a", "t:w").Node("b", "t:r").Node("c", "w:r");
  const Graph g = WithBuffers(m.Build(), {}, {"w"});
  EXPECT_EQ(PeakLiveBytes(g, {0, 1, 2}), 1100);
  MemoryOrderOptions options;
  options.prefetched_inputs = false;
  EXPECT_EQ(PeakLiveBytes(g, {0, 1, 2}, options), 1000);
}

// Two branches that each make a big buffer and reduce it: the submitted
// order makes both big buffers first.
Graph TwoReductions() {
  GraphMaker m;
  m.Buffer("A", 1000, DType::kBytes)
      .Buffer("B", 1000, DType::kBytes)
      .Buffer("a", 10, DType::kBytes)
      .Buffer("b", 10, DType::kBytes)
      .Buffer("out", 10, DType::kBytes);
  m.Node("makeA", "A:w").Node("makeB", "B:w");
  m.Node("reduceA", "A:r a:w").Node("reduceB", "B:r b:w");
  m.Node("join", "a:r b:r out:w");
  return WithBuffers(m.Build(), {"out"});
}

TEST(MemoryOrderTest, GreedyRunsEachReductionBeforeTheNextBigBuffer) {
  const Graph g = TwoReductions();
  const Dag dag = MustInfer(g);
  EXPECT_EQ(PeakLiveBytes(g, dag.order), 2010);
  MemoryOrderOptions options;
  options.window = 0;
  const MemoryOrder order = MemoryAwareOrder(g, dag, options);
  EXPECT_THAT(order.order, ElementsAre(0, 2, 1, 3, 4));
  EXPECT_EQ(order.peak_bytes, 1020);
  EXPECT_EQ(PeakLiveBytes(g, order.order), 1020);
}

TEST(MemoryOrderTest, IssueInMemoryOrderRelabelsTheDag) {
  const Graph g = TwoReductions();
  Dag dag = MustInfer(g);
  IssueInMemoryOrder(g, &dag);
  EXPECT_THAT(dag.order, ElementsAre(0, 2, 1, 3, 4));
  for (int i = 0; i < dag.num_nodes(); ++i) EXPECT_EQ(dag.pos(dag.order[i]), i);
}

TEST(MemoryOrderTest, OptimalOrderOfTwoReductions) {
  const Graph g = TwoReductions();
  const Dag dag = MustInfer(g);
  const std::optional<MemoryOrder> best = OptimalOrder(g, dag);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->peak_bytes, 1020);
  EXPECT_TRUE(IsTopological(dag, best->order));
}

// Least peak over every topological order, by enumeration.
int64_t BruteForcePeak(const Graph& g, const Dag& dag) {
  std::vector<NodeId> order(g.num_nodes());
  for (NodeId v = 0; v < g.num_nodes(); ++v) order[v] = v;
  int64_t best = -1;
  do {
    if (!IsTopological(dag, order)) continue;
    const int64_t peak = PeakLiveBytes(g, order);
    if (best < 0 || peak < best) best = peak;
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

// The window programme keeps one state per set of nodes run. Which of two
// states of one peak it keeps must not follow the order its hash maps are
// walked in, which depends on where they were allocated: the same graph
// gets the same order however the heap lies.
TEST(MemoryOrderTest, SameOrderWhereverTheHeapLies) {
  const Graph graph = NasLike(200);
  const Dag dag = MustInfer(graph);
  const std::vector<NodeId> first = MemoryAwareOrder(graph, dag).order;
  std::vector<std::unique_ptr<char[]>> ballast;
  for (int k = 1; k <= 16; ++k) {
    ballast.push_back(std::make_unique<char[]>(k * 5000));
    EXPECT_EQ(MemoryAwareOrder(graph, dag).order, first) << "run " << k;
  }
}

TEST(MemoryOrderPropertyTest, OptimalMatchesEnumerationOnTinyGraphs) {
  int improved = 0;
  for (uint32_t seed = 0; seed < 300; ++seed) {
    RandomGraphOptions shape;
    shape.num_nodes = 3 + seed % 5;
    shape.num_buffers = 3 + seed % 6;
    shape.max_uses = 3;
    const Graph g = RandomGraph(seed, shape);
    const Dag dag = MustInfer(g);
    const int64_t expected = BruteForcePeak(g, dag);
    const std::optional<MemoryOrder> best = OptimalOrder(g, dag);
    ASSERT_TRUE(best.has_value());
    ASSERT_EQ(best->peak_bytes, expected) << "seed " << seed;
    ASSERT_TRUE(IsTopological(dag, best->order));
    ASSERT_EQ(PeakLiveBytes(g, best->order), expected);
    // Windows as wide as the graph find the optimum too.
    const MemoryOrder windowed = MemoryAwareOrder(g, dag);
    ASSERT_EQ(windowed.peak_bytes, expected) << "seed " << seed;
    improved += expected < PeakLiveBytes(g, dag.order);
  }
  EXPECT_GT(improved, 10);
}

TEST(MemoryOrderPropertyTest, OrdersAreTopologicalAndNoWorseThanGreedy) {
  MemoryOrderOptions windows;
  windows.window = 10;
  windows.max_states = 128;
  windows.max_windows = 8;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    RandomGraphOptions shape;
    shape.num_nodes = 20 + seed % 200;
    shape.num_buffers = 10 + seed % 150;
    const Graph g = RandomGraph(seed, shape);
    const Dag dag = MustInfer(g);
    MemoryOrderOptions greedy_only;
    greedy_only.window = 0;
    const MemoryOrder greedy = MemoryAwareOrder(g, dag, greedy_only);
    const MemoryOrder order = MemoryAwareOrder(g, dag, windows);
    ASSERT_TRUE(IsTopological(dag, greedy.order)) << seed;
    ASSERT_TRUE(IsTopological(dag, order.order)) << seed;
    ASSERT_EQ(greedy.peak_bytes, PeakLiveBytes(g, greedy.order)) << seed;
    ASSERT_EQ(order.peak_bytes, PeakLiveBytes(g, order.order)) << seed;
    ASSERT_LE(order.peak_bytes, greedy.peak_bytes) << seed;
    ASSERT_LE(order.peak_bytes, PeakLiveBytes(g, dag.order)) << seed;
  }
}

}  // namespace
}  // namespace weft::scheduler::memory
