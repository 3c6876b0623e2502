#include "scheduler/benchmark_graphs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/planner.h"
#include "scheduler/topology.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// Names of the direct predecessors (transitively reduced) of node `name`.
std::vector<std::string> Preds(const Graph& graph, const std::string& name) {
  absl::StatusOr<Dag> dag = InferDependencies(graph);
  EXPECT_TRUE(dag.ok()) << dag.status();
  const NodeId v = graph.FindNode(name);
  EXPECT_GE(v, 0) << name;
  std::vector<std::string> names;
  if (!dag.ok() || v < 0) return names;
  for (NodeId p : dag->Preds(v)) names.push_back(graph.node(p).name);
  return names;
}

double CostOf(const Graph& graph, const std::string& name) {
  const NodeId v = graph.FindNode(name);
  EXPECT_GE(v, 0) << name;
  return v < 0 ? 0 : graph.cost_us(v);
}

uint64_t TotalBytes(const Graph& graph) {
  uint64_t total = 0;
  for (const BufferSpec& b : graph.buffers()) total += b.size_bytes;
  return total;
}

TEST(BenchmarkGraphsTest, AllCasesAreFewSmallAndUniquelyNamed) {
  const std::vector<BenchmarkCase> cases = AllScheduleCases();
  EXPECT_GE(cases.size(), 40u);
  EXPECT_LT(cases.size(), 100u);
  absl::flat_hash_set<std::string> names;
  int multi_gpu = 0;
  for (const BenchmarkCase& c : cases) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
    EXPECT_GT(c.graph.num_nodes(), 0) << c.name;
    EXPECT_LE(c.graph.num_nodes(), 5000) << c.name;
    multi_gpu += c.suite == Suite::kGrcudaMultiGpu;
  }
  EXPECT_EQ(multi_gpu, 5 * (kMaxScale - kMinScale + 1));
}

// The wide family is new ground: none of its graphs is one of
// AllScheduleCases', and its names are unique.
TEST(BenchmarkGraphsTest, WideCasesAreOthersAndUniquelyNamed) {
  absl::flat_hash_set<std::string> names;
  for (const BenchmarkCase& c : AllScheduleCases()) names.insert(c.name);
  const std::vector<BenchmarkCase> wide = WideScheduleCases();
  EXPECT_GE(wide.size(), 90u);
  int random = 0;
  for (const BenchmarkCase& c : wide) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
    EXPECT_GT(c.graph.num_nodes(), 0) << c.name;
    EXPECT_LE(c.graph.num_nodes(), 5000) << c.name;
    random += absl::StartsWith(c.name, "random ");
  }
  EXPECT_GE(random, 60);
}

// Other seeds give other random DAGs under their own names; the rest of
// the family stays as it is.
TEST(BenchmarkGraphsTest, WideCasesFromOtherSeeds) {
  const std::vector<BenchmarkCase> own = WideScheduleCases();
  const uint32_t seeds[] = {21, 22};
  const std::vector<BenchmarkCase> other = WideScheduleCases(seeds);
  absl::flat_hash_set<std::string> names;
  for (const BenchmarkCase& c : own) names.insert(c.name);
  int random = 0, shared = 0;
  for (const BenchmarkCase& c : other) {
    if (absl::StartsWith(c.name, "random ")) {
      ++random;
      EXPECT_TRUE(absl::StrContains(c.name, " seed 21") ||
                  absl::StrContains(c.name, " seed 22"))
          << c.name;
      EXPECT_FALSE(names.contains(c.name)) << c.name;
    } else {
      shared += names.contains(c.name);
    }
  }
  EXPECT_EQ(random * 3, 2 * static_cast<int>(std::count_if(
                                own.begin(), own.end(), [](const auto& c) {
                                  return absl::StartsWith(c.name, "random ");
                                })));
  EXPECT_EQ(shared, static_cast<int>(other.size()) - random);
}

TEST(BenchmarkGraphsTest, NodeCountsFollowGrcuda) {
  EXPECT_EQ(B1Vec(1).graph.num_nodes(), 3);
  EXPECT_EQ(B5BlackScholes(1).graph.num_nodes(), 10);
  EXPECT_EQ(B6Ml(1).graph.num_nodes(), 10);
  EXPECT_EQ(B7Hits(1).graph.num_nodes(), 5 * 6);
  EXPECT_EQ(B7Hits(1, 2).graph.num_nodes(), 2 * 6);
  EXPECT_EQ(B8Image(1).graph.num_nodes(), 13);
  EXPECT_EQ(B10Dl(1).graph.num_nodes(), 8);
  EXPECT_EQ(B1mVec(1).graph.num_nodes(), 48);
  // multi_gpu/bench_5.py's 24 kernels.
  EXPECT_EQ(B5mBlackScholes(1).graph.num_nodes(), 24);
  EXPECT_EQ(B6mMl(1).graph.num_nodes(), 4 * 16 + 1 + 16 + 6);
  EXPECT_EQ(B9mCg(1).graph.num_nodes(), 34 + 3 * 21);
  EXPECT_EQ(B11mMul(1).graph.num_nodes(), 32);
  EXPECT_EQ(ForkJoin(16, 4).graph.num_nodes(), 16 * 4 + 2);
  EXPECT_EQ(RandomLayered(200, 16, 1).graph.num_nodes(), 200);
}

// What GraphBuilder would check, for graphs built directly.
TEST(BenchmarkGraphsTest, GraphsAreWellFormed) {
  for (const BenchmarkCase& c : AllScheduleCases()) {
    SCOPED_TRACE(c.name);
    const Graph& g = c.graph;
    absl::flat_hash_set<std::string> buffer_names, node_names;
    bool has_output = false;
    for (const BufferSpec& b : g.buffers()) {
      EXPECT_TRUE(buffer_names.insert(b.name).second) << b.name;
      EXPECT_FALSE(b.name.empty());
      EXPECT_GT(b.size_bytes, 0u) << b.name;
      if (b.init == BufferSpec::Init::kData) {
        EXPECT_FALSE(b.data.empty()) << b.name;
        EXPECT_LE(b.data.size(), b.size_bytes) << b.name;
      }
      has_output |= b.output;
    }
    EXPECT_TRUE(has_output);
    for (NodeId v = 0; v < g.num_nodes(); ++v) {
      const NodeSpec& node = g.node(v);
      EXPECT_TRUE(node_names.insert(node.name).second) << node.name;
      EXPECT_EQ(node.op, "spin");
      EXPECT_TRUE(std::isfinite(node.cost_us) && node.cost_us > 0) << node.name;
      EXPECT_FALSE(g.Uses(v).empty()) << node.name;
      for (const BufferUse& use : g.Uses(v)) {
        EXPECT_GE(use.buffer, 0) << node.name;
        EXPECT_LT(use.buffer, g.num_buffers()) << node.name;
      }
    }
    EXPECT_TRUE(InferDependencies(g).ok());
  }
}

TEST(BenchmarkGraphsTest, PlansEveryCaseOnTwoDevices) {
  for (const BenchmarkCase& c : AllScheduleCases()) {
    SCOPED_TRACE(c.name);
    PlannerOptions options;
    options.num_devices = 2;
    absl::StatusOr<Plan> plan = PlanGraph(c.graph, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->num_nodes(), c.graph.num_nodes());
    EXPECT_GT(plan->lower_bound_us, 0);
    // The bound holds for every schedule (lower_bound.h).
    EXPECT_GE(plan->estimated_makespan_us, plan->lower_bound_us * (1 - 1e-9));
  }
}

TEST(BenchmarkGraphsTest, ScaleGrowsTheArrays) {
  using Builder = BenchmarkCase (*)(int);
  for (Builder build : {B1Vec, B5BlackScholes, B6Ml, B8Image, B10Dl, B1mVec,
                        B5mBlackScholes, B6mMl, B11mMul}) {
    const BenchmarkCase small = build(kMinScale);
    const BenchmarkCase large = build(kMaxScale);
    // B6M's sizes span the least: 1.0M to 1.8M rows.
    EXPECT_GT(TotalBytes(large.graph), 1.5 * TotalBytes(small.graph))
        << small.name;
    EXPECT_EQ(small.graph.num_nodes(), large.graph.num_nodes());
  }
}

// GrCUDA's notes: the upload takes about 4x-5x longer than the square.
TEST(BenchmarkGraphsTest, VecUploadTakesFourAndAHalfSquares) {
  const Graph g = B1Vec(2).graph;
  const BufferId x = g.FindBuffer("x");
  ASSERT_GE(x, 0);
  const double upload_us =
      Topology::Default(1).TransferUs(g.buffer_bytes(x), Topology::kHost, 0);
  const double square_us = CostOf(g, "square_x") - kLaunchUs;
  EXPECT_NEAR(upload_us / square_us, 4.5, 0.01);
}

// GrCUDA's notes: "RR takes ~2x the time of NB".
TEST(BenchmarkGraphsTest, MlRidgeRegressionTakesTwiceNaiveBayes) {
  const Graph g = B6Ml(3).graph;
  double rr = 0, nb = 0;
  for (const char* name : {"rr_1", "rr_2", "rr_3", "softmax_2"}) {
    rr += CostOf(g, name) - kLaunchUs;
  }
  for (const char* name : {"nb_1", "nb_2", "nb_3", "nb_4", "softmax_1"}) {
    nb += CostOf(g, name) - kLaunchUs;
  }
  EXPECT_NEAR(rr / nb, 2.0, 1e-9);
}

TEST(BenchmarkGraphsTest, VecIsAJoinOfTwoSquares) {
  const Graph g = B1Vec(1).graph;
  EXPECT_THAT(Preds(g, "square_x"), IsEmpty());
  EXPECT_THAT(Preds(g, "square_y"), IsEmpty());
  EXPECT_THAT(Preds(g, "reduce"), UnorderedElementsAre("square_x", "square_y"));
  const Graph m = B1mVec(1).graph;
  EXPECT_THAT(Preds(m, "reduce_7"),
              UnorderedElementsAre("square_x_7", "square_y_7"));
}

TEST(BenchmarkGraphsTest, MlChainsJoinAtArgmax) {
  const Graph g = B6Ml(1).graph;
  EXPECT_THAT(Preds(g, "nb_1"), IsEmpty());  // X is const in both chains
  EXPECT_THAT(Preds(g, "rr_2"), ElementsAre("rr_1"));
  EXPECT_THAT(Preds(g, "rr_3"), ElementsAre("rr_2"));
  EXPECT_THAT(Preds(g, "softmax_2"), ElementsAre("rr_3"));
  EXPECT_THAT(Preds(g, "nb_2"), ElementsAre("nb_1"));
  EXPECT_THAT(Preds(g, "nb_3"), ElementsAre("nb_2"));
  EXPECT_THAT(Preds(g, "nb_4"), ElementsAre("nb_3"));
  EXPECT_THAT(Preds(g, "softmax_1"), ElementsAre("nb_4"));
  EXPECT_THAT(Preds(g, "argmax"),
              UnorderedElementsAre("softmax_1", "softmax_2"));
}

// The edges GrCUDA's notes derive for one HITS iteration.
TEST(BenchmarkGraphsTest, HitsHasCrossEdges) {
  const Graph g = B7Hits(1, 2).graph;
  EXPECT_THAT(Preds(g, "spmv_a_0"), IsEmpty());
  EXPECT_THAT(Preds(g, "spmv_h_0"), IsEmpty());
  EXPECT_THAT(Preds(g, "divide_a_0"),
              UnorderedElementsAre("sum_a_0", "spmv_h_0"));
  EXPECT_THAT(Preds(g, "divide_h_0"),
              UnorderedElementsAre("sum_h_0", "spmv_a_0"));
  // The next iteration waits for the scores of this one.
  EXPECT_THAT(Preds(g, "spmv_a_1"),
              UnorderedElementsAre("divide_a_0", "divide_h_0"));
}

// The edges GrCUDA's notes derive for the image pipeline.
TEST(BenchmarkGraphsTest, ImagePipelineEdges) {
  const Graph g = B8Image(1).graph;
  EXPECT_THAT(Preds(g, "reset_2d"), ElementsAre("reset_1d"));
  EXPECT_THAT(Preds(g, "sobel_small"), ElementsAre("blur_small"));
  EXPECT_THAT(Preds(g, "sobel_large"), ElementsAre("blur_large"));
  EXPECT_THAT(Preds(g, "maximum"), ElementsAre("sobel_large"));
  EXPECT_THAT(Preds(g, "minimum"), ElementsAre("sobel_large"));
  EXPECT_THAT(Preds(g, "extend"), UnorderedElementsAre("maximum", "minimum"));
  EXPECT_THAT(
      Preds(g, "unsharpen"),
      UnorderedElementsAre("blur_small", "blur_large", "blur_unsharpen"));
  EXPECT_THAT(Preds(g, "combine"), UnorderedElementsAre("extend", "unsharpen"));
  EXPECT_THAT(Preds(g, "combine_2"),
              UnorderedElementsAre("combine", "sobel_small", "reset_2d"));
}

TEST(BenchmarkGraphsTest, MulCopiesFormAChain) {
  const Graph g = B11mMul(1).graph;
  EXPECT_THAT(Preds(g, "mul_3"), IsEmpty());
  EXPECT_THAT(Preds(g, "copy_0"), ElementsAre("mul_0"));
  EXPECT_THAT(Preds(g, "copy_5"), UnorderedElementsAre("mul_5", "copy_4"));
}

TEST(BenchmarkGraphsTest, CgIterationsAreChained) {
  const Graph g = B9mCg(1).graph;
  // p = r after r = b - A x, itself after preconditioning A.
  EXPECT_THAT(Preds(g, "mul_0_0"), ElementsAre("copy"));
  EXPECT_THAT(Preds(g, "dot_1"), ::testing::Contains("mul_15_1"));
  EXPECT_THAT(Preds(g, "mul_4_2"), ::testing::Contains("saxpy_p_1"));
}

TEST(BenchmarkGraphsTest, ForkJoinShape) {
  const Graph g = ForkJoin(3, 2).graph;
  EXPECT_THAT(Preds(g, "n1_0"), ElementsAre("root"));
  EXPECT_THAT(Preds(g, "n1_1"), ElementsAre("n1_0"));
  EXPECT_THAT(Preds(g, "join"), UnorderedElementsAre("n0_1", "n1_1", "n2_1"));
}

TEST(BenchmarkGraphsTest, RandomLayeredIsSeededAndInRange) {
  const Graph a = RandomLayered(50, 8, 7).graph;
  const Graph b = RandomLayered(50, 8, 7).graph;
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  for (NodeId v = 0; v < a.num_nodes(); ++v) {
    EXPECT_EQ(a.cost_us(v), b.cost_us(v));
    EXPECT_GE(a.cost_us(v), 10);
    EXPECT_LE(a.cost_us(v), 2000);
  }
  for (const BufferSpec& buffer : a.buffers()) {
    EXPECT_GE(buffer.size_bytes, 4096u - 1);
    EXPECT_LE(buffer.size_bytes, uint64_t{64} << 20);
  }
}

}  // namespace
}  // namespace weft::scheduler
