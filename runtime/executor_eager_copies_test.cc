// Eager copies between devices (scheduler/eager_copies.h) as the executor
// runs them: on the simulated machine the plan's estimate is what runs,
// the bytes cross while the reader's other inputs are being made, and the
// results are those of copies made by the readers themselves.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/sim_machine_test_util.h"
#include "scheduler/planner.h"

namespace weft::runtime {
namespace {

using executor_testing::FloatBytes;
using executor_testing::Floats;
using executor_testing::Outcome;
using executor_testing::SimMachine;
using scheduler::Access;
using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::DType;

// 300 MB: 1,000 us over the default 300 GB/s link between devices.
constexpr uint64_t kBig = 300'000'000;

BufferSpec Buffer(std::string name, uint64_t bytes, bool output = false) {
  BufferSpec b;
  b.name = std::move(name);
  b.size_bytes = bytes;
  b.dtype = DType::kFloat32;
  b.output = output;
  return b;
}

scheduler::NodeSpec Node(std::string name, std::string op,
                         std::vector<scheduler::Arg> args, double cost_us,
                         int device) {
  scheduler::NodeSpec n;
  n.name = std::move(name);
  n.op = std::move(op);
  n.args = std::move(args);
  n.cost_us = cost_us;
  n.device = device;
  return n;
}

std::shared_ptr<const scheduler::Plan> PlanOn(const scheduler::Graph& graph,
                                              int num_devices, bool eager) {
  scheduler::PlannerOptions options;
  options.num_devices = num_devices;
  options.eager_copies = eager;
  absl::StatusOr<scheduler::Plan> plan = scheduler::PlanGraph(graph, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return std::make_shared<const scheduler::Plan>(plan.ok() ? *std::move(plan)
                                                           : scheduler::Plan());
}

const TraceSpan* SpanNamed(const JobTrace& trace, const std::string& name) {
  for (const TraceSpan& span : trace.spans) {
    if (span.name == name) return &span;
  }
  return nullptr;
}

double LastEnd(const JobTrace& trace) {
  double last = 0;
  for (const TraceSpan& span : trace.spans) last = std::max(last, span.end_us);
  return last;
}

// `w` writes x (300 MB) on device 0 in 100 us; `k` runs 2,000 us on
// device 1; `r` reads x after `k` on device 1.
TEST(ExecutorEagerCopiesTest, TheCopyCrossesWhileTheReaderWaits) {
  auto graph = std::make_shared<const scheduler::Graph>(
      "eager",
      std::vector<BufferSpec>{Buffer("x", kBig), Buffer("y", 64),
                              Buffer("z", 64)},
      std::vector<scheduler::NodeSpec>{
          Node("w", "spin", {BufferUse{0, Access::kWrite}}, 100, 0),
          Node("k", "spin", {BufferUse{1, Access::kWrite}}, 2000, 1),
          Node("r", "spin",
               {BufferUse{0, Access::kRead}, BufferUse{1, Access::kRead},
                BufferUse{2, Access::kWrite}},
               100, 1)});
  for (const bool eager : {true, false}) {
    SCOPED_TRACE(eager ? "eager" : "on the reader's stream");
    SimMachine machine(2);  // fresh clocks
    const auto plan = PlanOn(*graph, 2, eager);
    ASSERT_EQ(plan->copies.size(), eager ? 1u : 0u);
    Outcome outcome;
    machine.Run(graph, plan, outcome);
    const TraceSpan* copy = SpanNamed(outcome.trace, "x d0->d1");
    ASSERT_NE(copy, nullptr);
    // Eager: from the end of w, under k; else after k.
    EXPECT_NEAR(copy->start_us, eager ? 100 : 2000, 1e-3);
    EXPECT_NEAR(copy->end_us - copy->start_us, 1000, 1e-3);
    EXPECT_NEAR(LastEnd(outcome.trace), eager ? 2100 : 3100, 1e-3);
    EXPECT_NEAR(LastEnd(outcome.trace), plan->estimated_makespan_us, 1e-3);
  }
}

// Real values across three devices, each node reading what another device
// wrote: eager copies give the same results as copies by the readers.
TEST(ExecutorEagerCopiesTest, ResultsAreThoseOfCopiesByTheReaders) {
  constexpr int kElems = 1024;
  std::vector<BufferSpec> buffers;
  for (int i = 0; i < 6; ++i) {
    buffers.push_back(Buffer("t" + std::to_string(i), kElems * sizeof(float),
                             /*output=*/i == 5));
  }
  std::vector<float> a(kElems), b(kElems);
  for (int i = 0; i < kElems; ++i) {
    a[i] = static_cast<float>(i % 7);
    b[i] = static_cast<float>(i % 5) - 2;
  }
  buffers[0].init = BufferSpec::Init::kData;
  buffers[0].data = FloatBytes(a);
  buffers[1].init = BufferSpec::Init::kData;
  buffers[1].data = FloatBytes(b);
  auto use = [](int b, Access access) { return BufferUse{b, access}; };
  std::vector<scheduler::NodeSpec> nodes = {
      // t2 = t0 + t1 on device 0; t3 = t0 - t1 on device 1; t4 = t2 + t3
      // on device 2; t0 *= -0.5 on device 0 (after both reads); t5 = t4 +
      // t0 on device 1.
      Node("n0", "add",
           {use(0, Access::kRead), use(1, Access::kRead),
            use(2, Access::kWrite)},
           50, 0),
      Node("n1", "sub",
           {use(0, Access::kRead), use(1, Access::kRead),
            use(3, Access::kWrite)},
           80, 1),
      Node("n2", "add",
           {use(2, Access::kRead), use(3, Access::kRead),
            use(4, Access::kWrite)},
           20, 2),
      Node("n3", "scale", {-0.5f, use(0, Access::kReadWrite)}, 10, 0),
      Node("n4", "add",
           {use(4, Access::kRead), use(0, Access::kRead),
            use(5, Access::kWrite)},
           20, 1),
  };
  auto graph = std::make_shared<const scheduler::Graph>(
      "values", std::move(buffers), std::move(nodes));
  std::vector<float> want(kElems);
  for (int i = 0; i < kElems; ++i) {
    want[i] = (a[i] + b[i]) + (a[i] - b[i]) + (-0.5f * a[i]);
  }
  SimMachine machine(3);
  for (const bool eager : {true, false}) {
    SCOPED_TRACE(eager ? "eager" : "on the readers' streams");
    const auto plan = PlanOn(*graph, 3, eager);
    EXPECT_EQ(plan->copies.empty(), !eager);
    Outcome outcome;
    machine.Run(graph, plan, outcome);
    ASSERT_TRUE(outcome.outputs.contains("t5"));
    EXPECT_EQ(Floats(outcome.outputs.at("t5")), want);
  }
}

}  // namespace
}  // namespace weft::runtime
