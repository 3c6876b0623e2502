// Jobs issued as device graphs (LaunchMode::kDeviceGraphs) on the
// simulator: the same results as node by node, graphs relaunched from the
// cache, faults and cancellation confined to their job.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device_graph.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/forwarding_backend.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/ops/test_kernels.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/planner.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using namespace ::weft::runtime::executor_testing;  // NOLINT: test helpers
using ::testing::AllOf;
using ::weft::testing::StatusIs;

constexpr double kInfinite = std::numeric_limits<double>::infinity();
constexpr int kN = 256;

struct GraphKernels : BlockAndBoomKernels {
  GraphKernels() : BlockAndBoomKernels(absl::DataLossError("bits fell out")) {}
};

// Two devices taking turns, three streams, events both ways, a buffer with
// initial data, fills, coherence copies in both directions.
// With `slow`, 2 ms spins lead on each device, so that any missing wait
// reads stale data on a paced backend.
TestJob Mixed(bool slow = false) {
  TestJob job(3, {0, 1, 0});
  std::vector<float> a0(kN);
  for (int i = 0; i < kN; ++i) a0[i] = static_cast<float>(i);
  const uint64_t bytes = kN * sizeof(float);
  const int a = job.Buffer("a", bytes, DType::kFloat32, BufferSpec::Init::kData,
                           0, FloatBytes(a0));
  const int b =
      job.Buffer("b", bytes, DType::kFloat32, BufferSpec::Init::kFill, 2);
  const int c = job.Buffer("c", bytes, DType::kFloat32, BufferSpec::Init::kZero,
                           0, "", true);
  const int d = job.Buffer("d", bytes, DType::kFloat32, BufferSpec::Init::kZero,
                           0, "", true);
  const int e = job.Buffer("e", bytes, DType::kFloat32, BufferSpec::Init::kZero,
                           0, "", true);
  const int sum = job.Buffer("sum", 4, DType::kFloat32, BufferSpec::Init::kZero,
                             0, "", true);
  if (slow) {
    job.Node("slow0", "spin", {}, 0, {}, -1, 2000);
    job.Node("slow1", "spin", {}, 1, {}, -1, 2000);
  }
  job.Node("scale_a", "scale", {2.0f, Use(a, Access::kReadWrite)}, 0);
  job.Node("axpy_c", "axpy",
           {3.0f, Use(b, Access::kRead), Use(c, Access::kReadWrite)}, 1, {}, 0);
  job.Node("fill_e", "fill", {Use(e, Access::kWrite), 5.0}, 2, {}, 1);
  job.Node(
      "add_d", "add",
      {Use(a, Access::kRead), Use(c, Access::kRead), Use(d, Access::kWrite)}, 0,
      {0}, 2);
  job.Node("scale_d", "scale", {0.5f, Use(d, Access::kReadWrite)}, 1, {2}, 3);
  job.Node(
      "add_e", "add",
      {Use(d, Access::kRead), Use(e, Access::kRead), Use(e, Access::kWrite)}, 2,
      {1, 3});
  job.Node("sum_e", "reduce_sum",
           {Use(e, Access::kRead), Use(sum, Access::kWrite)}, 2);
  return job;
}

class ExecutorGraphTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(0); }
  void Make(double time_scale) {
    executor_.reset();
    SimBackend::Options options;
    options.num_devices = 2;
    options.memory_bytes = 64 << 20;
    options.host_to_device_gbps = kInfinite;
    options.device_to_host_gbps = kInfinite;
    options.device_to_device_gbps = kInfinite;
    options.time_scale = time_scale;
    options.kernels = &kernels_.table;
    backend_ = SimBackend::Create(options).value();
    Executor::Options exec;
    exec.backend = backend_.get();
    exec.max_streams_per_device = 8;
    executor_ = Executor::Create(exec).value();
  }
  void TearDown() override {
    if (!kernels_.release.HasBeenNotified()) kernels_.release.Notify();
    executor_.reset();
    backend_.reset();
  }

  uint64_t Run(const TestJob& job, Outcome& outcome, LaunchMode mode,
               bool traced = false) {
    absl::StatusOr<uint64_t> run = executor_->Start(
        job.graph(), job.plan(), outcome.Callbacks(traced), JobOptions{mode});
    EXPECT_TRUE(run.ok()) << run.status();
    return run.value_or(0);
  }

  void ExpectNothingHeld() {
    ExpectNoMemoryHeld(*backend_, *executor_);
    for (int d = 0; d < 2; ++d) {
      EXPECT_EQ(executor_->Load()[d].streams_busy, 0) << "device " << d;
    }
  }

  GraphKernels kernels_;
  std::unique_ptr<SimBackend> backend_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(ExecutorGraphTest, PipelineRunsAsGraphsAndRelaunchesFromTheCache) {
  Outcome first;
  Run(VectorPipeline(2), first, LaunchMode::kDeviceGraphs);
  ASSERT_TRUE(first.Wait());
  ExpectPipelineResult(first, 2);
  EXPECT_EQ(first.CountOf(NodeEventKind::kStarted), 3);
  EXPECT_EQ(first.CountOf(NodeEventKind::kFinished), 3);
  // Device 0, then 1, then 0 again: three graphs.
  StreamGraphRunner::Stats stats = backend_->graph_stats();
  EXPECT_EQ(stats.instantiations, 3u);
  EXPECT_EQ(stats.cache_hits, 0u);

  // The same shape with another fill value: every graph comes from the
  // cache, with the new scalar (and whatever buffers the pool hands out).
  Outcome second;
  Run(VectorPipeline(-1.5f), second, LaunchMode::kDeviceGraphs);
  ASSERT_TRUE(second.Wait());
  ExpectPipelineResult(second, -1.5f);
  stats = backend_->graph_stats();
  EXPECT_EQ(stats.instantiations, 3u);
  EXPECT_EQ(stats.cache_hits, 3u);
  ExpectNothingHeld();
}

class ExecutorGraphPacedTest : public ExecutorGraphTest,
                               public ::testing::WithParamInterface<bool> {};

// Unpaced, and paced with slow producers.
TEST_P(ExecutorGraphPacedTest, MatchesTheStreamPath) {
  const bool slow = GetParam();
  Make(slow ? 1 : 0);
  Outcome streams, graphs;
  Run(Mixed(slow), streams, LaunchMode::kStreams);
  Run(Mixed(slow), graphs, LaunchMode::kDeviceGraphs);
  ASSERT_TRUE(streams.Wait());
  ASSERT_TRUE(graphs.Wait());
  ASSERT_TRUE(streams.status.ok()) << streams.status;
  ASSERT_TRUE(graphs.status.ok()) << graphs.status;
  EXPECT_GT(backend_->graph_stats().instantiations, 0u);
  ASSERT_EQ(graphs.outputs.size(), 4u);
  for (const char* name : {"c", "d", "e", "sum"}) {
    EXPECT_EQ(graphs.outputs.at(name), streams.outputs.at(name)) << name;
  }
  // And both are right: d = (2i + 6) / 2, e = d + 5.
  const std::vector<float> e = Floats(graphs.outputs.at("e"));
  double expected_sum = 0;
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(e[i], static_cast<float>(i + 8)) << i;
    expected_sum += i + 8;
  }
  EXPECT_EQ(Floats(graphs.outputs.at("sum"))[0],
            static_cast<float>(expected_sum));
  ExpectNothingHeld();
}

INSTANTIATE_TEST_SUITE_P(Pacing, ExecutorGraphPacedTest,
                         ::testing::Values(false, true));

// Random graphs of float ops over shared buffers, planned by the planner
// round-robin over both devices (so devices take many turns): graphs give
// the stream path's outputs bit for bit.
std::shared_ptr<const scheduler::Graph> RandomFloatGraph(
    uint32_t seed, bool varied_costs = false) {
  std::mt19937 rng(seed);
  constexpr int kBuffers = 8;
  constexpr int kElems = 64;
  std::vector<BufferSpec> buffers;
  for (int b = 0; b < kBuffers; ++b) {
    std::vector<float> v(kElems);
    for (float& x : v) x = static_cast<float>(rng() % 17) - 8;
    BufferSpec spec;
    spec.name = "b" + std::to_string(b);
    spec.size_bytes = kElems * sizeof(float);
    spec.dtype = DType::kFloat32;
    spec.init = b % 3 == 0 ? BufferSpec::Init::kFill : BufferSpec::Init::kData;
    spec.fill = b;
    spec.data = FloatBytes(v);
    spec.output = true;
    buffers.push_back(std::move(spec));
  }
  std::vector<scheduler::NodeSpec> nodes;
  for (int i = 0; i < 40; ++i) {
    const int x = static_cast<int>(rng() % kBuffers);
    int y = static_cast<int>(rng() % kBuffers);
    if (y == x) y = (y + 1) % kBuffers;
    int z = static_cast<int>(rng() % kBuffers);
    if (z == x || z == y) z = (std::max(x, y) + 1) % kBuffers;
    if (z == x || z == y) z = (z + 1) % kBuffers;
    scheduler::NodeSpec node;
    node.name = "n" + std::to_string(i);
    node.cost_us = varied_costs ? 50 + static_cast<double>(rng() % 450) : 5;
    switch (rng() % 3) {
      case 0:
        node.op = "axpy";
        node.args = {0.5f, Use(x, Access::kRead), Use(y, Access::kReadWrite)};
        break;
      case 1:
        node.op = "add";
        node.args = {Use(x, Access::kRead), Use(y, Access::kRead),
                     Use(z, Access::kWrite)};
        break;
      default:
        node.op = "scale";
        node.args = {-1.5f, Use(x, Access::kReadWrite)};
        break;
    }
    nodes.push_back(std::move(node));
  }
  return std::make_shared<const scheduler::Graph>("random", std::move(buffers),
                                                  std::move(nodes));
}

TEST_F(ExecutorGraphTest, RandomPlannedGraphsMatchTheStreamPath) {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    auto graph = RandomFloatGraph(seed);
    scheduler::PlannerOptions options;
    options.num_devices = 2;
    options.device_policy = scheduler::DevicePolicyKind::kRoundRobin;
    options.explain = false;
    absl::StatusOr<scheduler::Plan> plan =
        scheduler::PlanGraph(*graph, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto shared = std::make_shared<const scheduler::Plan>(*std::move(plan));
    Outcome streams, graphs;
    JobCallbacks a = streams.Callbacks();
    JobCallbacks b = graphs.Callbacks();
    ASSERT_TRUE(executor_
                    ->Start(graph, shared, std::move(a),
                            JobOptions{LaunchMode::kStreams})
                    .ok());
    ASSERT_TRUE(executor_
                    ->Start(graph, shared, std::move(b),
                            JobOptions{LaunchMode::kDeviceGraphs})
                    .ok());
    ASSERT_TRUE(streams.Wait());
    ASSERT_TRUE(graphs.Wait());
    ASSERT_TRUE(streams.status.ok()) << streams.status;
    ASSERT_TRUE(graphs.status.ok()) << graphs.status;
    const OutputBytes reference = CpuReference(*graph);
    ASSERT_EQ(streams.outputs.size(), reference.size());
    ASSERT_EQ(graphs.outputs.size(), reference.size());
    for (const auto& [name, data] : reference) {
      EXPECT_EQ(Floats(streams.outputs.at(name)), Floats(data))
          << "streams, " << name;
      EXPECT_EQ(Floats(graphs.outputs.at(name)), Floats(data))
          << "graphs, " << name;
    }
  }
  EXPECT_GT(backend_->graph_stats().instantiations, 6u);
  ExpectNothingHeld();
}

// The same on paced devices, planned by the default policy over three
// devices (eager copies, devices taking turns, graphs waiting on each other
// and on uploads through events): kernels take real time, so a missing wait
// reads stale data.
TEST_F(ExecutorGraphTest, RandomPlannedGraphsMatchOnPacedDevices) {
  executor_.reset();
  SimBackend::Options options;
  options.num_devices = 3;
  options.memory_bytes = 64 << 20;
  options.time_scale = 1;
  backend_ = SimBackend::Create(options).value();
  Executor::Options exec;
  exec.backend = backend_.get();
  executor_ = Executor::Create(exec).value();
  int with_copies = 0;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(seed);
    auto graph = RandomFloatGraph(seed, /*varied_costs=*/true);
    scheduler::PlannerOptions planner;
    planner.num_devices = 3;
    planner.explain = false;
    absl::StatusOr<scheduler::Plan> plan =
        scheduler::PlanGraph(*graph, planner);
    ASSERT_TRUE(plan.ok()) << plan.status();
    if (!plan->copies.empty()) ++with_copies;
    auto shared = std::make_shared<const scheduler::Plan>(*std::move(plan));
    Outcome outcome;
    ASSERT_TRUE(executor_
                    ->Start(graph, shared, outcome.Callbacks(),
                            JobOptions{LaunchMode::kDeviceGraphs})
                    .ok());
    ASSERT_TRUE(outcome.Wait());
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    const OutputBytes reference = CpuReference(*graph);
    ASSERT_EQ(outcome.outputs.size(), reference.size());
    for (const auto& [name, data] : reference) {
      EXPECT_EQ(Floats(outcome.outputs.at(name)), Floats(data)) << name;
    }
  }
  EXPECT_GT(backend_->graph_stats().instantiations, 8u);
  EXPECT_GT(with_copies, 0);
  ExpectNothingHeld();
}

TEST_F(ExecutorGraphTest, AutoIssuesNodeByNodeOnTheSimulator) {
  Outcome outcome;
  Run(VectorPipeline(2), outcome, LaunchMode::kAuto);
  ASSERT_TRUE(outcome.Wait());
  ExpectPipelineResult(outcome, 2);
  EXPECT_EQ(backend_->graph_stats().instantiations, 0u);
}

TEST_F(ExecutorGraphTest, HostNodesFallBackToStreams) {
  TestJob job(2, {0, 0});
  job.HostStream(1);
  const int x = job.Buffer("x", 16, DType::kFloat32, BufferSpec::Init::kZero, 0,
                           "", true);
  job.Node("fill", "fill", {Use(x, Access::kWrite), 4.0}, 0, {}, 0);
  job.Node("scale", "scale", {2.0f, Use(x, Access::kReadWrite)}, 1, {0});
  Outcome outcome;
  Run(job, outcome, LaunchMode::kDeviceGraphs);
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_THAT(Floats(outcome.outputs.at("x")), ::testing::Each(8.0f));
  EXPECT_EQ(backend_->graph_stats().instantiations, 0u);
  ExpectNothingHeld();
}

// A backend whose graphs cannot be built.
class NoGraphsBuilt : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status PrepareDeviceGraph(const DeviceGraph&) override {
    ++prepared;
    return absl::InternalError("cannot build");
  }
  std::atomic<int> prepared{0};
};

TEST_F(ExecutorGraphTest, GraphsThatCannotBeBuiltFallBackToStreams) {
  NoGraphsBuilt wrapper(backend_.get());
  Executor::Options exec;
  exec.backend = &wrapper;
  std::unique_ptr<Executor> executor = Executor::Create(exec).value();
  Outcome outcome;
  TestJob job = VectorPipeline(2);
  ASSERT_TRUE(executor
                  ->Start(job.graph(), job.plan(), outcome.Callbacks(),
                          JobOptions{LaunchMode::kDeviceGraphs})
                  .ok());
  ASSERT_TRUE(outcome.Wait());
  ExpectPipelineResult(outcome, 2);
  EXPECT_GE(wrapper.prepared.load(), 1);
  EXPECT_EQ(backend_->graph_stats().instantiations, 0u);
}

// A backend that counts the host bytes its uploads read.
class UploadCounter : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status CopyHostToDevice(DevicePtr dst, const void* src, uint64_t bytes,
                                StreamHandle stream) override {
    host_bytes += bytes;
    return ForwardingBackend::CopyHostToDevice(dst, src, bytes, stream);
  }
  absl::Status CopyHostToDevicePadded(DevicePtr dst, const void* src,
                                      uint64_t src_bytes, uint64_t bytes,
                                      StreamHandle stream) override {
    host_bytes += src_bytes;
    return ForwardingBackend::CopyHostToDevicePadded(dst, src, src_bytes, bytes,
                                                     stream);
  }
  std::atomic<uint64_t> host_bytes{0};
};

// Records the parameters (addresses, scalars, events) of every graph it
// launches.
class GraphLaunchRecorder : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status LaunchDeviceGraph(const DeviceGraph& graph,
                                 StreamHandle stream) override {
    {
      absl::MutexLock lock(&mu);
      parameters.push_back(DeviceGraphParameters(graph));
    }
    return ForwardingBackend::LaunchDeviceGraph(graph, stream);
  }
  absl::Mutex mu;
  std::vector<std::string> parameters ABSL_GUARDED_BY(mu);
};

// The same job run again, one after the other, launches its graphs with
// the same parameters: the pools hand it the same memory and the same
// events (in the same order), so a CUDA graph relaunches without being
// captured and updated again.
TEST_F(ExecutorGraphTest, AJobRunAgainRelaunchesItsGraphsUnchanged) {
  GraphLaunchRecorder recorder(backend_.get());
  Executor::Options exec;
  exec.backend = &recorder;
  std::unique_ptr<Executor> executor = Executor::Create(exec).value();
  // Events left free by another job first, so that the pool holds more
  // than the pipeline needs.
  for (int run = 0; run < 3; ++run) {
    Outcome outcome;
    const TestJob job = run == 0 ? Mixed() : VectorPipeline(2);
    ASSERT_TRUE(executor
                    ->Start(job.graph(), job.plan(), outcome.Callbacks(),
                            JobOptions{LaunchMode::kDeviceGraphs})
                    .ok());
    ASSERT_TRUE(outcome.Wait());
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  }
  std::vector<std::string> p;
  {
    absl::MutexLock lock(&recorder.mu);
    p = recorder.parameters;
  }
  ASSERT_GE(p.size(), 6u);
  const size_t n = p.size();
  // The pipeline's three graphs, run twice.
  for (size_t g = 0; g < 3; ++g) {
    EXPECT_EQ(p[n - 6 + g], p[n - 3 + g]) << "graph " << g;
  }
}

// Initial data shorter than its buffer: in either launch mode the upload
// reads the data alone from the host and leaves the zeros to the device.
TEST_F(ExecutorGraphTest, UploadsReadOnlyTheInitialData) {
  for (LaunchMode mode : {LaunchMode::kStreams, LaunchMode::kDeviceGraphs}) {
    SCOPED_TRACE(static_cast<int>(mode));
    UploadCounter counter(backend_.get());
    Executor::Options exec;
    exec.backend = &counter;
    std::unique_ptr<Executor> executor = Executor::Create(exec).value();
    TestJob job(1, {0});
    const int big = job.Buffer("big", 8 << 20, DType::kFloat32,
                               BufferSpec::Init::kData, 0, FloatBytes({1, 2}));
    const int total = job.Buffer("total", 4, DType::kFloat32,
                                 BufferSpec::Init::kZero, 0, "", true);
    job.Node("sum", "reduce_sum",
             {Use(big, Access::kRead), Use(total, Access::kWrite)}, 0);
    Outcome outcome;
    ASSERT_TRUE(executor
                    ->Start(job.graph(), job.plan(), outcome.Callbacks(),
                            JobOptions{mode})
                    .ok());
    ASSERT_TRUE(outcome.Wait());
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    EXPECT_THAT(Floats(outcome.outputs.at("total")),
                ::testing::ElementsAre(3.0f));
    EXPECT_EQ(counter.host_bytes.load(), 2 * sizeof(float));
  }
}

TEST_F(ExecutorGraphTest, FaultFailsOnlyItsJob) {
  TestJob bad(1, {0});
  bad.Node("spin", "spin", {}, 0);
  bad.Node("boom", "boom", {}, 0);
  bad.Node("after", "spin", {}, 0);
  Outcome bad_outcome, good_outcome;
  Run(bad, bad_outcome, LaunchMode::kDeviceGraphs);
  Run(VectorPipeline(3), good_outcome, LaunchMode::kDeviceGraphs);
  ASSERT_TRUE(bad_outcome.Wait());
  ASSERT_TRUE(good_outcome.Wait());
  EXPECT_THAT(bad_outcome.status,
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("device graph on device 0"),
                             HasSubstr("bits fell out"))));
  EXPECT_EQ(bad_outcome.failed_node, -1);
  EXPECT_EQ(bad_outcome.CountOf(NodeEventKind::kFinished), 0);
  ExpectPipelineResult(good_outcome, 3);
  ExpectNothingHeld();
}

TEST_F(ExecutorGraphTest, CancelStopsAGraphJob) {
  TestJob job(1, {0});
  const int x = job.Buffer("x", 16, DType::kFloat32, BufferSpec::Init::kZero, 0,
                           "", true);
  job.Node("hold", "block", {}, 0);
  job.Node("fill", "fill", {Use(x, Access::kWrite), 1.0}, 0);
  Outcome outcome;
  const uint64_t run = Run(job, outcome, LaunchMode::kDeviceGraphs);
  kernels_.started.WaitForNotification();
  executor_->Cancel(run);
  // Let the cancel land before the blocking kernel returns: the fill
  // behind it is then skipped.
  TestJob spin(1, {1});
  spin.Node("spin", "spin", {}, 0);
  Outcome probe;
  Run(spin, probe, LaunchMode::kStreams);
  ASSERT_TRUE(probe.Wait());
  kernels_.release.Notify();
  ASSERT_TRUE(outcome.Wait());
  EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kCancelled,
                                       HasSubstr("job cancelled")));
  EXPECT_TRUE(outcome.outputs.empty());
  ExpectNothingHeld();
}

TEST_F(ExecutorGraphTest, TraceHasOneSpanPerGraph) {
  Outcome outcome;
  Run(VectorPipeline(2), outcome, LaunchMode::kDeviceGraphs, /*traced=*/true);
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  ASSERT_EQ(outcome.on_trace_calls, 1);
  int graphs = 0;
  for (const TraceSpan& span : outcome.trace.spans)
    graphs += span.op == "graph";
  EXPECT_EQ(graphs, 3);
}

}  // namespace
}  // namespace weft::runtime
