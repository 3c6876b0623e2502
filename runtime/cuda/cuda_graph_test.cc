// Device graphs on real GPUs: CudaBackend::LaunchDeviceGraph and the
// executor's graph path. Every case skips itself without a GPU.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/backend.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/device_graph.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;
using ::testing::Each;

constexpr int kN = 4096;
constexpr uint64_t kBytes = kN * sizeof(float);

KernelLaunch Fill(DevicePtr ptr, uint64_t bytes, double value) {
  KernelLaunch launch;
  launch.op = "fill";
  launch.args = {DeviceBufferArg{ptr, bytes, DType::kFloat32, Access::kWrite},
                 value};
  return launch;
}

KernelLaunch Axpy(float a, DevicePtr x, DevicePtr y) {
  KernelLaunch launch;
  launch.op = "axpy";
  launch.args = {
      a, DeviceBufferArg{x, kBytes, DType::kFloat32, Access::kRead},
      DeviceBufferArg{y, kBytes, DType::kFloat32, Access::kReadWrite}};
  return launch;
}

// y = a * x0 + y0, all on the device, in one graph.
DeviceGraph AxpyGraph(DevicePtr x, DevicePtr y, float x0, float y0, float a) {
  DeviceGraph g;
  g.device = x.device;
  const int fx = g.AddKernel(Fill(x, kBytes, x0), {});
  const int fy = g.AddKernel(Fill(y, kBytes, y0), {});
  g.AddKernel(Axpy(a, x, y), {fx, fy});
  return g;
}

class CudaGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
        CudaBackend::Create();
    if (!backend.ok()) {
      ASSERT_EQ(backend.status().code(), absl::StatusCode::kUnavailable)
          << backend.status();
      GTEST_SKIP() << backend.status().message();
    }
    backend_ = std::move(backend).value();
    stream_ = backend_->CreateStream(0).value();
  }

  DevicePtr Alloc(uint64_t bytes, int device = 0) {
    return backend_->Allocate(device, bytes).value();
  }

  std::vector<float> Read(DevicePtr ptr, uint64_t bytes) {
    std::vector<float> out(bytes / sizeof(float));
    EXPECT_TRUE(backend_->SynchronizeStream(stream_).ok());
    EXPECT_TRUE(
        backend_->CopyDeviceToHost(out.data(), ptr, bytes, stream_).ok());
    EXPECT_TRUE(backend_->SynchronizeStream(stream_).ok());
    return out;
  }

  std::unique_ptr<CudaBackend> backend_;
  StreamHandle stream_;
};

TEST_F(CudaGraphTest, CachedRelaunchMatchesFirstLaunch) {
  const DevicePtr x = Alloc(kBytes);
  const DevicePtr y = Alloc(kBytes);
  ASSERT_TRUE(
      backend_->LaunchDeviceGraph(AxpyGraph(x, y, 2, 1, 3), stream_).ok());
  EXPECT_THAT(Read(y, kBytes), Each(7.0f));
  CudaBackend::GraphCacheStats stats = backend_->graph_cache_stats();
  EXPECT_EQ(stats.instantiations, 1u);
  EXPECT_EQ(stats.cache_hits, 0u);

  // Same parameters: launched as is.
  ASSERT_TRUE(
      backend_->LaunchDeviceGraph(AxpyGraph(x, y, 2, 1, 3), stream_).ok());
  EXPECT_THAT(Read(y, kBytes), Each(7.0f));
  stats = backend_->graph_cache_stats();
  EXPECT_EQ(stats.cache_hits, 1u);
  EXPECT_EQ(stats.updates, 0u);

  // New buffers and scalars: updated in place, not instantiated again.
  const DevicePtr x2 = Alloc(kBytes);
  const DevicePtr y2 = Alloc(kBytes);
  ASSERT_TRUE(
      backend_->LaunchDeviceGraph(AxpyGraph(x2, y2, 5, -1, 0.5f), stream_)
          .ok());
  EXPECT_THAT(Read(y2, kBytes), Each(1.5f));
  EXPECT_THAT(Read(y, kBytes), Each(7.0f));
  stats = backend_->graph_cache_stats();
  EXPECT_EQ(stats.cache_hits, 2u);
  EXPECT_EQ(stats.updates + stats.instantiations, 2u);
}

// reduce_sum of a large input takes stream-ordered scratch memory: captured
// as memory nodes.
TEST_F(CudaGraphTest, LargeReductionInAGraph) {
  const int n = 3 * 1000 * 1000;
  const DevicePtr x = Alloc(uint64_t{4} * n);
  const DevicePtr out = Alloc(4);
  DeviceGraph g;
  const int fill = g.AddKernel(Fill(x, uint64_t{4} * n, 0.5), {});
  KernelLaunch sum;
  sum.op = "reduce_sum";
  sum.args = {
      DeviceBufferArg{x, uint64_t{4} * n, DType::kFloat32, Access::kRead},
      DeviceBufferArg{out, 4, DType::kFloat32, Access::kWrite}};
  g.AddKernel(sum, {fill});
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(backend_->LaunchDeviceGraph(g, stream_).ok());
    EXPECT_FLOAT_EQ(Read(out, 4)[0], 0.5f * n);
  }
}

TEST_F(CudaGraphTest, CrossDeviceEventsOrderGraphs) {
  if (backend_->device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  const StreamHandle s1 = backend_->CreateStream(1).value();
  const EventHandle ready = backend_->CreateEvent(0).value();
  const DevicePtr a = Alloc(kBytes, 0);
  const DevicePtr b = Alloc(kBytes, 1);
  DeviceGraph g0;
  g0.device = 0;
  KernelLaunch spin;
  spin.op = "spin";
  spin.cost_us = 2000;
  const int slow = g0.AddKernel(spin, {});
  const int fill = g0.AddKernel(Fill(a, kBytes, 4), {slow});
  g0.AddEventRecord(ready, {fill});
  DeviceGraph g1;
  g1.device = 1;
  const int wait = g1.AddEventWait(ready, {});
  g1.AddDeviceCopy(b, a, kBytes, {wait});
  ASSERT_TRUE(backend_->LaunchDeviceGraph(g0, stream_).ok());
  ASSERT_TRUE(backend_->LaunchDeviceGraph(g1, s1).ok());
  std::vector<float> got(kN);
  ASSERT_TRUE(backend_->SynchronizeStream(s1).ok());
  ASSERT_TRUE(backend_->CopyDeviceToHost(got.data(), b, kBytes, s1).ok());
  ASSERT_TRUE(backend_->SynchronizeStream(s1).ok());
  EXPECT_THAT(got, Each(4.0f));
}

TEST_F(CudaGraphTest, ExecutorRunsJobsAsGraphs) {
  using executor_testing::Floats;
  using executor_testing::Outcome;
  using executor_testing::TestJob;
  using executor_testing::Use;
  Executor::Options options;
  options.backend = backend_.get();
  std::unique_ptr<Executor> executor = Executor::Create(options).value();
  for (float value : {2.0f, -3.0f}) {
    TestJob job(2, {0, 0});
    const int x = job.Buffer("x", kBytes, DType::kFloat32);
    const int y = job.Buffer("y", kBytes, DType::kFloat32,
                             scheduler::BufferSpec::Init::kFill, 1, "", true);
    job.Node("fill", "fill", {Use(x, Access::kWrite), double{value}}, 0, {}, 0);
    job.Node("axpy", "axpy",
             {2.0f, Use(x, Access::kRead), Use(y, Access::kReadWrite)}, 1, {0});
    Outcome outcome;
    ASSERT_TRUE(executor
                    ->Start(job.graph(), job.plan(), outcome.Callbacks(),
                            JobOptions{LaunchMode::kAuto})
                    .ok());
    ASSERT_TRUE(outcome.Wait());
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    EXPECT_THAT(Floats(outcome.outputs.at("y")), Each(2 * value + 1));
  }
  const CudaBackend::GraphCacheStats stats = backend_->graph_cache_stats();
  EXPECT_EQ(stats.instantiations + stats.cache_hits, 2u);
  EXPECT_EQ(stats.cache_hits, 1u);
}

// A running kernel cannot be stopped: a cancelled job is reported at once
// and its streams stay fenced off until the GPU has finished its work.
TEST_F(CudaGraphTest, CancelAbandonsRunningWorkBehindFencedStreams) {
  using executor_testing::Outcome;
  using executor_testing::TestJob;
  EXPECT_FALSE(backend_->interrupts_aborted_work());
  Executor::Options options;
  options.backend = backend_.get();
  std::unique_ptr<Executor> executor = Executor::Create(options).value();
  for (LaunchMode mode : {LaunchMode::kStreams, LaunchMode::kDeviceGraphs}) {
    TestJob job(1, {0});
    job.Node("long", "spin", {}, 0, {}, -1, 3e6);  // 3 s on the GPU
    Outcome outcome;
    const absl::Time start = absl::Now();
    const uint64_t run = executor
                             ->Start(job.graph(), job.plan(),
                                     outcome.Callbacks(), JobOptions{mode})
                             .value();
    absl::SleepFor(absl::Milliseconds(50));
    executor->Cancel(run);
    ASSERT_TRUE(outcome.Wait());
    EXPECT_LT(absl::Now() - start, absl::Seconds(2));
    EXPECT_EQ(outcome.status.code(), absl::StatusCode::kCancelled);
    EXPECT_GE(executor->Load()[0].streams_fenced, 1);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (executor->Load()[0].streams_fenced > 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_EQ(executor->Load()[0].streams_fenced, 0);
    EXPECT_EQ(executor->Load()[0].streams_busy, 0);
    EXPECT_GE(absl::Now() - start, absl::Seconds(3));
  }
}

}  // namespace
}  // namespace weft::runtime
