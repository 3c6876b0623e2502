// Arena placement (Executor::Options::place_buffers): a job's planned
// buffers lie in one arena per device taken from the memory pool, at the
// offsets of the plan's memory plan. Results match the separate
// allocations bit for bit; reuse lets jobs run that would not fit
// otherwise; the arena goes back to the pool however the job ends.
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/forwarding_backend.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/graph_builder.h"
#include "scheduler/planner.h"
#include "testing/status_matchers.h"
#include "testing/wire_graphs.h"
#include "weft/v1/weft.pb.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using namespace ::weft::runtime::executor_testing;  // NOLINT: test helpers
using ::testing::AllOf;
using ::weft::testing::StatusIs;

constexpr double kInfinite = std::numeric_limits<double>::infinity();

// Fails the fail_launch_at-th kernel launch, when armed.
class FailingLaunchBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status Launch(const KernelLaunch& launch,
                      StreamHandle stream) override {
    if (++launches == fail_launch_at.load()) {
      return absl::InternalError("launch refused");
    }
    return wrapped()->Launch(launch, stream);
  }
  std::atomic<int> launches{0};
  std::atomic<int> fail_launch_at{0};
};

// A simulated machine and an executor with or without placement.
struct Machine {
  Machine(bool place, int num_devices = 2,
          uint64_t memory_bytes = uint64_t{64} << 20, double time_scale = 0,
          double device_to_host_gbps = kInfinite) {
    SimBackend::Options options;
    options.num_devices = num_devices;
    options.memory_bytes = memory_bytes;
    options.host_to_device_gbps = kInfinite;
    options.device_to_host_gbps = device_to_host_gbps;
    options.device_to_device_gbps = kInfinite;
    options.time_scale = time_scale;
    sim = SimBackend::Create(options).value();
    backend = std::make_unique<FailingLaunchBackend>(sim.get());
    Executor::Options exec;
    exec.backend = backend.get();
    exec.max_streams_per_device = 16;
    exec.place_buffers = place;
    executor = Executor::Create(exec).value();
  }
  ~Machine() {
    executor.reset();
    backend.reset();
    sim.reset();
  }

  // Runs `graph` under `plan` to the end.
  void Run(std::shared_ptr<const scheduler::Graph> graph,
           std::shared_ptr<const scheduler::Plan> plan, Outcome& outcome,
           LaunchMode mode = LaunchMode::kDefault) {
    ASSERT_TRUE(
        executor->Start(graph, plan, outcome.Callbacks(), JobOptions{mode})
            .ok());
    ASSERT_TRUE(outcome.Wait());
  }
  MemoryPoolStats Stats(int device) const {
    return executor->Load()[device].memory;
  }

  std::unique_ptr<SimBackend> sim;
  std::unique_ptr<FailingLaunchBackend> backend;
  std::unique_ptr<Executor> executor;
};

// Random graphs of float ops where most tensors are temporaries: each node
// writes a new tensor from one or two recent ones (sometimes updating one
// in place, sometimes on the host), so the arena planner shares addresses
// between tensors whose lifetimes do not overlap. Three inputs (data and
// fills), two outputs.
std::shared_ptr<const scheduler::Graph> RandomTemporaries(uint32_t seed,
                                                          int num_nodes = 48) {
  std::mt19937 rng(seed);
  std::vector<BufferSpec> buffers;
  auto tensor = [&](int elems) {
    BufferSpec spec;
    spec.name = "t" + std::to_string(buffers.size());
    spec.size_bytes = elems * sizeof(float);
    spec.dtype = DType::kFloat32;
    spec.init = BufferSpec::Init::kZero;
    buffers.push_back(std::move(spec));
    return static_cast<int>(buffers.size()) - 1;
  };
  constexpr int kElems = 256;
  for (int i = 0; i < 3; ++i) {
    const int t = tensor(kElems);
    std::vector<float> v(kElems);
    for (float& x : v) x = static_cast<float>(rng() % 9) - 4;
    buffers[t].init =
        i == 1 ? BufferSpec::Init::kFill : BufferSpec::Init::kData;
    buffers[t].fill = 0.25;
    buffers[t].data = FloatBytes(v);
  }
  std::vector<scheduler::NodeSpec> nodes;
  auto recent = [&]() {
    const int n = static_cast<int>(buffers.size());
    return n - 1 - static_cast<int>(rng() % std::min(n, 5));
  };
  for (int i = 0; i < num_nodes; ++i) {
    scheduler::NodeSpec node;
    node.name = "n" + std::to_string(i);
    node.cost_us = 1 + rng() % 20;
    if (i % 9 == 4) node.engine = scheduler::Engine::kHost;
    const int x = recent();
    const int y = recent();
    switch (rng() % 4) {
      case 0:
        node.op = "scale";
        node.args = {-0.5f, Use(x, Access::kReadWrite)};
        break;
      case 1:
        node.op = "sub";
        node.args = {Use(x, Access::kRead), Use(y, Access::kRead),
                     Use(tensor(kElems), Access::kWrite)};
        break;
      case 2:
        node.op = "add";
        node.args = {Use(x, Access::kRead), Use(y, Access::kRead),
                     Use(tensor(kElems), Access::kWrite)};
        break;
      default:
        node.op = "add";
        node.args = {Use(x, Access::kRead), Use(y, Access::kRead),
                     Use(tensor(kElems), Access::kWrite)};
        break;
    }
    nodes.push_back(std::move(node));
  }
  buffers.back().output = true;
  buffers[buffers.size() / 2].output = true;
  return std::make_shared<const scheduler::Graph>(
      "temporaries", std::move(buffers), std::move(nodes));
}

// `graph` with every node on a device (none on the host).
std::shared_ptr<const scheduler::Graph> DeviceOnly(
    std::shared_ptr<const scheduler::Graph> graph) {
  std::vector<scheduler::NodeSpec> nodes = graph->nodes();
  for (scheduler::NodeSpec& node : nodes) {
    node.engine = scheduler::Engine::kCompute;
  }
  return std::make_shared<const scheduler::Graph>(
      graph->name(), graph->buffers(), std::move(nodes));
}

std::shared_ptr<const scheduler::Plan> PlanFor(
    const scheduler::Graph& graph, int num_devices,
    scheduler::DevicePolicyKind policy,
    scheduler::MemoryOrderKind order = scheduler::MemoryOrderKind::kSubmitted,
    int max_streams_per_device = 32) {
  scheduler::PlannerOptions options;
  options.num_devices = num_devices;
  options.device_policy = policy;
  options.memory_order = order;
  options.max_streams_per_device = max_streams_per_device;
  options.explain = false;
  absl::StatusOr<scheduler::Plan> plan = scheduler::PlanGraph(graph, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return std::make_shared<const scheduler::Plan>(plan.ok() ? *std::move(plan)
                                                           : scheduler::Plan());
}

// The sum of the buffer copies' sizes the plan places on `device`.
int64_t PlacedBytes(const scheduler::Plan& plan, int device) {
  int64_t bytes = 0;
  for (const scheduler::PlannedBuffer& b : plan.buffers) {
    if (b.device == device) bytes += b.size_bytes;
  }
  return bytes;
}

// Seeds over devices (1 to 3), device policies, issue orders and stream
// caps, so that buffers share memory across streams, devices and the host.
TEST(ExecutorPlacementTest, RandomGraphsGiveTheSameResultsWithAndWithout) {
  constexpr int kDevices = 3;
  Machine placed(/*place=*/true, kDevices);
  Machine separate(/*place=*/false, kDevices);
  bool shared_addresses = false;
  for (uint32_t seed = 1; seed <= 36; ++seed) {
    SCOPED_TRACE(seed);
    auto graph = RandomTemporaries(seed, 32 + seed % 5 * 12);
    const int devices = 1 + seed % kDevices;
    const auto policy = seed % 2 == 0
                            ? scheduler::DevicePolicyKind::kRoundRobin
                            : scheduler::DevicePolicyKind::kLookaheadFinishTime;
    const auto order = seed % 4 < 2 ? scheduler::MemoryOrderKind::kSubmitted
                                    : scheduler::MemoryOrderKind::kMemoryAware;
    auto plan = PlanFor(*graph, devices, policy, order, 1 + seed % 7);
    ASSERT_FALSE(plan->memory.empty());
    for (const scheduler::DeviceMemory& m : plan->memory) {
      if (m.arena_bytes < PlacedBytes(*plan, m.device)) shared_addresses = true;
    }
    Outcome with, without;
    placed.Run(graph, plan, with);
    separate.Run(graph, plan, without);
    ASSERT_TRUE(with.status.ok()) << with.status;
    ASSERT_TRUE(without.status.ok()) << without.status;
    const OutputBytes reference = CpuReference(*graph);
    ASSERT_EQ(with.outputs.size(), reference.size());
    for (const auto& [name, data] : reference) {
      EXPECT_EQ(with.outputs.at(name), without.outputs.at(name)) << name;
      EXPECT_EQ(Floats(with.outputs.at(name)), Floats(data)) << name;
    }
  }
  EXPECT_TRUE(shared_addresses);
  EXPECT_GT(placed.Stats(0).arena_allocations, 0u);
  for (int d = 0; d < kDevices; ++d) {
    EXPECT_EQ(separate.Stats(d).arena_allocations, 0u);
  }
  ExpectNoMemoryHeld(*placed.sim, *placed.executor);
  ExpectNoMemoryHeld(*separate.sim, *separate.executor);
}

TEST(ExecutorPlacementTest, RandomGraphsRunAsDeviceGraphsInTheirArenas) {
  Machine placed(/*place=*/true);
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    auto graph = DeviceOnly(RandomTemporaries(seed));
    auto plan = PlanFor(*graph, 2, scheduler::DevicePolicyKind::kRoundRobin);
    Outcome outcome;
    placed.Run(graph, plan, outcome, LaunchMode::kDeviceGraphs);
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    const OutputBytes reference = CpuReference(*graph);
    ASSERT_EQ(outcome.outputs.size(), reference.size());
    for (const auto& [name, data] : reference) {
      EXPECT_EQ(Floats(outcome.outputs.at(name)), Floats(data)) << name;
    }
  }
  EXPECT_GT(placed.sim->graph_stats().instantiations, 0u);
  EXPECT_EQ(placed.Stats(0).arena_allocations, 6u);
  ExpectNoMemoryHeld(*placed.sim, *placed.executor);
}

// Temporaries before and after a loop, on both devices, with the loop's
// buffers shared with them: the loop's own buffers keep allocations of
// their own (its body runs as a nested job planned apart), the rest lie in
// the arenas.
constexpr char kLoopBetweenTemporaries[] = R"pb(
  name: "loop_between_temporaries"
  buffers { name: "a" size_bytes: 4096 dtype: FLOAT32 fill: 1 }
  buffers { name: "t1" size_bytes: 4096 dtype: FLOAT32 }
  buffers { name: "t2" size_bytes: 4096 dtype: FLOAT32 }
  buffers { name: "t3" size_bytes: 4096 dtype: FLOAT32 }
  buffers { name: "t4" size_bytes: 4096 dtype: FLOAT32 }
  buffers { name: "t5" size_bytes: 4096 dtype: FLOAT32 output: true }
  buffers { name: "x" size_bytes: 4096 dtype: FLOAT32 }
  buffers { name: "i" size_bytes: 4 dtype: FLOAT32 output: true }
  buffers { name: "one" size_bytes: 4 dtype: FLOAT32 fill: 1 }
  buffers { name: "go" size_bytes: 4 dtype: INT32 fill: 1 }
  nodes {
    name: "n1"
    op: "add"
    args { buffer { name: "a" access: READ } }
    args { buffer { name: "a" access: READ } }
    args { buffer { name: "t1" access: WRITE } }
    device: 0
  }
  nodes {
    name: "n2"
    op: "add"
    args { buffer { name: "t1" access: READ } }
    args { buffer { name: "a" access: READ } }
    args { buffer { name: "t2" access: WRITE } }
    device: 1
  }
  nodes {
    name: "n3"
    op: "add"
    args { buffer { name: "t2" access: READ } }
    args { buffer { name: "t2" access: READ } }
    args { buffer { name: "x" access: WRITE } }
    device: 0
  }
  nodes {
    name: "loop"
    while_loop {
      condition: "go"
      max_iterations: 20
      body {
        name: "inc"
        op: "axpy"
        args { f32: 1 }
        args { buffer { name: "one" access: READ } }
        args { buffer { name: "i" access: READ_WRITE } }
      }
      body {
        name: "double"
        op: "scale"
        args { f32: 2 }
        args { buffer { name: "x" access: READ_WRITE } }
      }
      body {
        name: "test"
        op: "less"
        args { buffer { name: "i" access: READ } }
        args { f32: 5 }
        args { buffer { name: "go" access: WRITE } }
      }
    }
  }
  nodes {
    name: "n4"
    op: "add"
    args { buffer { name: "x" access: READ } }
    args { buffer { name: "a" access: READ } }
    args { buffer { name: "t3" access: WRITE } }
    device: 1
  }
  nodes {
    name: "n5"
    op: "add"
    args { buffer { name: "t3" access: READ } }
    args { buffer { name: "t3" access: READ } }
    args { buffer { name: "t4" access: WRITE } }
    device: 0
  }
  nodes {
    name: "n6"
    op: "sub"
    args { buffer { name: "t4" access: READ } }
    args { buffer { name: "a" access: READ } }
    args { buffer { name: "t5" access: WRITE } }
    device: 1
  }
)pb";

// `proto` built for two devices (null if it does not build).
std::shared_ptr<const scheduler::Graph> BuildForTwo(
    const weft::v1::Graph& proto) {
  scheduler::GraphLimits limits;
  limits.num_devices = 2;
  absl::StatusOr<scheduler::Graph> built = scheduler::BuildGraph(proto, limits);
  EXPECT_TRUE(built.ok()) << built.status();
  if (!built.ok()) return nullptr;
  return std::make_shared<const scheduler::Graph>(*std::move(built));
}

// Runs `graph` under `plan` on both machines with control mode `mode`;
// both must succeed with the same outputs, which are returned.
decltype(Outcome::outputs) RunOnBoth(
    Machine& placed, Machine& separate,
    std::shared_ptr<const scheduler::Graph> graph,
    std::shared_ptr<const scheduler::Plan> plan, ControlMode mode) {
  JobOptions options;
  options.control_mode = mode;
  Outcome with, without;
  EXPECT_TRUE(
      placed.executor->Start(graph, plan, with.Callbacks(), options).ok());
  EXPECT_TRUE(
      separate.executor->Start(graph, plan, without.Callbacks(), options).ok());
  EXPECT_TRUE(with.Wait());
  EXPECT_TRUE(without.Wait());
  EXPECT_TRUE(with.status.ok()) << with.status;
  EXPECT_TRUE(without.status.ok()) << without.status;
  EXPECT_EQ(with.outputs, without.outputs);
  return std::move(with.outputs);
}

TEST(ExecutorPlacementTest, ControlNodesRunWithPlacedBuffersAroundThem) {
  weft::v1::Graph proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      kLoopBetweenTemporaries, &proto));
  auto graph = BuildForTwo(proto);
  ASSERT_NE(graph, nullptr);
  auto plan =
      PlanFor(*graph, 2, scheduler::DevicePolicyKind::kLookaheadFinishTime);
  ASSERT_FALSE(plan->memory.empty());
  Machine placed(/*place=*/true);
  Machine separate(/*place=*/false);
  // x = 2 * 3 = 6, doubled 5 times: 192; t3 = 193; t4 = 386; t5 = 385.
  for (const ControlMode mode :
       {ControlMode::kHost, ControlMode::kDevice, ControlMode::kAuto}) {
    SCOPED_TRACE(static_cast<int>(mode));
    const auto outputs = RunOnBoth(placed, separate, graph, plan, mode);
    ASSERT_TRUE(outputs.contains("i") && outputs.contains("t5"));
    EXPECT_EQ(Floats(outputs.at("i"))[0], 5.0f);
    for (float v : Floats(outputs.at("t5"))) EXPECT_EQ(v, 385.0f);
  }
  EXPECT_EQ(placed.Stats(0).arena_allocations, 3u);
  ExpectNoMemoryHeld(*placed.sim, *placed.executor);
  ExpectNoMemoryHeld(*separate.sim, *separate.executor);
}

// LoopWithABodyNodeElsewhere, its loop run once, built and planned for two
// devices.
struct PlannedLoop {
  std::shared_ptr<const scheduler::Graph> graph;
  std::shared_ptr<const scheduler::Plan> plan;
};
PlannedLoop LoopOnceWithABodyNodeElsewhere() {
  weft::v1::Graph proto = ::weft::testing::LoopWithABodyNodeElsewhere();
  EXPECT_EQ(proto.buffers(2).name(), "go");
  proto.mutable_buffers(2)->set_fill(1);
  PlannedLoop planned;
  planned.graph = BuildForTwo(proto);
  if (planned.graph == nullptr) return planned;
  planned.plan = PlanFor(*planned.graph, 2,
                         scheduler::DevicePolicyKind::kLookaheadFinishTime);
  return planned;
}

// An output a loop's body wrote last, on a stream of the body's own, is
// downloaded on a stream the job drains: the job ends after the download
// however long it takes (a paced device whose link to the host moves the
// 1,000 bytes of y in 100 ms), with or without placement.
TEST(ExecutorPlacementTest, OutputsBodiesWroteAreDownloadedBeforeTheJobEnds) {
  const auto [graph, plan] = LoopOnceWithABodyNodeElsewhere();
  ASSERT_NE(graph, nullptr);
  for (const bool place : {true, false}) {
    SCOPED_TRACE(place);
    Machine machine(place, 2, uint64_t{64} << 20, /*time_scale=*/1,
                    /*device_to_host_gbps=*/1e-5);
    Outcome outcome;
    JobOptions options;
    options.control_mode = ControlMode::kHost;  // the body as a nested job
    const absl::Time start = absl::Now();
    ASSERT_TRUE(
        machine.executor->Start(graph, plan, outcome.Callbacks(), options)
            .ok());
    ASSERT_TRUE(outcome.Wait());
    // The download alone lasts 100 ms; a job that did not wait for it ends
    // while it runs.
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    ASSERT_TRUE(outcome.outputs.contains("y"));
    const std::vector<float> y = Floats(outcome.outputs.at("y"));
    EXPECT_EQ(y.size(), 250u);
    for (float v : y) EXPECT_EQ(v, 1.0f);
  }
}

// A loop on device 0 whose body runs `step` (y += x) on device 1: the
// memory plan places x and y on device 1 too, and the body's nested job
// uses those copies, allocating nothing else there.
TEST(ExecutorPlacementTest, BodiesOnAnotherDeviceRunInItsArena) {
  const auto [graph, plan] = LoopOnceWithABodyNodeElsewhere();
  ASSERT_NE(graph, nullptr);
  ASSERT_FALSE(plan->memory.empty());
  ASSERT_EQ(plan->nodes[1].device, 0);
  EXPECT_EQ(PlacedBytes(*plan, 1), 1000000 + 1000);
  Machine placed(/*place=*/true);
  Machine separate(/*place=*/false);
  // (Not kDevice: a body over two devices runs from the host.)
  for (const ControlMode mode : {ControlMode::kHost, ControlMode::kAuto}) {
    SCOPED_TRACE(static_cast<int>(mode));
    const auto outputs = RunOnBoth(placed, separate, graph, plan, mode);
    ASSERT_TRUE(outputs.contains("y"));
    for (float v : Floats(outputs.at("y"))) EXPECT_EQ(v, 1.0f);
  }
  // One arena per job on each device, and no block besides.
  for (int d = 0; d < 2; ++d) {
    const MemoryPoolStats stats = placed.Stats(d);
    EXPECT_EQ(stats.arena_allocations, 2u) << "device " << d;
    EXPECT_EQ(stats.backend_allocations + stats.cache_hits,
              stats.arena_allocations)
        << "device " << d;
  }
  EXPECT_GT(separate.Stats(1).backend_allocations, 0u);
  ExpectNoMemoryHeld(*placed.sim, *placed.executor);
  ExpectNoMemoryHeld(*separate.sim, *separate.executor);
}

// Three 4 KiB tensors and a loop over one of them, on a device of 10 KiB:
// the job fits only with `c` spilled around the loop, and the loop's
// buffers inside the arena (counted by the budget, live to the end).
TEST(ExecutorPlacementTest, LoopBuffersCountInTheBudget) {
  const weft::v1::Graph proto = weft::testing::LoopBetweenTensors(4096);
  scheduler::GraphLimits limits;
  limits.num_devices = 1;
  absl::StatusOr<scheduler::Graph> built = scheduler::BuildGraph(proto, limits);
  ASSERT_TRUE(built.ok()) << built.status();
  const scheduler::Graph graph = *std::move(built);
  constexpr uint64_t kDeviceBytes = 10240;
  for (const int streams : {1, 8}) {
    SCOPED_TRACE(streams);
    scheduler::PlannerOptions options;
    options.num_devices = 1;
    options.explain = false;
    options.max_streams_per_device = streams;
    options.memory_order = scheduler::MemoryOrderKind::kSubmitted;
    options.device_memory_bytes = {static_cast<int64_t>(kDeviceBytes)};
    absl::StatusOr<scheduler::Plan> fitted =
        scheduler::PlanGraph(graph, options);
    ASSERT_TRUE(fitted.ok()) << fitted.status();
    ASSERT_NE(fitted->graph, nullptr);
    ASSERT_EQ(fitted->memory.size(), 1u);
    EXPECT_LE(fitted->memory[0].arena_bytes,
              static_cast<int64_t>(kDeviceBytes));
    EXPECT_GT(fitted->memory[0].spilled_bytes, 0);
    auto run = fitted->graph;
    auto plan = std::make_shared<const scheduler::Plan>(*std::move(fitted));
    Machine placed(/*place=*/true, 1, kDeviceBytes);
    for (const ControlMode mode :
         {ControlMode::kHost, ControlMode::kDevice, ControlMode::kAuto}) {
      SCOPED_TRACE(static_cast<int>(mode));
      JobOptions job;
      job.control_mode = mode;
      Outcome outcome;
      ASSERT_TRUE(
          placed.executor->Start(run, plan, outcome.Callbacks(), job).ok());
      ASSERT_TRUE(outcome.Wait());
      ASSERT_TRUE(outcome.status.ok()) << outcome.status;
      // b = 1 + 2 = 3, doubled to 48, plus c = 6: 54.
      for (float v : Floats(outcome.outputs.at("b"))) EXPECT_EQ(v, 54.0f);
    }
    // Everything the job used lay in its arena: one block per job.
    EXPECT_EQ(placed.Stats(0).backend_allocations, 1u);
    ExpectNoMemoryHeld(*placed.sim, *placed.executor);
  }
}

// A chain of 1 MiB tensors, each computed from the one before: 24 MiB in
// all, 2 MiB live at once.
std::shared_ptr<const scheduler::Graph> LongChain() {
  constexpr int kElems = 1 << 18;
  constexpr int kTensors = 24;
  std::vector<BufferSpec> buffers;
  for (int i = 0; i < kTensors; ++i) {
    BufferSpec spec;
    spec.name = "t" + std::to_string(i);
    spec.size_bytes = kElems * sizeof(float);
    spec.dtype = DType::kFloat32;
    spec.init = i == 0 ? BufferSpec::Init::kFill : BufferSpec::Init::kZero;
    spec.fill = 1.0;
    spec.output = i == kTensors - 1;
    buffers.push_back(std::move(spec));
  }
  std::vector<scheduler::NodeSpec> nodes;
  for (int i = 0; i + 1 < kTensors; ++i) {
    scheduler::NodeSpec node;
    node.name = "double" + std::to_string(i);
    node.op = "add";
    node.args = {Use(i, Access::kRead), Use(i, Access::kRead),
                 Use(i + 1, Access::kWrite)};
    node.cost_us = 10;
    nodes.push_back(std::move(node));
  }
  return std::make_shared<const scheduler::Graph>("chain", std::move(buffers),
                                                  std::move(nodes));
}

TEST(ExecutorPlacementTest, JobLargerThanTheDeviceRunsOnlyWithPlacement) {
  auto graph = LongChain();
  auto plan =
      PlanFor(*graph, 1, scheduler::DevicePolicyKind::kLookaheadFinishTime);
  ASSERT_EQ(plan->memory.size(), 1u);
  EXPECT_LE(plan->memory[0].arena_bytes, 2 << 20);
  constexpr uint64_t kDeviceBytes = 8 << 20;  // a third of the buffers
  {
    Machine placed(/*place=*/true, 1, kDeviceBytes);
    Outcome outcome;
    placed.Run(graph, plan, outcome);
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    const std::vector<float> last = Floats(outcome.outputs.at("t23"));
    ASSERT_EQ(last.size(), size_t{1} << 18);
    EXPECT_EQ(last.front(), static_cast<float>(1 << 23));
    EXPECT_EQ(last.back(), static_cast<float>(1 << 23));
    EXPECT_LE(placed.Stats(0).peak_in_use_bytes, uint64_t{3} << 20);
    ExpectNoMemoryHeld(*placed.sim, *placed.executor);
  }
  {
    Machine separate(/*place=*/false, 1, kDeviceBytes);
    Outcome outcome;
    separate.Run(graph, plan, outcome);
    EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kResourceExhausted,
                                         HasSubstr("out of memory")));
    ExpectNoMemoryHeld(*separate.sim, *separate.executor);
  }
}

TEST(ExecutorPlacementTest,
     ArenaLargerThanTheDeviceFailsNamingItsLargestBuffer) {
  auto graph = LongChain();
  auto plan =
      PlanFor(*graph, 1, scheduler::DevicePolicyKind::kLookaheadFinishTime);
  Machine placed(/*place=*/true, 1, uint64_t{1} << 20);
  Outcome outcome;
  placed.Run(graph, plan, outcome);
  EXPECT_THAT(
      outcome.status,
      StatusIs(
          absl::StatusCode::kResourceExhausted,
          AllOf(HasSubstr("buffer 't0' (first used by node 'double0' on device "
                          "0) and 23 other buffers placed in an arena of"),
                HasSubstr("out of memory"))));
  ExpectNoMemoryHeld(*placed.sim, *placed.executor);
}

// The plan of `graph` under a per-device memory budget: spills and fills
// (scheduler/spill_fitting.h) make it fit.
absl::StatusOr<scheduler::Plan> BudgetPlan(
    const scheduler::Graph& graph, int num_devices,
    scheduler::DevicePolicyKind policy, int64_t budget_bytes,
    scheduler::MemoryOrderKind order = scheduler::MemoryOrderKind::kSubmitted) {
  scheduler::PlannerOptions options;
  options.num_devices = num_devices;
  options.device_policy = policy;
  options.memory_order = order;
  options.explain = false;
  options.memory_budget_bytes.assign(num_devices, budget_bytes);
  return scheduler::PlanGraph(graph, options);
}

int CountMoves(const scheduler::Graph& graph, scheduler::MemoryMove move) {
  int count = 0;
  for (scheduler::NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (graph.memory_move(v) == move) ++count;
  }
  return count;
}

// Budgets of 40% to 90% of each plan's own largest arena: the plans spill
// and fill, their arenas fit, and the results are the CPU reference's.
TEST(ExecutorPlacementTest, SpillsAndFillsKeepResultsUnderABudget) {
  constexpr int kDevices = 3;
  Machine placed(/*place=*/true, kDevices);
  int spills = 0;
  int fills = 0;
  int fitted = 0;
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(seed);
    auto graph = RandomTemporaries(seed, 32 + seed % 5 * 12);
    if (seed % 3 == 0) graph = DeviceOnly(graph);
    const int devices = 1 + seed % kDevices;
    const auto policy = seed % 2 == 0
                            ? scheduler::DevicePolicyKind::kRoundRobin
                            : scheduler::DevicePolicyKind::kLookaheadFinishTime;
    const auto order = seed % 4 < 2 ? scheduler::MemoryOrderKind::kSubmitted
                                    : scheduler::MemoryOrderKind::kMemoryAware;
    auto free_plan = PlanFor(*graph, devices, policy, order);
    int64_t arena = 0;
    for (const scheduler::DeviceMemory& m : free_plan->memory) {
      arena = std::max(arena, m.arena_bytes);
    }
    const int64_t budget = arena * (4 + seed % 6) / 10;
    absl::StatusOr<scheduler::Plan> fitted_plan =
        BudgetPlan(*graph, devices, policy, budget, order);
    if (!fitted_plan.ok()) {
      // Only a node whose own arguments exceed the budget may refuse.
      EXPECT_THAT(fitted_plan.status(),
                  StatusIs(absl::StatusCode::kResourceExhausted));
      continue;
    }
    ++fitted;
    for (const scheduler::DeviceMemory& m : fitted_plan->memory) {
      EXPECT_LE(m.arena_bytes, budget) << "device " << m.device;
      EXPECT_EQ(m.budget_bytes, budget);
    }
    std::shared_ptr<const scheduler::Graph> run = graph;
    if (fitted_plan->graph != nullptr) {
      run = fitted_plan->graph;
      spills += CountMoves(*run, scheduler::MemoryMove::kSpill);
      fills += CountMoves(*run, scheduler::MemoryMove::kFill);
      EXPECT_EQ(run->num_buffers(), graph->num_buffers());
      for (scheduler::NodeId v = 0; v < graph->num_nodes(); ++v) {
        EXPECT_GE(run->FindNode(graph->node(v).name), 0);
      }
    }
    auto plan =
        std::make_shared<const scheduler::Plan>(*std::move(fitted_plan));
    Outcome outcome;
    placed.Run(run, plan, outcome);
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    const OutputBytes reference = CpuReference(*graph);
    ASSERT_EQ(outcome.outputs.size(), reference.size());
    for (const auto& [name, data] : reference) {
      EXPECT_EQ(Floats(outcome.outputs.at(name)), Floats(data)) << name;
    }
  }
  EXPECT_GT(fitted, 20);
  EXPECT_GT(spills, 0);
  EXPECT_GT(fills, 0);
  ExpectNoMemoryHeld(*placed.sim, *placed.executor);
}

// A chain whose every tensor is read again at the end needs them all live
// at once without spills; with the device's memory as the budget, the plan
// spills and fills, and the job runs on a device that holds a third.
TEST(ExecutorPlacementTest, JobNeedingMoreThanTheDeviceRunsWithSpills) {
  constexpr int kTensors = 12;
  constexpr uint64_t kBytes = uint64_t{1} << 20;
  std::vector<BufferSpec> buffers;
  std::vector<scheduler::NodeSpec> nodes;
  for (int i = 0; i < kTensors; ++i) {
    BufferSpec spec;
    spec.name = "t" + std::to_string(i);
    spec.size_bytes = kBytes;
    spec.dtype = DType::kFloat32;
    spec.init = i == 0 ? BufferSpec::Init::kFill : BufferSpec::Init::kZero;
    spec.fill = 1;
    buffers.push_back(std::move(spec));
  }
  BufferSpec sum;
  sum.name = "sum";
  sum.size_bytes = kBytes;
  sum.dtype = DType::kFloat32;
  sum.output = true;
  buffers.push_back(std::move(sum));
  for (int i = 1; i < kTensors; ++i) {
    scheduler::NodeSpec node;
    node.name = "next" + std::to_string(i);
    node.op = "add";
    node.cost_us = 10;
    node.args = {Use(i - 1, Access::kRead), Use(i - 1, Access::kRead),
                 Use(i, Access::kWrite)};
    nodes.push_back(std::move(node));
  }
  for (int i = 0; i < kTensors; ++i) {
    scheduler::NodeSpec node;
    node.name = "accumulate" + std::to_string(i);
    node.op = "add";
    node.cost_us = 10;
    node.args = {Use(kTensors, Access::kRead), Use(i, Access::kRead),
                 Use(kTensors, Access::kWrite)};
    nodes.push_back(std::move(node));
  }
  auto graph = std::make_shared<const scheduler::Graph>(
      "pyramid", std::move(buffers), std::move(nodes));
  constexpr uint64_t kDeviceBytes = 5 * kBytes;
  scheduler::PlannerOptions options;
  options.num_devices = 1;
  options.explain = false;
  options.device_memory_bytes = {static_cast<int64_t>(kDeviceBytes)};
  // Issued as submitted, the chain's tensors outlive the device (the
  // memory-aware order would fit them without a spill).
  options.memory_order = scheduler::MemoryOrderKind::kSubmitted;
  absl::StatusOr<scheduler::Plan> fitted =
      scheduler::PlanGraph(*graph, options);
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  ASSERT_NE(fitted->graph, nullptr);
  ASSERT_EQ(fitted->memory.size(), 1u);
  EXPECT_LE(fitted->memory[0].arena_bytes, static_cast<int64_t>(kDeviceBytes));
  EXPECT_GT(fitted->memory[0].spilled_bytes, 0);
  // Every spill "spill:<buffer>:<k>" comes back as "fill:<buffer>:<k>".
  int spills = 0;
  for (const scheduler::NodeSpec& node : fitted->graph->nodes()) {
    if (node.op != scheduler::kSpillOp) continue;
    ++spills;
    ASSERT_TRUE(absl::StartsWith(node.name, "spill:t")) << node.name;
    EXPECT_GE(fitted->graph->FindNode(absl::StrCat(
                  "fill:", absl::StripPrefix(node.name, "spill:"))),
              0)
        << node.name;
  }
  EXPECT_GT(spills, 0);
  auto run = fitted->graph;
  auto plan = std::make_shared<const scheduler::Plan>(*std::move(fitted));
  Machine placed(/*place=*/true, 1, kDeviceBytes + (kDeviceBytes >> 3));
  Outcome outcome;
  placed.Run(run, plan, outcome);
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  const std::vector<float> total = Floats(outcome.outputs.at("sum"));
  ASSERT_EQ(total.size(), kBytes / sizeof(float));
  // 1 + 2 + 4 + ... + 2^11.
  EXPECT_EQ(total.front(), 4095.0f);
  EXPECT_EQ(total.back(), 4095.0f);
  ExpectNoMemoryHeld(*placed.sim, *placed.executor);
}

TEST(ExecutorPlacementTest, PoolServesOneArenaPerDevicePerJob) {
  Machine placed(/*place=*/true);
  // Device nodes only: every copy has a place.
  auto graph = DeviceOnly(RandomTemporaries(7, 40));
  auto plan = PlanFor(*graph, 2, scheduler::DevicePolicyKind::kRoundRobin);
  ASSERT_EQ(plan->memory.size(), 2u);
  for (int run = 1; run <= 3; ++run) {
    SCOPED_TRACE(run);
    Outcome outcome;
    placed.Run(graph, plan, outcome);
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    for (int d = 0; d < 2; ++d) {
      const MemoryPoolStats stats = placed.Stats(d);
      EXPECT_EQ(stats.arena_allocations, static_cast<uint64_t>(run));
      // One block per job: from the backend the first time, then cached.
      EXPECT_EQ(stats.backend_allocations, 1u);
      EXPECT_EQ(stats.cache_hits, static_cast<uint64_t>(run - 1));
    }
  }
  ExpectNoMemoryHeld(*placed.sim, *placed.executor);
}

TEST(ExecutorPlacementTest, FailedJobGivesItsArenaBack) {
  Machine placed(/*place=*/true);
  auto graph = RandomTemporaries(3);
  auto plan = PlanFor(*graph, 2, scheduler::DevicePolicyKind::kRoundRobin);
  placed.backend->fail_launch_at = 10;
  Outcome outcome;
  placed.Run(graph, plan, outcome);
  EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kInternal,
                                       HasSubstr("launch refused")));
  EXPECT_GT(placed.Stats(0).arena_allocations, 0u);
  ExpectNoMemoryHeld(*placed.sim, *placed.executor);
}

TEST(ExecutorPlacementTest, CancelledJobGivesItsArenaBack) {
  // Paced: the chain's nodes take real time, so the job is still running
  // when it is cancelled.
  Machine placed(/*place=*/true, 1, uint64_t{64} << 20, /*time_scale=*/1);
  std::vector<BufferSpec> buffers;
  std::vector<scheduler::NodeSpec> nodes;
  for (int i = 0; i < 21; ++i) {
    BufferSpec spec;
    spec.name = "t" + std::to_string(i);
    spec.size_bytes = 4096;
    spec.dtype = DType::kFloat32;
    spec.output = i == 20;
    buffers.push_back(std::move(spec));
  }
  for (int i = 0; i < 20; ++i) {
    scheduler::NodeSpec node;
    node.name = "step" + std::to_string(i);
    node.op = "spin";
    node.args = {Use(i, Access::kRead), Use(i + 1, Access::kWrite)};
    node.cost_us = 20000;
    nodes.push_back(std::move(node));
  }
  auto graph = std::make_shared<const scheduler::Graph>(
      "spins", std::move(buffers), std::move(nodes));
  auto plan =
      PlanFor(*graph, 1, scheduler::DevicePolicyKind::kLookaheadFinishTime);
  absl::Notification first_finished;
  Outcome outcome;
  JobCallbacks callbacks = outcome.Callbacks();
  auto record = callbacks.on_node;
  callbacks.on_node = [&, record](NodeId node, NodeEventKind kind,
                                  const absl::Status& s) {
    record(node, kind, s);
    if (node == 0 && kind == NodeEventKind::kFinished) first_finished.Notify();
  };
  const uint64_t id = placed.executor->Start(graph, plan, callbacks).value();
  first_finished.WaitForNotification();
  EXPECT_EQ(placed.Stats(0).arenas_in_use, 1u);
  EXPECT_EQ(placed.Stats(0).arena_bytes,
            static_cast<uint64_t>(plan->memory[0].arena_bytes));
  placed.executor->Cancel(id);
  ASSERT_TRUE(outcome.Wait());
  EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kCancelled));
  ExpectNoMemoryHeld(*placed.sim, *placed.executor);
}

}  // namespace
}  // namespace weft::runtime
