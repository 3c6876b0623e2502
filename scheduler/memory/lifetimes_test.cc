#include "scheduler/memory/lifetimes.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "scheduler/graph_builder.h"
#include "scheduler/memory/test_plans.h"
#include "scheduler/planner.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"

namespace weft::scheduler::memory {
namespace {

using ::weft::scheduler::memory::testing::BruteBefore;
using ::weft::scheduler::memory::testing::BruteForceBefore;
using ::weft::scheduler::memory::testing::RandomCase;
using ::weft::scheduler::memory::testing::RandomGraph;
using ::weft::scheduler::memory::testing::RandomGraphOptions;
using ::weft::scheduler::memory::testing::WithBuffers;
using ::weft::scheduler::testing::GraphMaker;
using ::weft::scheduler::testing::NodeOptions;

Plan MustPlan(const Graph& graph, PlannerOptions options = {}) {
  options.explain = false;
  absl::StatusOr<Plan> plan = PlanGraph(graph, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : Plan();
}

Lifetimes MustCompute(const Graph& graph, const Plan& plan) {
  absl::StatusOr<Lifetimes> lt = Lifetimes::Compute(graph, plan);
  EXPECT_TRUE(lt.ok()) << lt.status();
  return lt.ok() ? *std::move(lt) : Lifetimes();
}

TEST(LifetimesTest, ChainOnOneStream) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w").Node("b", "x:r y:w").Node("c", "y:r z:w");
  const Graph g = WithBuffers(m.Build(), {"z"});
  const Plan plan = MustPlan(g);
  const Lifetimes lt = MustCompute(g, plan);
  ASSERT_EQ(lt.num_copies(), 3);
  const int x = lt.Find(0, 0), y = lt.Find(1, 0), z = lt.Find(2, 0);
  EXPECT_EQ(lt.copy(x).first, 0);
  EXPECT_EQ(lt.copy(x).last, 1);
  EXPECT_EQ(lt.copy(y).first, 1);
  EXPECT_EQ(lt.copy(y).last, 2);
  EXPECT_TRUE(lt.copy(z).live_to_end);
  EXPECT_EQ(lt.copy(z).last, 3);
  EXPECT_TRUE(lt.Before(x, z));
  EXPECT_FALSE(lt.Before(z, x));
  EXPECT_FALSE(lt.MayBeLiveTogether(x, z));
  EXPECT_TRUE(lt.MayBeLiveTogether(x, y));
  EXPECT_TRUE(lt.MayBeLiveTogether(y, z));
}

TEST(LifetimesTest, ParallelBranchesOnTwoStreamsAreLiveTogether) {
  GraphMaker m;
  m.Buffer("x").Buffer("u").Buffer("y").Buffer("v").Buffer("out");
  m.Node("a", "x:w").Node("a2", "x:r u:w");
  m.Node("b", "y:w").Node("b2", "y:r v:w");
  m.Node("j", "u:r v:r out:w");
  const Graph g = WithBuffers(m.Build(), {"out"});
  const Plan plan = MustPlan(g);
  ASSERT_NE(plan.nodes[0].stream, plan.nodes[2].stream);
  const Lifetimes lt = MustCompute(g, plan);
  const int x = lt.Find(0, 0), y = lt.Find(2, 0);
  // x's uses are all issued before y's, but the streams run side by side.
  EXPECT_LT(lt.copy(x).last, lt.copy(y).first);
  EXPECT_TRUE(lt.MayBeLiveTogether(x, y));
  // v is written on the other stream too.
  EXPECT_TRUE(lt.MayBeLiveTogether(x, lt.Find(3, 0)));
}

TEST(LifetimesTest, SingleStreamSeparatesTheBranches) {
  GraphMaker m;
  m.Buffer("x").Buffer("u").Buffer("y").Buffer("v").Buffer("out");
  m.Node("a", "x:w").Node("a2", "x:r u:w");
  m.Node("b", "y:w").Node("b2", "y:r v:w");
  m.Node("j", "u:r v:r out:w");
  const Graph g = WithBuffers(m.Build(), {"out"});
  PlannerOptions options;
  options.stream_mode = StreamMode::kSingle;
  const Plan plan = MustPlan(g, options);
  const Lifetimes lt = MustCompute(g, plan);
  EXPECT_TRUE(lt.Before(lt.Find(0, 0), lt.Find(2, 0)));
  EXPECT_FALSE(lt.MayBeLiveTogether(lt.Find(0, 0), lt.Find(2, 0)));
}

TEST(LifetimesTest, HostDataIsUploadedBeforeEveryNode) {
  GraphMaker m;
  m.Buffer("t").Buffer("w").Buffer("x");
  m.Node("a", "t:w").Node("b", "t:r w:r x:w");
  const Graph g = WithBuffers(m.Build(), {"x"}, {"w"});
  const Plan plan = MustPlan(g);
  const Lifetimes lt = MustCompute(g, plan);
  const int w = lt.Find(1, 0);
  EXPECT_EQ(w, 0);  // uploads first
  EXPECT_TRUE(lt.copy(w).uploaded);
  EXPECT_EQ(lt.copy(w).first, -1);
  EXPECT_THAT(lt.Uses(w), ::testing::ElementsAre(-1, 1));
  // t is used before w's user, but w arrives before anything runs.
  EXPECT_TRUE(lt.MayBeLiveTogether(w, lt.Find(0, 0)));
}

TEST(LifetimesTest, SourceOfACopyBetweenDevicesIsUsedByTheReader) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w", NodeOptions{.device = 0});
  m.Node("b", "x:r y:w", NodeOptions{.device = 1});
  m.Node("c", "y:r z:w", NodeOptions{.device = 1});
  const Graph g = WithBuffers(m.Build(), {"z"});
  PlannerOptions options;
  options.num_devices = 2;
  options.eager_copies = false;
  const Plan plan = MustPlan(g, options);
  const Lifetimes lt = MustCompute(g, plan);
  const int x0 = lt.Find(0, 0), x1 = lt.Find(0, 1);
  ASSERT_GE(x0, 0);
  ASSERT_GE(x1, 0);
  EXPECT_THAT(lt.Uses(x0), ::testing::ElementsAre(0, 1));
  EXPECT_THAT(lt.Uses(x1), ::testing::ElementsAre(1));
  EXPECT_EQ(lt.Find(1, 0), -1);
  EXPECT_TRUE(lt.copy(lt.Find(2, 1)).live_to_end);
}

TEST(LifetimesTest, AnEagerCopyIsUsedFromItsWriter) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w", NodeOptions{.device = 0});
  m.Node("b", "x:r y:w", NodeOptions{.device = 1});
  m.Node("c", "y:r z:w", NodeOptions{.device = 1});
  const Graph g = WithBuffers(m.Build(), {"z"});
  PlannerOptions options;
  options.num_devices = 2;
  const Plan plan = MustPlan(g, options);
  ASSERT_EQ(plan.copies.size(), 1u);
  ASSERT_EQ(plan.copies[0].after, 0);
  const Lifetimes lt = MustCompute(g, plan);
  const int x0 = lt.Find(0, 0), x1 = lt.Find(0, 1);
  ASSERT_GE(x0, 0);
  ASSERT_GE(x1, 0);
  // The copy reads x on device 0 from the end of `a` up to `b`, and x
  // lives on device 1 from then on.
  EXPECT_THAT(lt.Uses(x0), ::testing::ElementsAre(0, 1));
  EXPECT_THAT(lt.Uses(x1), ::testing::ElementsAre(0, 1));
  EXPECT_EQ(lt.copy(x1).first, 0);
}

// A loop over `b` (and its condition `go`) between two device nodes: its
// bodies run on its device, so the copies it uses are device copies, and
// they live to the end (the bodies run unordered against what follows).
TEST(LifetimesTest, AControlNodesCopiesAreOnItsDeviceToTheEnd) {
  weft::v1::Graph proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        buffers { name: "a" size_bytes: 64 dtype: FLOAT32 fill: 1 }
        buffers { name: "b" size_bytes: 64 dtype: FLOAT32 }
        buffers { name: "go" size_bytes: 4 dtype: INT32 fill: 1 }
        buffers { name: "c" size_bytes: 64 dtype: FLOAT32 output: true }
        nodes {
          name: "a_into_b"
          op: "copy"
          args { buffer { name: "a" access: READ } }
          args { buffer { name: "b" access: WRITE } }
        }
        nodes {
          name: "loop"
          while_loop {
            condition: "go"
            max_iterations: 4
            body {
              name: "double_b"
              op: "scale"
              args { f32: 2 }
              args { buffer { name: "b" access: READ_WRITE } }
            }
            body {
              name: "test"
              op: "less"
              args { buffer { name: "b" access: READ } }
              args { f32: 8 }
              args { buffer { name: "go" access: WRITE } }
            }
          }
        }
        nodes {
          name: "b_into_c"
          op: "copy"
          args { buffer { name: "b" access: READ } }
          args { buffer { name: "c" access: WRITE } }
        }
      )pb",
      &proto));
  absl::StatusOr<Graph> built = BuildGraph(proto, GraphLimits{});
  ASSERT_TRUE(built.ok()) << built.status();
  const Graph& g = *built;
  PlannerOptions options;
  options.max_streams_per_device = 1;
  const Plan plan = MustPlan(g, options);
  const Lifetimes lt = MustCompute(g, plan);
  const int n = static_cast<int>(plan.nodes.size());
  const int b = lt.Find(g.FindBuffer("b"), 0);
  const int go = lt.Find(g.FindBuffer("go"), 0);
  const int a = lt.Find(g.FindBuffer("a"), 0);
  ASSERT_GE(b, 0);
  ASSERT_GE(go, 0) << "the condition has no device copy";
  ASSERT_GE(a, 0);
  EXPECT_TRUE(lt.copy(b).live_to_end);
  EXPECT_EQ(lt.copy(b).last, n);
  EXPECT_TRUE(lt.copy(go).live_to_end);
  EXPECT_EQ(lt.copy(go).last, n);
  // Nothing the loop uses may share addresses with a copy used after it
  // starts, even on its one stream.
  const int c = lt.Find(g.FindBuffer("c"), 0);
  ASSERT_GE(c, 0);
  EXPECT_TRUE(lt.MayBeLiveTogether(b, c));
  EXPECT_TRUE(lt.MayBeLiveTogether(go, c));
  EXPECT_FALSE(lt.copy(a).live_to_end);
}

TEST(LifetimesPropertyTest, BeforeIsExactWithoutUploads) {
  for (uint32_t seed = 0; seed < 1500; ++seed) {
    testing::RandomPlanCase c = RandomCase(seed);
    c.graph.initial_data = 0;
    const Graph g = RandomGraph(seed, c.graph);
    const Plan plan = MustPlan(g, c.planner);
    const Lifetimes lt = MustCompute(g, plan);
    const auto bf = BruteForceBefore(plan);
    for (int a = 0; a < lt.num_copies(); ++a) {
      for (int b = 0; b < lt.num_copies(); ++b) {
        if (lt.copy(a).device != lt.copy(b).device) continue;
        ASSERT_EQ(lt.Before(a, b), BruteBefore(lt, bf, a, b))
            << "seed " << seed << " copies " << a << " " << b;
      }
    }
  }
}

TEST(LifetimesPropertyTest, BeforeIsSoundWithUploads) {
  int befores = 0;
  for (uint32_t seed = 0; seed < 1500; ++seed) {
    testing::RandomPlanCase c = RandomCase(seed);
    c.graph.initial_data = 0.4;
    const Graph g = RandomGraph(seed, c.graph);
    const Plan plan = MustPlan(g, c.planner);
    const Lifetimes lt = MustCompute(g, plan);
    const auto bf = BruteForceBefore(plan);
    for (int a = 0; a < lt.num_copies(); ++a) {
      for (int b = 0; b < lt.num_copies(); ++b) {
        if (lt.copy(a).device != lt.copy(b).device) continue;
        if (!lt.Before(a, b)) continue;
        ++befores;
        ASSERT_TRUE(BruteBefore(lt, bf, a, b))
            << "seed " << seed << " copies " << a << " " << b;
      }
    }
  }
  EXPECT_GT(befores, 1000);
}

}  // namespace
}  // namespace weft::scheduler::memory
