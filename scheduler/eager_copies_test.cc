#include "scheduler/eager_copies.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "scheduler/cost_model.h"
#include "scheduler/graph_builder.h"
#include "scheduler/plan_verifier.h"
#include "scheduler/planner.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"
#include "weft/v1/weft.pb.h"

namespace weft::scheduler {
namespace {

using testing::GraphMaker;
using testing::NodeOptions;
using ::weft::testing::StatusIs;

// 300 MB: 1,000 us over the default 300 GB/s link between devices.
constexpr uint64_t kBig = 300'000'000;

// `w` writes x on device 0; `k` runs 2,000 us on device 1; `r` reads x
// after `k` on device 1. An eager copy moves x while `k` runs.
Graph CopyBehindALongKernel(bool host_reader = false) {
  GraphMaker m;
  m.Buffer("x", kBig).Buffer("y").Buffer("z");
  m.Node("w", "x:w", {.cost = 100, .device = 0});
  m.Node("k", "y:w", {.cost = 2000, .device = 1});
  NodeOptions reader{.cost = 100, .device = 1};
  if (host_reader) reader.engine = Engine::kHost;
  m.Node("r", "x:r y:r z:w", reader);
  return m.Build();
}

PlannerOptions TwoDevices(bool eager) {
  PlannerOptions options;
  options.num_devices = 2;
  options.eager_copies = eager;
  return options;
}

int PositionOf(const Graph& graph, const Plan& plan, const std::string& name) {
  for (int i = 0; i < plan.num_nodes(); ++i) {
    if (graph.node(plan.nodes[i].node).name == name) return i;
  }
  return -1;
}

TEST(EagerCopiesTest, CopiesWhileTheReaderWaitsForItsOtherInputs) {
  const Graph graph = CopyBehindALongKernel();
  absl::StatusOr<Plan> eager = PlanGraph(graph, TwoDevices(true));
  ASSERT_TRUE(eager.ok()) << eager.status();
  ASSERT_TRUE(VerifyPlan(graph, *eager).ok()) << VerifyPlan(graph, *eager);
  ASSERT_EQ(eager->copies.size(), 1u);
  const PlannedCopy& copy = eager->copies[0];
  EXPECT_EQ(copy.after, PositionOf(graph, *eager, "w"));
  EXPECT_EQ(copy.before, PositionOf(graph, *eager, "r"));
  EXPECT_EQ(graph.buffer(copy.buffer).name, "x");
  EXPECT_EQ(copy.device, 1);
  EXPECT_EQ(eager->streams[copy.stream].device, 1);
  EXPECT_EQ(eager->streams[copy.stream].engine, Engine::kCopy);
  EXPECT_EQ(eager->nodes[copy.after].signal_event, copy.event);
  // k ends at 2,000 us and x is on device 1 by 1,100 us: r ends at 2,100.
  EXPECT_NEAR(eager->estimated_makespan_us, 2100, 1e-6);
  const int r = PositionOf(graph, *eager, "r");
  EXPECT_NEAR(eager->Estimate(r).start_us, 2000, 1e-6);

  // Copied on r's stream once k ends: 1,000 us later.
  absl::StatusOr<Plan> lazy = PlanGraph(graph, TwoDevices(false));
  ASSERT_TRUE(lazy.ok()) << lazy.status();
  EXPECT_TRUE(lazy->copies.empty());
  EXPECT_NEAR(lazy->estimated_makespan_us, 3100, 1e-6);
}

// w writes x on device 0; k writes z (larger) on device 1; a loop over x
// and z goes to device 1, where most of its data is, and writes s; r reads
// s on device 0 after it. x crosses to the loop while k runs, and s to r
// as the loop ends.
TEST(EagerCopiesTest, ControlNodesReadAndWriteOnTheirDevice) {
  weft::v1::Graph proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        buffers { name: "x" size_bytes: 300000000 dtype: FLOAT32 }
        buffers { name: "z" size_bytes: 600000000 dtype: FLOAT32 }
        buffers { name: "go" size_bytes: 4 dtype: INT32 }
        buffers { name: "s" size_bytes: 4 dtype: FLOAT32 }
        buffers { name: "out" size_bytes: 4 dtype: FLOAT32 }
        nodes {
          name: "w"
          op: "fill"
          device: 0
          args { buffer { name: "x" access: WRITE } }
          args { f32: 1 }
          cost { estimated_us: 100 }
        }
        nodes {
          name: "k"
          op: "fill"
          device: 1
          args { buffer { name: "z" access: WRITE } }
          args { f32: 1 }
          cost { estimated_us: 2000 }
        }
        nodes {
          name: "L"
          while_loop {
            condition: "go"
            max_iterations: 4
            body {
              name: "step"
              op: "axpy"
              args { f32: 2 }
              args { buffer { name: "x" access: READ } }
              args { buffer { name: "z" access: READ_WRITE } }
              cost { estimated_us: 50 }
            }
            body {
              name: "sum"
              op: "dot"
              args { buffer { name: "z" access: READ } }
              args { buffer { name: "z" access: READ } }
              args { buffer { name: "s" access: WRITE } }
              cost { estimated_us: 50 }
            }
            body {
              name: "stop"
              op: "fill"
              args { buffer { name: "go" access: WRITE } }
              args { i32: 0 }
            }
          }
        }
        nodes {
          name: "r"
          op: "copy"
          device: 0
          args { buffer { name: "s" access: READ } }
          args { buffer { name: "out" access: WRITE } }
          cost { estimated_us: 10 }
        }
      )pb",
      &proto));
  GraphLimits limits;
  limits.num_devices = 2;
  absl::StatusOr<Graph> graph = BuildGraph(proto, limits);
  ASSERT_OK(graph.status());
  absl::StatusOr<Plan> eager = PlanGraph(*graph, TwoDevices(true));
  ASSERT_OK(eager.status());
  ASSERT_OK(VerifyPlan(*graph, *eager));
  const int loop = PositionOf(*graph, *eager, "L");
  ASSERT_EQ(eager->nodes[loop].device, 1);
  ASSERT_EQ(eager->copies.size(), 2u);
  const PlannedCopy& in = eager->copies[0];
  EXPECT_EQ(in.after, PositionOf(*graph, *eager, "w"));
  EXPECT_EQ(in.before, loop);
  EXPECT_EQ(graph->buffer(in.buffer).name, "x");
  EXPECT_EQ(in.device, 1);
  const PlannedCopy& out = eager->copies[1];
  EXPECT_EQ(out.after, loop);
  EXPECT_EQ(out.before, PositionOf(*graph, *eager, "r"));
  EXPECT_EQ(graph->buffer(out.buffer).name, "s");
  EXPECT_EQ(out.device, 0);
  EXPECT_EQ(eager->nodes[loop].signal_event, out.event);
  // x's 1,000 us copy is hidden behind k.
  absl::StatusOr<Plan> lazy = PlanGraph(*graph, TwoDevices(false));
  ASSERT_OK(lazy.status());
  EXPECT_TRUE(lazy->copies.empty());
  EXPECT_LT(eager->estimated_makespan_us + 900, lazy->estimated_makespan_us)
      << eager->estimated_makespan_us << " vs " << lazy->estimated_makespan_us;
}

TEST(EagerCopiesTest, SimulatePlanFollowsThePlansCopies) {
  const Graph graph = CopyBehindALongKernel();
  absl::StatusOr<Plan> plan = PlanGraph(graph, TwoDevices(true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const double planned = plan->estimated_makespan_us;
  ASSERT_TRUE(SimulatePlan(graph, &*plan).ok());
  EXPECT_NEAR(plan->estimated_makespan_us, planned, 1e-6);
  // The same plan without its copies runs as a lazy one.
  plan->copies.clear();
  ASSERT_TRUE(SimulatePlan(graph, &*plan).ok());
  EXPECT_NEAR(plan->estimated_makespan_us, 3100, 1e-6);
}

TEST(EagerCopiesTest, MalformedCopiesAreRefused) {
  const Graph graph = CopyBehindALongKernel();
  absl::StatusOr<Plan> plan = PlanGraph(graph, TwoDevices(true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->copies.size(), 1u);
  Plan bad = *plan;
  bad.copies[0].event = -1;
  EXPECT_THAT(SimulatePlan(graph, &bad), StatusIs(absl::StatusCode::kInternal));
  EXPECT_FALSE(VerifyPlan(graph, bad).ok());
  bad = *plan;
  bad.copies[0].stream = bad.nodes[0].stream;
  EXPECT_FALSE(VerifyPlan(graph, bad).ok());
  bad = *plan;
  bad.copies[0].device = bad.nodes[bad.copies[0].after].device;
  EXPECT_FALSE(VerifyPlan(graph, bad).ok());
}

TEST(EagerCopiesTest, NoCopyForAHostReaderOrOneDevice) {
  const Graph to_host = CopyBehindALongKernel(/*host_reader=*/true);
  absl::StatusOr<Plan> plan = PlanGraph(to_host, TwoDevices(true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->copies.empty());

  GraphMaker m;
  m.Buffer("x", kBig).Buffer("y");
  m.Node("w", "x:w", {.cost = 100});
  m.Node("r", "x:r y:w", {.cost = 100});
  const Graph one = m.Build();
  plan = PlanGraph(one, PlannerOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->copies.empty());
}

TEST(EagerCopiesTest, OneCopyPerVersionAndDevice) {
  GraphMaker m;
  m.Buffer("x", kBig).Buffer("a").Buffer("b").Buffer("c");
  m.Node("w", "x:w", {.cost = 100, .device = 0});
  m.Node("r1", "x:r a:w", {.cost = 10, .device = 1});
  m.Node("r2", "x:r b:w", {.cost = 10, .device = 1});
  m.Node("w2", "x:rw", {.cost = 10, .device = 0});
  m.Node("r3", "x:r c:w", {.cost = 10, .device = 1});
  const Graph graph = m.Build();
  absl::StatusOr<Plan> plan = PlanGraph(graph, TwoDevices(true));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(VerifyPlan(graph, *plan).ok()) << VerifyPlan(graph, *plan);
  // x goes to device 1 once from w (for r1; r2 shares it) and once from
  // w2 (for r3).
  ASSERT_EQ(plan->copies.size(), 2u);
  EXPECT_EQ(plan->copies[0].after, PositionOf(graph, *plan, "w"));
  EXPECT_EQ(plan->copies[0].before, PositionOf(graph, *plan, "r1"));
  EXPECT_EQ(plan->copies[1].after, PositionOf(graph, *plan, "w2"));
  EXPECT_EQ(plan->copies[1].before, PositionOf(graph, *plan, "r3"));
  EXPECT_EQ(plan->copies[0].stream, plan->copies[1].stream);
}

// Random DAGs over pinned and free nodes: every plan verifies, and its
// makespan is never below the lower bound nor above the plan without
// eager copies by more than the noise of a different placement.
TEST(EagerCopiesTest, RandomDagsVerify) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    GraphMaker m;
    const int buffers = 6;
    for (int b = 0; b < buffers; ++b) {
      m.Buffer(absl::StrCat("b", b), 1'000'000ull * (1 + rng() % 200));
    }
    const int nodes = 4 + rng() % 12;
    for (int v = 0; v < nodes; ++v) {
      std::string uses;
      const int reads = 1 + rng() % 2;
      for (int k = 0; k < reads; ++k) {
        absl::StrAppend(&uses, "b", rng() % buffers, ":r ");
      }
      absl::StrAppend(&uses, "b", rng() % buffers, ":w");
      NodeOptions options{.cost = 10.0 + rng() % 1000};
      if (rng() % 3 == 0) options.device = static_cast<int>(rng() % 3);
      if (rng() % 8 == 0) options.engine = Engine::kHost;
      m.Node(absl::StrCat("n", v), uses, options);
    }
    const Graph graph = m.Build();
    PlannerOptions options;
    options.num_devices = 3;
    absl::StatusOr<Plan> plan = PlanGraph(graph, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(VerifyPlan(graph, *plan).ok())
        << "round " << round << ": " << VerifyPlan(graph, *plan);
    EXPECT_GE(plan->estimated_makespan_us, plan->lower_bound_us - 1e-6)
        << "round " << round;
  }
}

}  // namespace
}  // namespace weft::scheduler
