// StreamGraphRunner through the simulator's Backend::LaunchDeviceGraph.
#include "runtime/stream_graph_runner.h"

#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device_graph.h"
#include "runtime/ops/test_kernels.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

constexpr double kInfinite = std::numeric_limits<double>::infinity();
constexpr uint64_t kBytes = 16 * sizeof(float);

using TestKernels = BlockAndBoomKernels;

std::unique_ptr<SimBackend> MakeBackend(const CpuKernelTable* kernels,
                                        double time_scale = 0) {
  SimBackend::Options options;
  options.num_devices = 2;
  options.memory_bytes = 1 << 20;
  options.host_to_device_gbps = kInfinite;
  options.device_to_host_gbps = kInfinite;
  options.device_to_device_gbps = kInfinite;
  options.time_scale = time_scale;
  options.kernels = kernels;
  auto backend = SimBackend::Create(std::move(options));
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(backend).value();
}

KernelLaunch Fill(DevicePtr ptr, float value) {
  KernelLaunch launch;
  launch.op = "fill";
  launch.args = {DeviceBufferArg{ptr, kBytes, DType::kFloat32, Access::kWrite},
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

KernelLaunch Op(std::string op, double cost_us = 0) {
  KernelLaunch launch;
  launch.op = std::move(op);
  launch.cost_us = cost_us;
  return launch;
}

// y = a * x + y with x filled with `x0` and y with `y0`, all in one graph.
DeviceGraph AxpyGraph(DevicePtr x, DevicePtr y, float x0, float y0, float a) {
  DeviceGraph g;
  g.device = x.device;
  const int fx = g.AddKernel(Fill(x, x0), {});
  const int fy = g.AddKernel(Fill(y, y0), {});
  g.AddKernel(Axpy(a, x, y), {fx, fy});
  return g;
}

std::vector<float> Download(SimBackend& backend, DevicePtr ptr,
                            StreamHandle stream) {
  std::vector<float> out(kBytes / sizeof(float));
  EXPECT_TRUE(backend.CopyDeviceToHost(out.data(), ptr, kBytes, stream).ok());
  EXPECT_TRUE(backend.SynchronizeStream(stream).ok());
  return out;
}

TEST(StreamGraphRunnerTest, RelaunchWithNewParametersHitsTheCache) {
  auto backend = MakeBackend(nullptr);
  const StreamHandle stream = *backend->CreateStream(0);
  const DevicePtr x = *backend->Allocate(0, kBytes);
  const DevicePtr y = *backend->Allocate(0, kBytes);
  ASSERT_TRUE(
      backend->LaunchDeviceGraph(AxpyGraph(x, y, 2, 1, 3), stream).ok());
  EXPECT_THAT(Download(*backend, y, stream), ::testing::Each(7.0f));

  // Same shape, other buffers and scalars: updated in place, not rebuilt.
  const DevicePtr x2 = *backend->Allocate(0, kBytes);
  const DevicePtr y2 = *backend->Allocate(0, kBytes);
  ASSERT_TRUE(
      backend->LaunchDeviceGraph(AxpyGraph(x2, y2, 5, -1, 0.5f), stream).ok());
  EXPECT_THAT(Download(*backend, y2, stream), ::testing::Each(1.5f));
  EXPECT_THAT(Download(*backend, y, stream), ::testing::Each(7.0f));

  StreamGraphRunner::Stats stats = backend->graph_stats();
  EXPECT_EQ(stats.instantiations, 1u);
  EXPECT_EQ(stats.cache_hits, 1u);

  // Another shape is another instance.
  DeviceGraph other = AxpyGraph(x, y, 1, 1, 1);
  other.AddKernel(Axpy(1, x, y), {2});
  ASSERT_TRUE(backend->LaunchDeviceGraph(other, stream).ok());
  EXPECT_THAT(Download(*backend, y, stream), ::testing::Each(3.0f));
  stats = backend->graph_stats();
  EXPECT_EQ(stats.instantiations, 2u);
  EXPECT_EQ(stats.cached, 2);
}

TEST(StreamGraphRunnerTest, PrepareInstantiatesWithoutEnqueueing) {
  auto backend = MakeBackend(nullptr);
  const StreamHandle stream = *backend->CreateStream(0);
  const DevicePtr x = *backend->Allocate(0, kBytes);
  const DevicePtr y = *backend->Allocate(0, kBytes);
  ASSERT_TRUE(backend->Launch(Fill(y, 0), stream).ok());
  const DeviceGraph g = AxpyGraph(x, y, 2, 1, 3);
  ASSERT_TRUE(backend->PrepareDeviceGraph(g).ok());
  ASSERT_TRUE(backend->PrepareDeviceGraph(g).ok());
  EXPECT_THAT(Download(*backend, y, stream), ::testing::Each(0.0f));
  StreamGraphRunner::Stats stats = backend->graph_stats();
  EXPECT_EQ(stats.instantiations, 1u);
  EXPECT_EQ(stats.cache_hits, 0u);
  ASSERT_TRUE(backend->LaunchDeviceGraph(g, stream).ok());
  EXPECT_THAT(Download(*backend, y, stream), ::testing::Each(7.0f));
  stats = backend->graph_stats();
  EXPECT_EQ(stats.instantiations, 1u);
  EXPECT_EQ(stats.cache_hits, 0u);  // its first launch
}

TEST(StreamGraphRunnerTest, CrossDeviceEdgesGoThroughEvents) {
  auto backend = MakeBackend(nullptr);
  const StreamHandle s0 = *backend->CreateStream(0);
  const StreamHandle s1 = *backend->CreateStream(1);
  const EventHandle ready = *backend->CreateEvent(0);
  const DevicePtr a = *backend->Allocate(0, kBytes);
  const DevicePtr b = *backend->Allocate(1, kBytes);
  const DevicePtr c = *backend->Allocate(1, kBytes);

  DeviceGraph g0;
  g0.device = 0;
  // A long kernel first, so a wait that did not hold would read zeros.
  const int spin = g0.AddKernel(Op("spin", 500), {});
  const int fill = g0.AddKernel(Fill(a, 4), {spin});
  g0.AddEventRecord(ready, {fill});
  DeviceGraph g1;
  g1.device = 1;
  const int wait = g1.AddEventWait(ready, {});
  const int copy = g1.AddDeviceCopy(b, a, kBytes, {wait});
  const int fc = g1.AddKernel(Fill(c, 1), {});
  g1.AddKernel(Axpy(2, b, c), {copy, fc});
  ASSERT_TRUE(backend->LaunchDeviceGraph(g0, s0).ok());
  ASSERT_TRUE(backend->LaunchDeviceGraph(g1, s1).ok());
  EXPECT_THAT(Download(*backend, c, s1), ::testing::Each(9.0f));
}

// Unpaced virtual time: independent nodes overlap (one lane each), a chain
// adds up, as if issued node by node.
TEST(StreamGraphRunnerTest, TimingFollowsTheEdges) {
  auto backend = MakeBackend(nullptr);
  const StreamHandle stream = *backend->CreateStream(0);
  const EventHandle before = *backend->CreateEvent(0);
  const EventHandle after = *backend->CreateEvent(0);
  auto elapsed = [&](const DeviceGraph& g) {
    EXPECT_TRUE(backend->RecordEvent(before, stream).ok());
    EXPECT_TRUE(backend->LaunchDeviceGraph(g, stream).ok());
    EXPECT_TRUE(backend->RecordEvent(after, stream).ok());
    EXPECT_TRUE(backend->SynchronizeStream(stream).ok());
    return *backend->EventTimeUs(after) - *backend->EventTimeUs(before);
  };
  // Kernels of a quarter of the device each: the three independent ones
  // run side by side, on lanes of their own.
  KernelLaunch quarter = Op("spin", 10);
  quarter.occupancy_units = scheduler::kOccupancyUnits / 4;
  DeviceGraph fan;
  const int a = fan.AddKernel(quarter, {});
  const int b = fan.AddKernel(quarter, {});
  const int c = fan.AddKernel(quarter, {});
  fan.AddKernel(Op("spin", 5), {a, b, c});
  EXPECT_DOUBLE_EQ(elapsed(fan), 15);

  // Kernels that fill the device run one at a time, lanes or not.
  DeviceGraph full;
  const int f = full.AddKernel(Op("spin", 10), {});
  const int g = full.AddKernel(Op("spin", 10), {});
  const int h = full.AddKernel(Op("spin", 10), {});
  full.AddKernel(Op("spin", 5), {f, g, h});
  EXPECT_DOUBLE_EQ(elapsed(full), 35);

  // A COPY node books the device's copy engine: it runs beside a kernel.
  KernelLaunch copy = Op("spin", 10);
  copy.engine = scheduler::Engine::kCopy;
  DeviceGraph beside;
  const int k = beside.AddKernel(Op("spin", 10), {});
  const int m = beside.AddKernel(copy, {});
  beside.AddKernel(Op("spin", 5), {k, m});
  EXPECT_DOUBLE_EQ(elapsed(beside), 15);

  DeviceGraph chain;
  const int d = chain.AddKernel(Op("spin", 10), {});
  const int e = chain.AddKernel(Op("spin", 10), {d});
  chain.AddKernel(Op("spin", 10), {e});
  EXPECT_DOUBLE_EQ(elapsed(chain), 30);

  // Lanes book the device in the graph's node order, also when each lane
  // runs as one chain: a half-device kernel, a half-device one of 200 us
  // on a second lane, then a full-device one after the first. In node
  // order the long one books beside the first ([0, 200]) and the full one
  // waits for it ([200, 300]); had the first lane booked both of its
  // kernels first, the long one would find no room until 200 (400 in all).
  KernelLaunch half = Op("spin", 100);
  half.occupancy_units = scheduler::kOccupancyUnits / 2;
  KernelLaunch long_half = Op("spin", 200);
  long_half.occupancy_units = scheduler::kOccupancyUnits / 2;
  DeviceGraph interleaved;
  const int first = interleaved.AddKernel(half, {});
  interleaved.AddKernel(long_half, {});
  interleaved.AddKernel(Op("spin", 100), {first});
  EXPECT_DOUBLE_EQ(elapsed(interleaved), 300);
  EXPECT_DOUBLE_EQ(elapsed(interleaved), 300);  // relaunched: the same
}

TEST(StreamGraphRunnerTest, AChainRunsOnTheCallersStreamAfterItsLastLaunch) {
  auto backend = MakeBackend(nullptr);
  const StreamHandle a = *backend->CreateStream(0);
  const StreamHandle b = *backend->CreateStream(0);
  const int streams = backend->stream_count();
  DeviceGraph chain;
  const int first = chain.AddKernel(Op("spin", 10), {});
  chain.AddKernel(Op("spin", 10), {first});
  const EventHandle end = *backend->CreateEvent(0);
  // Launched from two streams: the second launch of the instance starts
  // after the first, as launches of one CUDA graph executable do.
  ASSERT_TRUE(backend->LaunchDeviceGraph(chain, a).ok());
  ASSERT_TRUE(backend->LaunchDeviceGraph(chain, b).ok());
  ASSERT_TRUE(backend->RecordEvent(end, b).ok());
  ASSERT_TRUE(backend->SynchronizeStream(b).ok());
  ASSERT_TRUE(backend->SynchronizeStream(a).ok());
  EXPECT_DOUBLE_EQ(*backend->EventTimeUs(end), 40);
  // Back on the first stream, after the launch on the second; then again
  // there, after the launch before it on the same stream.
  const EventHandle third = *backend->CreateEvent(0);
  const EventHandle fourth = *backend->CreateEvent(0);
  ASSERT_TRUE(backend->LaunchDeviceGraph(chain, a).ok());
  ASSERT_TRUE(backend->RecordEvent(third, a).ok());
  ASSERT_TRUE(backend->LaunchDeviceGraph(chain, a).ok());
  ASSERT_TRUE(backend->RecordEvent(fourth, a).ok());
  ASSERT_TRUE(backend->SynchronizeStream(a).ok());
  EXPECT_DOUBLE_EQ(*backend->EventTimeUs(third), 60);
  EXPECT_DOUBLE_EQ(*backend->EventTimeUs(fourth), 80);
  // No lane streams: the chain went onto the callers' streams.
  EXPECT_EQ(backend->stream_count(), streams);
  EXPECT_EQ(backend->graph_stats().instantiations, 1u);
  EXPECT_EQ(backend->graph_stats().cache_hits, 3u);
}

TEST(StreamGraphRunnerTest, FailureReachesOnlyItsScope) {
  TestKernels kernels;
  auto backend = MakeBackend(&kernels.table);
  const StreamHandle stream = *backend->CreateStream(0);
  DeviceGraph g;
  const int boom = g.AddKernel(Op("boom"), {});
  g.AddKernel(Op("spin", 1), {boom});
  ASSERT_TRUE(backend->SetErrorScope(stream, 7).ok());
  ASSERT_TRUE(backend->LaunchDeviceGraph(g, stream).ok());
  absl::Status failed;
  absl::Notification failed_seen;
  ASSERT_TRUE(backend
                  ->AddHostCallback(stream,
                                    [&](absl::Status s) {
                                      failed = s;
                                      failed_seen.Notify();
                                    })
                  .ok());
  ASSERT_TRUE(backend->SetErrorScope(stream, 8).ok());
  DeviceGraph fine;
  fine.AddKernel(Op("spin", 1), {});
  ASSERT_TRUE(backend->LaunchDeviceGraph(fine, stream).ok());
  absl::Status other;
  absl::Notification other_seen;
  ASSERT_TRUE(backend
                  ->AddHostCallback(stream,
                                    [&](absl::Status s) {
                                      other = s;
                                      other_seen.Notify();
                                    })
                  .ok());
  failed_seen.WaitForNotification();
  other_seen.WaitForNotification();
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInternal,
                               HasSubstr("boom went off")));
  EXPECT_TRUE(other.ok()) << other;
  backend->ReleaseErrorScope(stream, 7);
  backend->ReleaseErrorScope(stream, 8);
}

TEST(StreamGraphRunnerTest, AbortSkipsGraphWorkNotStarted) {
  TestKernels kernels;
  auto backend = MakeBackend(&kernels.table);
  const StreamHandle stream = *backend->CreateStream(0);
  const DevicePtr y = *backend->Allocate(0, kBytes);
  ASSERT_TRUE(backend->Launch(Fill(y, 0), stream).ok());
  ASSERT_TRUE(backend->SetErrorScope(stream, 3).ok());
  DeviceGraph g;
  const int block = g.AddKernel(Op("block"), {});
  g.AddKernel(Fill(y, 9), {block});
  ASSERT_TRUE(backend->LaunchDeviceGraph(g, stream).ok());
  absl::Status seen;
  absl::Notification done;
  ASSERT_TRUE(backend
                  ->AddHostCallback(stream,
                                    [&](absl::Status s) {
                                      seen = s;
                                      done.Notify();
                                    })
                  .ok());
  ASSERT_TRUE(
      backend->AbortErrorScope(stream, 3, absl::CancelledError("job cancelled"))
          .ok());
  kernels.release.Notify();
  done.WaitForNotification();
  EXPECT_THAT(
      seen, StatusIs(absl::StatusCode::kCancelled, HasSubstr("job cancelled")));
  ASSERT_TRUE(backend->SetErrorScope(stream, 4).ok());
  // The fill never ran: y still holds zeros.
  EXPECT_THAT(Download(*backend, y, stream), ::testing::Each(0.0f));
}

TEST(StreamGraphRunnerTest, RejectsStreamOfAnotherDevice) {
  auto backend = MakeBackend(nullptr);
  const StreamHandle stream = *backend->CreateStream(1);
  DeviceGraph g;
  g.device = 0;
  g.AddKernel(Op("spin"), {});
  const absl::Status s = backend->LaunchDeviceGraph(g, stream);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("cannot launch on a stream of device 1")));
}

TEST(StreamGraphRunnerTest, KeepsBusyGraphsAndTheNewestBeyondTheBound) {
  TestKernels kernels;
  auto backend = MakeBackend(&kernels.table);
  StreamGraphRunner runner(backend.get(), {/*max_cached_graphs=*/1, 4});
  const StreamHandle s0 = *backend->CreateStream(0);
  const StreamHandle s1 = *backend->CreateStream(0);
  const DevicePtr y = *backend->Allocate(0, kBytes);
  DeviceGraph busy;
  busy.AddKernel(Op("block"), {});
  ASSERT_TRUE(runner.Launch(busy, s0, 0, 0).ok());
  // Over the bound with the only other instance busy: the new one stays.
  DeviceGraph fill;
  fill.AddKernel(Fill(y, 5), {});
  ASSERT_TRUE(runner.Launch(fill, s1, 0, 0).ok());
  EXPECT_THAT(Download(*backend, y, s1), ::testing::Each(5.0f));
  EXPECT_EQ(runner.stats().cached, 2);
  EXPECT_EQ(runner.stats().evictions, 0u);
  kernels.release.Notify();
  ASSERT_TRUE(backend->SynchronizeStream(s0).ok());
  // Idle now: the next new instance evicts the least recently used.
  DeviceGraph spin;
  spin.AddKernel(Op("spin"), {});
  ASSERT_TRUE(runner.Launch(spin, s1, 0, 0).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s1).ok());
  EXPECT_EQ(runner.stats().cached, 1);
  EXPECT_EQ(runner.stats().evictions, 2u);
}

TEST(StreamGraphRunnerTest, EvictsLeastRecentlyUsedIdleGraphs) {
  auto backend = MakeBackend(nullptr);
  StreamGraphRunner runner(backend.get(), {/*max_cached_graphs=*/2, 4});
  const StreamHandle stream = *backend->CreateStream(0);
  for (int n = 1; n <= 4; ++n) {
    DeviceGraph g;
    for (int i = 0; i < n; ++i) g.AddKernel(Op("spin"), {});
    ASSERT_TRUE(runner.Launch(g, stream, 0, 0).ok());
    ASSERT_TRUE(backend->SynchronizeStream(stream).ok());
  }
  const StreamGraphRunner::Stats stats = runner.stats();
  EXPECT_EQ(stats.instantiations, 4u);
  EXPECT_EQ(stats.evictions, 2u);
  EXPECT_EQ(stats.cached, 2);
}

TEST(StreamGraphRunnerTest, FailedEnqueueStillHoldsTheCallersStream) {
  TestKernels kernels;
  auto backend = MakeBackend(&kernels.table);
  const StreamHandle stream = *backend->CreateStream(0);
  std::atomic<bool> block_done{false};
  ASSERT_TRUE(kernels.table
                  .Register("block_then_mark",
                            [&](absl::Span<const HostArg>) {
                              kernels.release.WaitForNotification();
                              block_done.store(true);
                              return absl::OkStatus();
                            })
                  .ok());
  // The block goes onto one lane; the fill, on a second lane, names an
  // address outside any allocation, which the enqueueing call rejects. (An
  // event node on a third lane keeps the graph off the chain path, which
  // enqueues nothing when it fails.)
  DeviceGraph g;
  g.AddKernel(Op("block_then_mark"), {});
  g.AddKernel(Fill(DevicePtr{0, 12345}, 1), {});
  g.AddEventRecord(*backend->CreateEvent(0), {});
  const absl::Status launched = backend->LaunchDeviceGraph(g, stream);
  EXPECT_FALSE(launched.ok());
  EXPECT_THAT(launched.message(), HasSubstr("is not inside an allocation"));
  // The caller's later work (a job's fence, before its memory is reused)
  // must still wait for the block that did reach a lane.
  bool block_done_at_fence = false;
  absl::Notification fenced;
  ASSERT_TRUE(backend
                  ->AddHostCallback(stream,
                                    [&](absl::Status) {
                                      block_done_at_fence = block_done.load();
                                      fenced.Notify();
                                    })
                  .ok());
  kernels.release.Notify();
  fenced.WaitForNotification();
  EXPECT_TRUE(block_done_at_fence);
}

TEST(StreamGraphRunnerTest, ARefusedChainLaunchEnqueuesNothing) {
  TestKernels kernels;
  auto backend = MakeBackend(&kernels.table);
  const StreamHandle stream = *backend->CreateStream(0);
  std::atomic<int> ran{0};
  ASSERT_TRUE(kernels.table
                  .Register("count",
                            [&](absl::Span<const HostArg>) {
                              ran.fetch_add(1);
                              return absl::OkStatus();
                            })
                  .ok());
  // Kernels alone, on two lanes: one chain each. The last one names an
  // address outside any allocation.
  DeviceGraph g;
  const int first = g.AddKernel(Op("count"), {});
  g.AddKernel(Op("count"), {first});
  g.AddKernel(Fill(DevicePtr{0, 12345}, 1), {});
  const absl::Status launched = backend->LaunchDeviceGraph(g, stream);
  EXPECT_FALSE(launched.ok());
  EXPECT_THAT(launched.message(), HasSubstr("is not inside an allocation"));
  ASSERT_TRUE(backend->SynchronizeStream(stream).ok());
  EXPECT_EQ(ran.load(), 0);
  // The same graph with a good address runs every kernel, in order.
  auto buffer = backend->Allocate(0, kBytes);
  ASSERT_TRUE(buffer.ok());
  g.nodes[2].launch = Fill(*buffer, 1);
  ASSERT_TRUE(backend->LaunchDeviceGraph(g, stream).ok());
  ASSERT_TRUE(backend->SynchronizeStream(stream).ok());
  EXPECT_EQ(ran.load(), 2);
}

}  // namespace
}  // namespace weft::runtime
