#include "scheduler/memory/memory_plan.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "scheduler/graph_builder.h"
#include "scheduler/memory/memory_order.h"
#include "scheduler/memory/test_plans.h"
#include "scheduler/plan_proto.h"
#include "scheduler/planner.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"
#include "testing/wire_graphs.h"

namespace weft::scheduler::memory {
namespace {

using ::testing::HasSubstr;
using ::weft::scheduler::memory::testing::WithBuffers;
using ::weft::scheduler::testing::GraphMaker;
using ::weft::testing::StatusIs;

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

// Re-placement rounds applied to a memory plan made without them give
// what planning with them gives, arenas and offsets, on random plans; and
// the rounds do shrink some of those arenas.
TEST(MemoryPlanTest, ImprovingAPlanEqualsPlanningWithRounds) {
  int shrunk = 0;
  for (uint32_t seed = 1; seed <= 400; ++seed) {
    SCOPED_TRACE(seed);
    testing::RandomPlanCase c = testing::RandomCase(seed);
    c.graph.num_nodes = 20 + static_cast<int>(seed % 60);
    c.graph.num_buffers = c.graph.num_nodes;
    const Graph g = testing::RandomGraph(seed, c.graph);
    c.planner.explain = false;
    c.planner.simulate = false;
    c.planner.plan_memory = false;
    absl::StatusOr<Plan> plan = PlanGraph(g, c.planner);
    ASSERT_OK(plan);
    MemoryPlanOptions none;
    none.improve_rounds = 0;
    MemoryPlanOptions rounds;
    rounds.improve_rounds = 4;
    Plan improved = *plan;
    ASSERT_OK(PlanMemory(g, none, &improved));
    const Plan before = improved;
    ASSERT_OK(ImproveMemoryPlan(g, rounds, &improved));
    Plan direct = *plan;
    ASSERT_OK(PlanMemory(g, rounds, &direct));
    ASSERT_EQ(improved.memory.size(), direct.memory.size());
    for (size_t d = 0; d < direct.memory.size(); ++d) {
      EXPECT_EQ(improved.memory[d].arena_bytes, direct.memory[d].arena_bytes);
      EXPECT_EQ(improved.memory[d].lower_bound_bytes,
                direct.memory[d].lower_bound_bytes);
      shrunk += direct.memory[d].arena_bytes < before.memory[d].arena_bytes;
    }
    ASSERT_EQ(improved.buffers.size(), direct.buffers.size());
    for (size_t b = 0; b < direct.buffers.size(); ++b) {
      EXPECT_EQ(improved.buffers[b].offset, direct.buffers[b].offset) << b;
    }
  }
  EXPECT_GT(shrunk, 0);
}

TEST(MemoryPlanTest, PlanGraphFillsArenasWhenSimulating) {
  const Graph g = TwoReductions();
  PlannerOptions options;
  options.stream_mode = StreamMode::kSingle;
  options.memory_budget_bytes = {1 << 20};
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  ASSERT_OK(plan);
  ASSERT_EQ(plan->memory.size(), 1u);
  EXPECT_EQ(plan->memory[0].device, 0);
  // Submitted order on one stream: A and B are live together.
  EXPECT_EQ(plan->memory[0].arena_bytes, 2 * 1024 + 256);
  EXPECT_EQ(plan->memory[0].lower_bound_bytes, 2 * 1024 + 256);
  EXPECT_EQ(plan->memory[0].budget_bytes, 1 << 20);
  EXPECT_EQ(plan->buffers.size(), 5u);

  const weft::v1::Plan proto = PlanToProto(g, *plan);
  ASSERT_EQ(proto.memory_size(), 1);
  EXPECT_EQ(proto.memory(0).arena_bytes(), 2 * 1024 + 256);
  ASSERT_EQ(proto.buffers_size(), 5);
  EXPECT_EQ(proto.buffers(0).name(), "A");
  EXPECT_EQ(proto.buffers(0).size_bytes(), 1000);
  EXPECT_EQ(proto.buffers(0).offset() % 256, 0);
}

TEST(MemoryPlanTest, MemoryAwareOrderShrinksTheArena) {
  const Graph g = TwoReductions();
  PlannerOptions options;
  options.stream_mode = StreamMode::kSingle;
  options.memory_order = MemoryOrderKind::kMemoryAware;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  ASSERT_OK(plan);
  std::vector<NodeId> order;
  for (const PlannedNode& pn : plan->nodes) order.push_back(pn.node);
  EXPECT_THAT(order, ::testing::ElementsAre(0, 2, 1, 3, 4));
  EXPECT_EQ(plan->memory[0].arena_bytes, 1024 + 2 * 256);
}

TEST(MemoryPlanTest, JobPlansSkipMemory) {
  PlannerOptions options;
  options.simulate = false;
  absl::StatusOr<Plan> plan = PlanGraph(TwoReductions(), options);
  ASSERT_OK(plan);
  EXPECT_TRUE(plan->memory.empty());
  EXPECT_TRUE(plan->buffers.empty());
}

// Each buffer by itself: A, B (1024 aligned) and a, b, out (256 each).
TEST(MemoryPlanTest, BytesWithoutReuseCountEveryBufferADeviceUses) {
  PlannerOptions options;
  options.simulate = false;
  options.stream_mode = StreamMode::kSingle;
  absl::StatusOr<Plan> plan = PlanGraph(TwoReductions(), options);
  ASSERT_OK(plan);
  EXPECT_THAT(BytesWithoutReuse(TwoReductions(), *plan, 1),
              ::testing::ElementsAre(2 * 1024 + 3 * 256));
  EXPECT_THAT(BytesWithoutReuse(TwoReductions(), *plan, 1, 1),
              ::testing::ElementsAre(2 * 1000 + 3 * 10));
  const std::vector<DeviceBudget> roomy = {{2 * 1024 + 3 * 256}};
  EXPECT_FALSE(ExceedsBudgetsWithoutReuse(TwoReductions(), *plan, roomy));
  const std::vector<DeviceBudget> tight = {{2 * 1024 + 3 * 256 - 1}};
  EXPECT_TRUE(ExceedsBudgetsWithoutReuse(TwoReductions(), *plan, tight));
  EXPECT_FALSE(ExceedsBudgetsWithoutReuse(TwoReductions(), *plan, {{0}}));
}

// A loop on device 0 (where x is) whose body pins `step` to device 1: x
// and y are allocated there by themselves, outside what the plan holds.
// Names of the buffers `plan` places on `device`, checked to lie in that
// device's arena.
std::vector<std::string> PlacedOn(const Graph& graph, const Plan& plan,
                                  int device) {
  int64_t arena = -1;
  for (const DeviceMemory& m : plan.memory) {
    if (m.device == device) arena = m.arena_bytes;
  }
  std::vector<std::string> names;
  for (const PlannedBuffer& pb : plan.buffers) {
    if (pb.device != device) continue;
    EXPECT_LE(pb.offset + pb.size_bytes, arena) << pb.buffer;
    names.push_back(graph.buffer(pb.buffer).name);
  }
  return names;
}

// `proto` built for a machine of two devices.
absl::StatusOr<Graph> BuildForTwoDevices(const weft::v1::Graph& proto) {
  GraphLimits limits;
  limits.num_devices = 2;
  return BuildGraph(proto, limits);
}

// `proto` (its second node a control node on device 0, the first pinned
// there) planned for two devices as a job: without a memory plan its
// bodies take `beyond` bytes on device 1 by themselves; with one, device
// 1's arena holds exactly the buffers `placed` and nothing is left beyond.
void ExpectBodiesPlacedOnDevice1(const weft::v1::Graph& proto, uint64_t beyond,
                                 const std::vector<std::string>& placed) {
  absl::StatusOr<Graph> graph = BuildForTwoDevices(proto);
  ASSERT_OK(graph.status());
  PlannerOptions options;
  options.num_devices = 2;
  options.simulate = false;
  absl::StatusOr<Plan> plan = PlanGraph(*graph, options);
  ASSERT_OK(plan.status());
  ASSERT_EQ(plan->nodes[1].device, 0);
  EXPECT_THAT(BodyBytesBeyondPlan(*graph, *plan, 2),
              ::testing::ElementsAre(0, beyond));
  options.plan_memory = true;
  plan = PlanGraph(*graph, options);
  ASSERT_OK(plan.status());
  EXPECT_THAT(PlacedOn(*graph, *plan, 1),
              ::testing::UnorderedElementsAreArray(placed));
  EXPECT_THAT(BodyBytesBeyondPlan(*graph, *plan, 2),
              ::testing::ElementsAre(0, 0));
}

TEST(MemoryPlanTest, BodiesOnAnotherDeviceAllocateThere) {
  weft::v1::Graph proto = ::weft::testing::LoopWithABodyNodeElsewhere();
  absl::StatusOr<Graph> graph = BuildForTwoDevices(proto);
  ASSERT_OK(graph.status());
  // With a memory plan (simulated plans have one) and without (a job's).
  for (const bool simulate : {true, false}) {
    SCOPED_TRACE(simulate);
    PlannerOptions options;
    options.num_devices = 2;
    options.simulate = simulate;
    absl::StatusOr<Plan> plan = PlanGraph(*graph, options);
    ASSERT_OK(plan.status());
    EXPECT_EQ(plan->memory.empty(), !simulate);
    ASSERT_EQ(plan->nodes[1].node, 1);
    ASSERT_EQ(plan->nodes[1].device, 0);
    if (simulate) {
      // The memory plan places what the body's node on device 1 uses in
      // that device's arena: nothing is allocated beyond it.
      EXPECT_THAT(PlacedOn(*graph, *plan, 1),
                  ::testing::UnorderedElementsAre("x", "y"));
      EXPECT_THAT(BodyBytesBeyondPlan(*graph, *plan, 2),
                  ::testing::ElementsAre(0, 0));
    } else {
      EXPECT_THAT(BodyBytesBeyondPlan(*graph, *plan, 2),
                  ::testing::ElementsAre(0, 1000192 + 1024));
    }
  }
  // Nothing more where the body runs on its control node's device.
  proto.mutable_nodes(1)->mutable_while_loop()->mutable_body(0)->clear_device();
  proto.mutable_nodes(1)->mutable_while_loop()->mutable_body(1)->clear_device();
  graph = BuildForTwoDevices(proto);
  ASSERT_OK(graph.status());
  PlannerOptions options;
  options.num_devices = 2;
  absl::StatusOr<Plan> plan = PlanGraph(*graph, options);
  ASSERT_OK(plan.status());
  EXPECT_THAT(BodyBytesBeyondPlan(*graph, *plan, 2),
              ::testing::ElementsAre(0, 0));
}

// Both branches pinned to device 1, the case..of on device 0 (where x
// is): the device may decide it, so its selector goes to device 1 too.
TEST(MemoryPlanTest, BodiesOnOneOtherDeviceTakeTheirControlNodesBuffers) {
  weft::v1::Graph proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        buffers { name: "x" size_bytes: 1000000 dtype: FLOAT32 }
        buffers { name: "pick" size_bytes: 4 dtype: INT32 fill: 1 }
        nodes {
          name: "before"
          op: "fill"
          device: 0
          args { buffer { name: "x" access: WRITE } }
          args { f32: 1 }
        }
        nodes {
          name: "case"
          case_of {
            selector: "pick"
            branches {
              nodes {
                name: "by2"
                op: "scale"
                device: 1
                args { f32: 2 }
                args { buffer { name: "x" access: READ_WRITE } }
              }
            }
            branches {
              nodes {
                name: "by3"
                op: "scale"
                device: 1
                args { f32: 3 }
                args { buffer { name: "x" access: READ_WRITE } }
              }
            }
          }
        }
      )pb",
      &proto));
  // With a memory plan, device 1's arena holds both.
  ExpectBodiesPlacedOnDevice1(proto, 1000192 + 256, {"x", "pick"});
}

// A loop on device 0 whose body holds a loop whose body pins `step` to
// device 1: the buffers `step` uses are placed on device 1, at depth two,
// and so is the inner loop's condition (its body runs on device 1 alone,
// which may decide it).
TEST(MemoryPlanTest, NestedBodiesOnAnotherDeviceArePlaced) {
  weft::v1::Graph proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        buffers { name: "x" size_bytes: 4096 dtype: FLOAT32 }
        buffers { name: "y" size_bytes: 2048 dtype: FLOAT32 output: true }
        buffers { name: "z" size_bytes: 1024 dtype: FLOAT32 output: true }
        buffers { name: "go" size_bytes: 4 dtype: INT32 }
        buffers { name: "again" size_bytes: 4 dtype: INT32 }
        nodes {
          name: "make"
          op: "fill"
          device: 0
          args { buffer { name: "x" access: WRITE } }
          args { f32: 1 }
        }
        nodes {
          name: "outer"
          while_loop {
            condition: "go"
            max_iterations: 2
            body {
              name: "touch_z"
              op: "scale"
              device: 0
              args { f32: 2 }
              args { buffer { name: "z" access: READ_WRITE } }
            }
            body {
              name: "inner"
              while_loop {
                condition: "again"
                max_iterations: 2
                body {
                  name: "step"
                  op: "axpy"
                  device: 1
                  args { f32: 1 }
                  args { buffer { name: "x" access: READ } }
                  args { buffer { name: "y" access: READ_WRITE } }
                }
              }
            }
          }
        }
      )pb",
      &proto));
  ExpectBodiesPlacedOnDevice1(proto, 4096 + 2048 + 256, {"x", "y", "again"});
}

// LoopBetweenTensors with its body's `double_b` pinned to device 1, on a
// device 0 of 10 KiB: spill fitting rewrites the graph, and the rewritten
// plan's arenas hold the body's copies on device 1 too.
TEST(MemoryPlanTest, SpillFittedPlansPlaceBodiesOnOtherDevices) {
  weft::v1::Graph proto = ::weft::testing::LoopBetweenTensors(4096);
  ASSERT_EQ(proto.nodes(2).name(), "loop");
  ASSERT_EQ(proto.nodes(2).while_loop().body(0).name(), "double_b");
  proto.mutable_nodes(2)->mutable_while_loop()->mutable_body(0)->set_device(1);
  absl::StatusOr<Graph> graph = BuildForTwoDevices(proto);
  ASSERT_OK(graph.status());
  PlannerOptions options;
  options.num_devices = 2;
  options.simulate = false;
  options.plan_memory = true;
  options.memory_order = MemoryOrderKind::kSubmitted;
  options.device_memory_bytes = {10240, 1 << 20};
  absl::StatusOr<Plan> plan = PlanGraph(*graph, options);
  ASSERT_OK(plan.status());
  ASSERT_NE(plan->graph, nullptr);
  EXPECT_THAT(PlacedOn(*plan->graph, *plan, 1), ::testing::Contains("b"));
  EXPECT_THAT(BodyBytesBeyondPlan(*plan->graph, *plan, 2),
              ::testing::ElementsAre(0, 0));
}

// Job plans (not simulated) get a memory plan only where their buffers,
// each by itself, would not fit; then it fits them.
TEST(MemoryPlanTest, JobPlansOverTheBudgetArePlanned) {
  PlannerOptions options;
  options.simulate = false;
  options.stream_mode = StreamMode::kSingle;
  options.plan_memory_over_budget = true;
  options.memory_budget_bytes = {2 * 1024 + 3 * 256};
  absl::StatusOr<Plan> plan = PlanGraph(TwoReductions(), options);
  ASSERT_OK(plan);
  EXPECT_TRUE(plan->memory.empty());
  options.memory_budget_bytes = {2 * 1024 + 3 * 256 - 1};
  plan = PlanGraph(TwoReductions(), options);
  ASSERT_OK(plan);
  ASSERT_EQ(plan->memory.size(), 1u);
  EXPECT_LE(plan->memory[0].arena_bytes, 2 * 1024 + 3 * 256 - 1);
  EXPECT_EQ(plan->buffers.size(), 5u);
}

TEST(MemoryPlanTest, OptionsFromProto) {
  weft::v1::ScheduleOptions proto;
  absl::StatusOr<PlannerOptions> options = PlannerOptionsFromProto(proto, 1, 8);
  ASSERT_OK(options);
  EXPECT_EQ(options->memory_order, MemoryOrderKind::kAuto);
  proto.set_memory_order(weft::v1::MEMORY_ORDER_SUBMITTED);
  options = PlannerOptionsFromProto(proto, 1, 8);
  ASSERT_OK(options);
  EXPECT_EQ(options->memory_order, MemoryOrderKind::kSubmitted);
  proto.set_memory_order(weft::v1::MEMORY_ORDER_MEMORY_AWARE);
  options = PlannerOptionsFromProto(proto, 1, 8);
  ASSERT_OK(options);
  EXPECT_EQ(options->memory_order, MemoryOrderKind::kMemoryAware);
  proto.set_memory_order(static_cast<weft::v1::MemoryOrder>(7));
  EXPECT_THAT(PlannerOptionsFromProto(proto, 1, 8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("options.memory_order: unknown")));
}

TEST(MemoryPlanTest, BudgetFromProto) {
  weft::v1::ScheduleOptions proto;
  absl::StatusOr<PlannerOptions> options = PlannerOptionsFromProto(proto, 2, 8);
  ASSERT_OK(options);
  EXPECT_TRUE(options->memory_budget_bytes.empty());
  proto.set_memory_budget_bytes(4096);
  options = PlannerOptionsFromProto(proto, 2, 8);
  ASSERT_OK(options);
  EXPECT_THAT(options->memory_budget_bytes, ::testing::ElementsAre(4096, 4096));
  proto.set_memory_budget_bytes(-1);
  EXPECT_THAT(PlannerOptionsFromProto(proto, 2, 8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("options.memory_budget_bytes")));
}

TEST(MemoryPlanTest, DeviceBudgetsClampToTheDevicesMemory) {
  const std::vector<DeviceBudget> budgets = DeviceBudgets(
      {1 << 20, 1 << 20, 0, 1 << 20}, {1 << 10, 1 << 30, 1 << 10}, 5);
  ASSERT_EQ(budgets.size(), 5u);
  EXPECT_EQ(budgets[0].bytes, 1 << 10);
  EXPECT_TRUE(budgets[0].clamped);
  EXPECT_EQ(budgets[1].bytes, 1 << 20);
  EXPECT_FALSE(budgets[1].clamped);
  EXPECT_EQ(budgets[2].bytes, 1 << 10);  // none: the device's memory
  EXPECT_FALSE(budgets[2].clamped);
  EXPECT_TRUE(budgets[2].device_memory);
  EXPECT_EQ(budgets[3].bytes, 1 << 20);  // memory unknown
  EXPECT_EQ(budgets[4].bytes, 0);
}

TEST(MemoryPlanTest, PlanReportsAClampedBudget) {
  PlannerOptions options;
  options.stream_mode = StreamMode::kSingle;
  options.memory_budget_bytes = {int64_t{1} << 40};
  options.device_memory_bytes = {int64_t{1} << 30};
  absl::StatusOr<Plan> plan = PlanGraph(TwoReductions(), options);
  ASSERT_OK(plan);
  ASSERT_EQ(plan->memory.size(), 1u);
  EXPECT_EQ(plan->memory[0].budget_bytes, int64_t{1} << 30);
  EXPECT_TRUE(plan->memory[0].budget_clamped);
  const weft::v1::Plan proto = PlanToProto(TwoReductions(), *plan);
  EXPECT_EQ(proto.memory(0).budget_bytes(), int64_t{1} << 30);
  EXPECT_TRUE(proto.memory(0).budget_clamped());

  options.device_memory_bytes = {int64_t{1} << 50};
  plan = PlanGraph(TwoReductions(), options);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->memory[0].budget_bytes, int64_t{1} << 40);
  EXPECT_FALSE(plan->memory[0].budget_clamped);
}

// reduceA needs A and a: 1024 + 256 bytes once aligned.
TEST(MemoryPlanTest, NodeAboveTheBudgetIsRefused) {
  for (const bool simulate : {true, false}) {
    PlannerOptions options;
    options.simulate = simulate;
    options.memory_budget_bytes = {1024 + 255};
    EXPECT_THAT(PlanGraph(TwoReductions(), options).status(),
                StatusIs(absl::StatusCode::kResourceExhausted,
                         HasSubstr("node 'reduceA': its arguments need 1280 "
                                   "bytes on device 0, above the memory "
                                   "budget of 1279 bytes")))
        << simulate;
    options.memory_budget_bytes = {1024 + 256};
    EXPECT_OK(PlanGraph(TwoReductions(), options)) << simulate;
  }
  // Clamped to the device's memory, the message says so.
  PlannerOptions options;
  options.memory_budget_bytes = {1 << 20};
  options.device_memory_bytes = {1024};
  EXPECT_THAT(
      PlanGraph(TwoReductions(), options).status(),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("budget of 1024 bytes (the device's memory)")));
  // No budget: the device's memory is the budget.
  options.memory_budget_bytes.clear();
  EXPECT_THAT(
      PlanGraph(TwoReductions(), options).status(),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("budget of 1024 bytes (the device's memory)")));
  // Nor a known memory: nothing is refused.
  options.device_memory_bytes.clear();
  EXPECT_OK(PlanGraph(TwoReductions(), options));
}

TEST(MemoryPlanTest, HostNodesAreNotChecked) {
  GraphMaker m;
  m.Buffer("big", 1 << 20, DType::kBytes).Buffer("out", 10, DType::kBytes);
  m.Node("host", "big:w", {.engine = Engine::kHost}).Node("small", "out:w");
  PlannerOptions options;
  options.memory_budget_bytes = {4096};
  EXPECT_OK(PlanGraph(WithBuffers(m.Build(), {"out"}), options));
}

}  // namespace
}  // namespace weft::scheduler::memory
