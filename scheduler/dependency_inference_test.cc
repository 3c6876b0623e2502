#include "scheduler/dependency_inference.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using ::testing::AllOf;
using testing::DepNames;
using ::testing::ElementsAre;
using testing::GraphMaker;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Names;
using ::testing::StartsWith;
using ::weft::testing::StatusIs;

Dag Infer(const Graph& g) {
  absl::StatusOr<Dag> dag = InferDependencies(g);
  EXPECT_TRUE(dag.ok()) << dag.status();
  return std::move(dag).value();
}

TEST(DependencyInferenceTest, ReadAfterWrite) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:r");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "a"), IsEmpty());
  EXPECT_THAT(DepNames(g, dag, "b"), ElementsAre("a"));
}

TEST(DependencyInferenceTest, WriteAfterRead) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:r").Node("b", "x:w");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "b"), ElementsAre("a"));
}

TEST(DependencyInferenceTest, WriteAfterWrite) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:w");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "b"), ElementsAre("a"));
}

TEST(DependencyInferenceTest, ReadersNeverDependOnEachOther) {
  GraphMaker m;
  m.Buffer("x").Node("w", "x:w").Node("r1", "x:r").Node("r2", "x:r");
  m.Node("r3", "x:r");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "r1"), ElementsAre("w"));
  EXPECT_THAT(DepNames(g, dag, "r2"), ElementsAre("w"));
  EXPECT_THAT(DepNames(g, dag, "r3"), ElementsAre("w"));
  EXPECT_THAT(Names(g, dag.Succs(g.FindNode("w"))),
              ElementsAre("r1", "r2", "r3"));
}

TEST(DependencyInferenceTest, WriterWaitsForEveryReaderSinceTheLastWrite) {
  GraphMaker m;
  m.Buffer("x").Node("w1", "x:w").Node("r1", "x:r").Node("r2", "x:r");
  m.Node("w2", "x:rw").Node("r3", "x:r");
  Graph g = m.Build();
  Dag dag = Infer(g);
  // w1 -> w2 is implied by w1 -> r1 -> w2: reduced away.
  EXPECT_THAT(DepNames(g, dag, "w2"), ElementsAre("r1", "r2"));
  EXPECT_THAT(DepNames(g, dag, "r3"), ElementsAre("w2"));
}

TEST(DependencyInferenceTest, ReadersBeforeAnEarlierWriteAreNotRepeated) {
  GraphMaker m;
  m.Buffer("x").Node("r0", "x:r").Node("w1", "x:w").Node("w2", "x:w");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "w1"), ElementsAre("r0"));
  EXPECT_THAT(DepNames(g, dag, "w2"), ElementsAre("w1"));
  // No raw edge r0 -> w2 either: r0 was covered by w1.
  EXPECT_THAT(Names(g, CollectDependencies(g).Row(g.FindNode("w2"))),
              ElementsAre("w1"));
}

TEST(DependencyInferenceTest, UnrelatedBuffersGiveNoEdges) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Node("a", "x:w").Node("b", "y:w");
  m.Node("c", "x:r").Node("d", "y:r");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "b"), IsEmpty());
  EXPECT_THAT(DepNames(g, dag, "c"), ElementsAre("a"));
  EXPECT_THAT(DepNames(g, dag, "d"), ElementsAre("b"));
}

TEST(DependencyInferenceTest, SameBufferTwiceInOneNode) {
  GraphMaker m;
  m.Buffer("x").Buffer("o").Node("a", "x:w").Node("b", "x:r x:r o:w");
  m.Node("c", "x:r o:rw");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "b"), ElementsAre("a"));
  // c reads x (after a) and updates o (after b); a -> c is implied.
  EXPECT_THAT(DepNames(g, dag, "c"), ElementsAre("b"));
}

TEST(DependencyInferenceTest, ExplicitAfterEdges) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Node("a", "x:w").Node("b", "y:w", {.after = {"a"}});
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "b"), ElementsAre("a"));
}

TEST(DependencyInferenceTest, AfterPointingToALaterNodeReorders) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Node("a", "x:w", {.after = {"b"}});
  m.Node("b", "y:w").Node("c", "x:r");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "a"), ElementsAre("b"));
  EXPECT_THAT(Names(g, dag.order), ElementsAre("b", "a", "c"));
  EXPECT_EQ(dag.pos(g.FindNode("b")), 0);
}

TEST(DependencyInferenceTest, TransitiveReductionRemovesImpliedEdge) {
  GraphMaker m;
  m.Buffer("x").Buffer("y");
  m.Node("a", "x:w").Node("b", "x:r y:w").Node("c", "x:r y:r");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(Names(g, CollectDependencies(g).Row(2)), ElementsAre("a", "b"));
  EXPECT_THAT(DepNames(g, dag, "c"), ElementsAre("b"));
}

TEST(DependencyInferenceTest, ReductionRemovesRedundantAfterEdge) {
  GraphMaker m;
  m.Buffer("x")
      .Node("a", "x:w")
      .Node("b", "x:rw")
      .Node("c", "x:r", {.after = {"a"}});
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "c"), ElementsAre("b"));
}

TEST(DependencyInferenceTest, CycleIsInvalidArgument) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w", {.after = {"b"}}).Node("b", "x:r");
  Graph g = m.Build();
  absl::StatusOr<Dag> dag = InferDependencies(g);
  ASSERT_FALSE(dag.ok());
  EXPECT_THAT(
      dag.status(),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          AllOf(StartsWith(
                    "graph.nodes[0].after[0]: 'b' closes a dependency cycle"),
                HasSubstr("'a' -> 'b' -> 'a'"))));
  EXPECT_THAT(CheckAcyclic(g), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Edges that span more than the 64-node window take the search path.
TEST(DependencyInferenceTest, LongRangeEdgeImpliedThroughAChain) {
  GraphMaker m;
  m.Buffer("w").Buffer("s");
  m.Node("fill", "w:w");
  const int n = 300;
  for (int i = 0; i < n; ++i) m.Node(absl::StrCat("k", i), "w:r s:rw");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "k0"), ElementsAre("fill"));
  for (int i = 1; i < n; ++i) {
    EXPECT_THAT(DepNames(g, dag, absl::StrCat("k", i)),
                ElementsAre(absl::StrCat("k", i - 1)));
  }
}

TEST(DependencyInferenceTest, LongRangeEdgeKeptWhenNotImplied) {
  GraphMaker m;
  m.Buffer("w").Buffer("s");
  m.Node("fill", "w:w");
  const int n = 200;
  for (int i = 0; i < n; ++i) m.Node(absl::StrCat("k", i), "s:rw");
  m.Node("last", "w:r s:r");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "last"), ElementsAre("fill", "k199"));
}

// Brute-force transitive reduction of the pairwise conflict relation: i < j
// in node order conflict when they share a buffer and one of them writes
// it; plus `after`. Its closure equals the GrCUDA rule's.
std::vector<std::vector<NodeId>> ExpectedDeps(const Graph& g) {
  const int n = g.num_nodes();
  std::vector<std::vector<bool>> edge(n, std::vector<bool>(n, false));
  for (NodeId j = 0; j < n; ++j) {
    for (NodeId i = 0; i < j; ++i) {
      for (const BufferUse& a : g.BufferUses(i)) {
        for (const BufferUse& b : g.BufferUses(j)) {
          if (a.buffer == b.buffer && (Writes(a.access) || Writes(b.access))) {
            edge[i][j] = true;
          }
        }
      }
    }
    for (NodeId a : g.node(j).after) edge[a][j] = true;
  }
  // Closure (Floyd-Warshall style; graphs are small).
  std::vector<std::vector<bool>> reach = edge;
  for (int k = 0; k < n; ++k) {
    for (int i = 0; i < n; ++i) {
      if (!reach[i][k]) continue;
      for (int j = 0; j < n; ++j) {
        if (reach[k][j]) reach[i][j] = true;
      }
    }
  }
  std::vector<std::vector<NodeId>> deps(n);
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < n; ++i) {
      if (!reach[i][j]) continue;
      bool implied = false;
      for (int k = 0; k < n && !implied; ++k) {
        implied = k != i && k != j && reach[i][k] && reach[k][j];
      }
      if (!implied) deps[j].push_back(i);
    }
  }
  return deps;
}

// `after_prob`: chance of an `after` edge to an earlier node;
// `forward_prob`: to a later one (the graph may then have a cycle).
Graph RandomGraph(std::mt19937& rng, int n, int num_buffers, double after_prob,
                  double forward_prob = 0) {
  GraphMaker m;
  for (int b = 0; b < num_buffers; ++b) m.Buffer(absl::StrCat("b", b));
  std::uniform_int_distribution<int> buf(0, num_buffers - 1);
  std::uniform_int_distribution<int> nargs(0, 3);
  std::uniform_int_distribution<int> access(0, 5);
  std::uniform_real_distribution<double> coin(0, 1);
  for (int i = 0; i < n; ++i) {
    std::string uses;
    const int k = nargs(rng);
    for (int a = 0; a < k; ++a) {
      const int acc = access(rng);
      absl::StrAppend(&uses, "b", buf(rng),
                      acc < 4 ? ":r " : (acc == 4 ? ":w " : ":rw "));
    }
    testing::NodeOptions options;
    options.cost = std::uniform_int_distribution<int>(0, 50)(rng) * 0.5;
    if (i > 0 && coin(rng) < after_prob) {
      options.after.push_back(
          absl::StrCat("n", std::uniform_int_distribution<int>(0, i - 1)(rng)));
    }
    if (i + 1 < n && coin(rng) < forward_prob) {
      options.after.push_back(absl::StrCat(
          "n", std::uniform_int_distribution<int>(i + 1, n - 1)(rng)));
    }
    m.Node(absl::StrCat("n", i), uses, options);
  }
  return m.Build();
}

TEST(DependencyInferenceTest, MatchesBruteForceOnRandomGraphs) {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 300; ++trial) {
    // Some graphs are long and sparse so that edges leave the window.
    const bool long_graph = trial % 10 == 0;
    const int n = long_graph ? 200 : 1 + trial % 40;
    const int buffers = long_graph ? 30 : 1 + trial % 7;
    Graph g = RandomGraph(rng, n, buffers, 0.1);
    Dag dag = Infer(g);
    std::vector<std::vector<NodeId>> expected = ExpectedDeps(g);
    for (NodeId v = 0; v < n; ++v) {
      auto got = dag.Preds(v);
      ASSERT_EQ(std::vector<NodeId>(got.begin(), got.end()), expected[v])
          << "trial " << trial << " node " << v;
    }
    // The order is topological and succs mirrors preds.
    for (NodeId v = 0; v < n; ++v) {
      for (NodeId p : dag.Preds(v)) {
        EXPECT_LT(dag.pos(p), dag.pos(v));
        auto succs = dag.Succs(p);
        EXPECT_NE(std::find(succs.begin(), succs.end(), v), succs.end());
      }
    }
  }
}

// `after` edges to later nodes: the node order is not topological, so
// the order comes first and labels and reduction follow it.
TEST(DependencyInferenceTest, MatchesBruteForceWithForwardAfterEdges) {
  std::mt19937 rng(77);
  int checked = 0;
  for (int trial = 0; trial < 300 && checked < 100; ++trial) {
    const int n = trial % 5 == 0 ? 150 : 5 + trial % 30;
    Graph g = RandomGraph(rng, n, 2 * n, 0.05, 0.05);
    if (!CheckAcyclic(g).ok()) continue;
    ++checked;
    Dag dag = Infer(g);
    std::vector<std::vector<NodeId>> expected = ExpectedDeps(g);
    for (NodeId v = 0; v < n; ++v) {
      auto got = dag.Preds(v);
      ASSERT_EQ(std::vector<NodeId>(got.begin(), got.end()), expected[v])
          << "trial " << trial << " node " << v;
      for (NodeId p : got) EXPECT_LT(dag.pos(p), dag.pos(v));
    }
  }
  EXPECT_GE(checked, 50);
}

// A writer after hundreds of readers: too many predecessors for the quick
// path, so the row is decided with interval labels.
TEST(DependencyInferenceTest, ManyFarPredecessorsReducedExactly) {
  GraphMaker m;
  m.Buffer("w").Buffer("s");
  m.Node("fill", "w:w");
  const int n = 300;
  for (int i = 0; i < n; ++i) m.Node(absl::StrCat("k", i), "w:r s:rw");
  m.Node("last", "w:w");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "last"), ElementsAre("k299"));
  EXPECT_EQ(CollectDependencies(g).Row(g.FindNode("last")).size(), n + 1);
  EXPECT_FALSE(dag.reach.intervals().empty());
}

// The edge src -> v is implied only through a chain longer than a short
// search goes: decided with interval labels.
TEST(DependencyInferenceTest, LongSearchLeftToIntervalLabels) {
  GraphMaker m;
  m.Buffer("x").Buffer("s");
  m.Node("src", "x:w");
  m.Node("c0", "x:r s:w");
  const int n = 600;
  for (int i = 1; i < n; ++i) m.Node(absl::StrCat("c", i), "s:rw");
  m.Node("v", "x:r s:r");
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_THAT(DepNames(g, dag, "v"), ElementsAre(absl::StrCat("c", n - 1)));
  EXPECT_FALSE(dag.reach.intervals().empty());
}

// Layered graphs (each node reads a few outputs of the two layers before
// it) need no interval labels, though many edges leave the window.
TEST(DependencyInferenceTest, LayeredGraphNeedsNoIntervalLabels) {
  std::mt19937 rng(3);
  GraphMaker m;
  const int n = 400;
  const int width = 64;
  for (int i = 0; i < n; ++i) m.Buffer(absl::StrCat("b", i));
  for (int i = 0; i < n; ++i) {
    std::string uses;
    const int layer = i / width;
    if (layer > 0) {
      std::uniform_int_distribution<int> pick(std::max(0, layer - 2) * width,
                                              layer * width - 1);
      for (int k = 0; k < 3; ++k) absl::StrAppend(&uses, "b", pick(rng), ":r ");
    }
    absl::StrAppend(&uses, "b", i, ":w");
    m.Node(absl::StrCat("n", i), uses);
  }
  Graph g = m.Build();
  Dag dag = Infer(g);
  EXPECT_TRUE(dag.reach.intervals().empty());
  int64_t far = 0;
  const Csr raw = CollectDependencies(g);
  for (NodeId v = 0; v < n; ++v) {
    for (NodeId p : raw.Row(v)) far += v - p > 64;
  }
  EXPECT_GT(far, n / 2);
  // Still exact: every kept edge is one no other path implies.
  std::vector<std::vector<NodeId>> expected = ExpectedDeps(g);
  for (NodeId v = 0; v < n; ++v) {
    auto got = dag.Preds(v);
    ASSERT_EQ(std::vector<NodeId>(got.begin(), got.end()), expected[v]) << v;
  }
}

void ExpectSameLevels(const CostLevels& got, const CostLevels& want) {
  EXPECT_EQ(got.top_us, want.top_us);
  EXPECT_EQ(got.bottom_us, want.bottom_us);
  EXPECT_EQ(got.bottom_hops, want.bottom_hops);
  EXPECT_EQ(got.critical_path_us, want.critical_path_us);
  EXPECT_EQ(got.total_work_us, want.total_work_us);
  EXPECT_EQ(got.device_work_us, want.device_work_us);
}

// Brute force: longest paths over the reduced edges, by NodeId.
TEST(DependencyInferenceTest, LevelsFromInferenceMatchBruteForce) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 1 + trial * 3;
    Graph g =
        RandomGraph(rng, n, 1 + trial % 9, 0.1, trial % 2 == 0 ? 0.0 : 0.03);
    if (!CheckAcyclic(g).ok()) continue;
    CostLevels levels;
    absl::StatusOr<Dag> dag = InferDependencies(g, &levels);
    ASSERT_TRUE(dag.ok()) << dag.status();
    ExpectSameLevels(levels, ComputeCostLevels(g, *dag));
    std::vector<double> top(n, 0), bottom(n, 0);
    std::vector<int32_t> hops(n, 0);
    for (NodeId v : dag->order) {
      for (NodeId p : dag->Preds(v)) {
        top[v] = std::max(top[v], top[p] + g.cost_us(p));
      }
    }
    for (auto it = dag->order.rbegin(); it != dag->order.rend(); ++it) {
      for (NodeId s : dag->Succs(*it)) {
        bottom[*it] = std::max(bottom[*it], bottom[s]);
        hops[*it] = std::max(hops[*it], hops[s] + 1);
      }
      bottom[*it] += g.cost_us(*it);
    }
    EXPECT_EQ(levels.top_us, top) << "trial " << trial;
    EXPECT_EQ(levels.bottom_us, bottom) << "trial " << trial;
    EXPECT_EQ(levels.bottom_hops, hops) << "trial " << trial;
  }
}

}  // namespace
}  // namespace weft::scheduler
