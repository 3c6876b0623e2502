#include "runtime/sim/sim_backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device_graph.h"
#include "runtime/ops/test_kernels.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

constexpr double kInfinite = std::numeric_limits<double>::infinity();

SimBackend::Options FastOptions() {
  SimBackend::Options options;
  options.num_devices = 2;
  options.memory_bytes = 1 << 20;
  options.host_to_device_gbps = kInfinite;
  options.device_to_host_gbps = kInfinite;
  options.device_to_device_gbps = kInfinite;
  return options;
}

// `options` on one worker that the pool does not add to for a stall, so
// that what a callback waits for shows.
SimBackend::Options OnOneWorker(SimBackend::Options options) {
  options.worker_threads = 1;
  options.worker_stall_timeout = absl::InfiniteDuration();
  return options;
}

std::unique_ptr<SimBackend> MakeBackend(SimBackend::Options options) {
  auto backend = SimBackend::Create(std::move(options));
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(backend).value();
}

// A spin of `cost_us` that keeps `units` of its device busy (all of it by
// default).
KernelLaunch Spin(double cost_us, int32_t units = scheduler::kOccupancyUnits) {
  KernelLaunch launch;
  launch.op = "spin";
  launch.cost_us = cost_us;
  launch.occupancy_units = units;
  return launch;
}

constexpr int32_t kQuarter = scheduler::kOccupancyUnits / 4;

KernelLaunch FillF32(DevicePtr ptr, uint64_t bytes, float value) {
  KernelLaunch launch;
  launch.op = "fill";
  launch.args = {DeviceBufferArg{ptr, bytes, DType::kFloat32, Access::kWrite},
                 value};
  return launch;
}

using TestKernels = BlockAndBoomKernels;

TEST(SimBackendTest, RejectsBadOptions) {
  SimBackend::Options options;
  options.num_devices = 0;
  auto backend = SimBackend::Create(options);
  EXPECT_THAT(backend.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("num_devices")));
  options.num_devices = 1;
  options.time_scale = -1;
  EXPECT_THAT(SimBackend::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  options.time_scale = 0;
  options.worker_threads = -1;
  backend = SimBackend::Create(options);
  EXPECT_THAT(backend.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("worker_threads")));
  options.worker_threads = 0;
  options.worker_stall_timeout = absl::ZeroDuration();
  backend = SimBackend::Create(options);
  EXPECT_THAT(backend.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("worker_stall_timeout")));
  options.worker_stall_timeout = SimWorkerPool::kDefaultStallTimeout;
  options.worker_spin = absl::Microseconds(-1);
  backend = SimBackend::Create(options);
  EXPECT_THAT(backend.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("worker_spin")));
}

TEST(SimBackendTest, StreamsShareAPoolOfOneWorkerPerDevice) {
  SimBackend::Options options = FastOptions();
  options.worker_stall_timeout = absl::InfiniteDuration();
  auto backend = MakeBackend(options);
  std::vector<StreamHandle> streams;
  for (int i = 0; i < 16; ++i) {
    streams.push_back(backend->CreateStream(i % 2).value());
  }
  for (StreamHandle s : streams) ASSERT_TRUE(backend->Launch(Spin(1), s).ok());
  for (StreamHandle s : streams) {
    ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  }
  EXPECT_LE(backend->worker_threads(), 2);
}

// A host callback may synchronize and destroy another stream, even on a
// single worker: the pool adds one while the callback waits.
TEST(SimBackendTest, CallbackMaySynchronizeAndDestroyAnotherStream) {
  auto backend = MakeBackend(OnOneWorker(FastOptions()));
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(0).value();
  absl::Status synced = absl::UnknownError("not called");
  absl::Status destroyed = absl::UnknownError("not called");
  bool b_ran = false;
  backend->BeginBatch();
  ASSERT_TRUE(backend
                  ->AddHostCallback(a,
                                    [&](absl::Status) {
                                      synced = backend->SynchronizeStream(b);
                                      destroyed = backend->DestroyStream(b);
                                    })
                  .ok());
  ASSERT_TRUE(backend->Launch(Spin(10), b).ok());
  ASSERT_TRUE(
      backend->AddHostCallback(b, [&](absl::Status) { b_ran = true; }).ok());
  backend->EndBatch();
  ASSERT_TRUE(backend->SynchronizeStream(a).ok());
  EXPECT_TRUE(synced.ok()) << synced;
  EXPECT_TRUE(destroyed.ok()) << destroyed;
  EXPECT_TRUE(b_ran);
  EXPECT_EQ(backend->stream_count(), 1);
}

// As on CUDA, a host callback may destroy its own stream: the call returns
// at once, the stream runs the rest of its work, and a later DestroyStream
// shuts it down.
TEST(SimBackendTest, CallbackMayDestroyItsOwnStream) {
  auto backend = MakeBackend(OnOneWorker(FastOptions()));
  StreamHandle a = backend->CreateStream(0).value();
  absl::Status destroyed = absl::UnknownError("not called");
  absl::Notification rest_ran;
  backend->BeginBatch();
  ASSERT_TRUE(
      backend
          ->AddHostCallback(
              a, [&](absl::Status) { destroyed = backend->DestroyStream(a); })
          .ok());
  ASSERT_TRUE(backend->Launch(Spin(10), a).ok());
  ASSERT_TRUE(
      backend->AddHostCallback(a, [&](absl::Status) { rest_ran.Notify(); })
          .ok());
  backend->EndBatch();
  ASSERT_TRUE(rest_ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(destroyed.ok()) << destroyed;
  EXPECT_EQ(backend->stream_count(), 0);
  EXPECT_THAT(backend->Launch(Spin(1), a),
              StatusIs(absl::StatusCode::kNotFound));
  // The next destruction shuts the first one down.
  StreamHandle b = backend->CreateStream(0).value();
  EXPECT_TRUE(backend->DestroyStream(b).ok());
  EXPECT_EQ(backend->stream_count(), 0);
}

TEST(SimBackendTest, StreamCannotSynchronizeItself) {
  auto backend = MakeBackend(OnOneWorker(FastOptions()));
  StreamHandle s = backend->CreateStream(0).value();
  absl::Status from_callback;
  ASSERT_TRUE(backend
                  ->AddHostCallback(s,
                                    [&](absl::Status) {
                                      from_callback =
                                          backend->SynchronizeStream(s);
                                    })
                  .ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_THAT(from_callback, StatusIs(absl::StatusCode::kFailedPrecondition,
                                      HasSubstr("its own thread")));
}

TEST(SimBackendTest, DescribesDevices) {
  auto backend = MakeBackend(FastOptions());
  ASSERT_EQ(backend->device_count(), 2);
  DeviceInfo d1 = backend->device_info(1);
  EXPECT_EQ(d1.index, 1);
  EXPECT_TRUE(d1.simulated);
  EXPECT_EQ(d1.name, "Weft Simulated GPU");
  EXPECT_EQ(d1.uuid, "GPU-5e1a0000-0000-4000-8000-000000000001");
  EXPECT_NE(backend->device_info(0).uuid, d1.uuid);
  EXPECT_EQ(d1.memory_total_bytes, 1u << 20);
  EXPECT_EQ(backend->device_info(5).index, -1);
}

TEST(SimBackendTest, StreamRunsWorkInFifoOrder) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(0).value();
  absl::Mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 20; ++i) {
    // Alternate long and instant spins: FIFO order must still hold.
    ASSERT_TRUE(backend->Launch(Spin(i % 2 == 0 ? 300 : 0), s).ok());
    ASSERT_TRUE(backend
                    ->AddHostCallback(s,
                                      [&, i](absl::Status status) {
                                        EXPECT_TRUE(status.ok());
                                        absl::MutexLock lock(&mu);
                                        order.push_back(i);
                                      })
                    .ok());
  }
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  absl::MutexLock lock(&mu);
  ASSERT_EQ(order.size(), 20u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(order[i], i);
}

TEST(SimBackendTest, SpinOccupiesItsStreamForItsCost) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(1).value();
  const absl::Time start = absl::Now();
  ASSERT_TRUE(backend->Launch(Spin(20000), s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(20));
  EXPECT_LT(took, absl::Seconds(2));
}

TEST(SimBackendTest, EventWaitOrdersWorkAcrossStreams) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(1).value();
  EventHandle e = backend->CreateEvent(0).value();

  absl::Time a_done, b_done;
  const absl::Time start = absl::Now();
  ASSERT_TRUE(backend->Launch(Spin(30000), a).ok());
  ASSERT_TRUE(
      backend->AddHostCallback(a, [&](absl::Status) { a_done = absl::Now(); })
          .ok());
  ASSERT_TRUE(backend->RecordEvent(e, a).ok());
  ASSERT_TRUE(backend->StreamWaitEvent(b, e).ok());
  ASSERT_TRUE(backend->Launch(Spin(0), b).ok());
  ASSERT_TRUE(
      backend->AddHostCallback(b, [&](absl::Status) { b_done = absl::Now(); })
          .ok());
  ASSERT_TRUE(backend->SynchronizeStream(b).ok());
  ASSERT_TRUE(backend->SynchronizeStream(a).ok());
  EXPECT_GE(b_done - start, absl::Milliseconds(30));
  EXPECT_GE(b_done, a_done);
}

TEST(SimBackendTest, WaitingStreamReallyBlocks) {
  TestKernels kernels;
  SimBackend::Options options = FastOptions();
  options.kernels = &kernels.table;
  auto backend = MakeBackend(options);
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(0).value();
  EventHandle e = backend->CreateEvent(0).value();
  KernelLaunch block;
  block.op = "block";
  ASSERT_TRUE(backend->Launch(block, a).ok());
  ASSERT_TRUE(backend->RecordEvent(e, a).ok());
  ASSERT_TRUE(backend->StreamWaitEvent(b, e).ok());
  absl::Notification b_ran;
  ASSERT_TRUE(
      backend->AddHostCallback(b, [&](absl::Status) { b_ran.Notify(); }).ok());
  EXPECT_FALSE(b_ran.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  EXPECT_FALSE(backend->QueryEvent(e).value());
  kernels.release.Notify();
  b_ran.WaitForNotification();
  EXPECT_TRUE(backend->QueryEvent(e).value());
}

TEST(SimBackendTest, QueryEvent) {
  TestKernels kernels;
  SimBackend::Options options = FastOptions();
  options.kernels = &kernels.table;
  auto backend = MakeBackend(options);
  StreamHandle s = backend->CreateStream(0).value();
  EventHandle e = backend->CreateEvent(0).value();
  EXPECT_TRUE(backend->QueryEvent(e).value());  // never recorded
  ASSERT_TRUE(backend->RecordEvent(e, s).ok());
  EXPECT_TRUE(backend->QueryEvent(e).value());  // nothing captured
  KernelLaunch block;
  block.op = "block";
  ASSERT_TRUE(backend->Launch(block, s).ok());
  ASSERT_TRUE(backend->RecordEvent(e, s).ok());
  EXPECT_FALSE(backend->QueryEvent(e).value());
  kernels.release.Notify();
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_TRUE(backend->QueryEvent(e).value());
  ASSERT_TRUE(backend->DestroyEvent(e).ok());
  EXPECT_THAT(backend->QueryEvent(e).status(),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(SimBackendTest, StampsTellWhatAnEventRecordedThereWould) {
  TestKernels kernels;
  SimBackend::Options options = FastOptions();
  options.kernels = &kernels.table;
  options.time_scale = 0;  // unpaced: exact virtual times
  auto backend = MakeBackend(options);
  ASSERT_TRUE(backend->supports_stamps());
  StreamHandle s = backend->CreateStream(0).value();
  EventHandle e = backend->CreateEvent(0).value();
  KernelLaunch block;
  block.op = "block";
  ASSERT_TRUE(backend->Launch(block, s).ok());
  ASSERT_TRUE(backend->Launch(Spin(10), s).ok());
  std::shared_ptr<const DeviceStamp> after_ten = backend->Stamp(s).value();
  ASSERT_TRUE(backend->RecordEvent(e, s).ok());
  ASSERT_TRUE(backend->Launch(Spin(5), s).ok());
  std::shared_ptr<const DeviceStamp> after_fifteen = backend->Stamp(s).value();
  EXPECT_FALSE(after_ten->TimeUs().has_value());  // its work has not run
  kernels.release.Notify();
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  ASSERT_TRUE(after_ten->TimeUs().has_value());
  EXPECT_DOUBLE_EQ(*after_ten->TimeUs(), backend->EventTimeUs(e).value());
  ASSERT_TRUE(after_fifteen->TimeUs().has_value());
  EXPECT_DOUBLE_EQ(*after_fifteen->TimeUs() - *after_ten->TimeUs(), 5);
  // A stamp outlives its stream and event.
  ASSERT_TRUE(backend->DestroyEvent(e).ok());
  ASSERT_TRUE(backend->DestroyStream(s).ok());
  EXPECT_TRUE(after_fifteen->TimeUs().has_value());
  EXPECT_THAT(backend->Stamp(s).status(),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(SimBackendTest, RecordRejectsEventOfAnotherDevice) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(0).value();
  EventHandle e = backend->CreateEvent(1).value();
  absl::Status status = backend->RecordEvent(e, s);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("belongs to device 1")));
}

TEST(SimBackendTest, OutOfMemoryIsResourceExhausted) {
  auto backend = MakeBackend(FastOptions());
  DevicePtr a = backend->Allocate(1, 700 * 1024).value();
  EXPECT_EQ(backend->memory_used_bytes(1), 700u * 1024);
  EXPECT_EQ(backend->memory_used_bytes(0), 0u);
  auto b = backend->Allocate(1, 400 * 1024);
  EXPECT_THAT(b.status(), StatusIs(absl::StatusCode::kResourceExhausted,
                                   AllOf(HasSubstr("device 1"),
                                         HasSubstr("requested 409600 bytes"),
                                         HasSubstr("331776 bytes free"))));
  ASSERT_TRUE(backend->Free(a).ok());
  EXPECT_EQ(backend->memory_used_bytes(1), 0u);
  EXPECT_TRUE(backend->Allocate(1, 400 * 1024).ok());
  absl::Status twice = backend->Free(a);
  EXPECT_THAT(twice, StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr("not the start of an allocation")));
}

TEST(SimBackendTest, CopiesRoundTripAcrossDevices) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(0).value();
  std::string in(1000, '\0');
  for (int i = 0; i < 1000; ++i) in[i] = static_cast<char>(i * 7);
  DevicePtr d0 = backend->Allocate(0, 1000).value();
  DevicePtr d1 = backend->Allocate(1, 1000).value();
  std::string out(1000, 'x');
  ASSERT_TRUE(backend->CopyHostToDevice(d0, in.data(), 1000, s).ok());
  ASSERT_TRUE(backend->CopyDeviceToDevice(d1, d0, 1000, s).ok());
  ASSERT_TRUE(backend->CopyDeviceToHost(out.data(), d1, 1000, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_EQ(out, in);
}

TEST(SimBackendTest, CopiesTakeBytesOverBandwidth) {
  SimBackend::Options options = FastOptions();
  options.host_to_device_gbps = 0.05;  // 50 MB/s: 500 KB take 10 ms
  auto backend = MakeBackend(options);
  StreamHandle s = backend->CreateStream(0).value();
  std::string in(500000, 'a');
  DevicePtr d = backend->Allocate(0, in.size()).value();
  const absl::Time start = absl::Now();
  ASSERT_TRUE(backend->CopyHostToDevice(d, in.data(), in.size(), s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(10));
}

TEST(SimBackendTest, KernelsComputeOnDeviceMemory) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(1).value();
  DevicePtr x = backend->Allocate(1, 16).value();
  DevicePtr sum = backend->Allocate(1, 4).value();
  ASSERT_TRUE(backend->Launch(FillF32(x, 16, 1.5f), s).ok());
  KernelLaunch reduce;
  reduce.op = "reduce_sum";
  reduce.args = {DeviceBufferArg{x, 16, DType::kFloat32, Access::kRead},
                 DeviceBufferArg{sum, 4, DType::kFloat32, Access::kWrite}};
  ASSERT_TRUE(backend->Launch(reduce, s).ok());
  float result = 0;
  ASSERT_TRUE(backend->CopyDeviceToHost(&result, sum, 4, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_EQ(result, 6.0f);
}

TEST(SimBackendTest, UnknownOpIsUnimplemented) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(0).value();
  KernelLaunch launch;
  launch.op = "matmul";
  absl::Status status = backend->Launch(launch, s);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnimplemented,
                               HasSubstr("'matmul'")));
}

TEST(SimBackendTest, AddressOutsideAllocationIsRejected) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(0).value();
  DevicePtr p = backend->Allocate(0, 8).value();
  absl::Status status = backend->Launch(FillF32(p, 16, 1), s);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("not inside an allocation")));
  char buf[4];
  EXPECT_THAT(backend->CopyDeviceToHost(buf, DevicePtr{0, 12345}, 4, s),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SimBackendTest, FailedLaunchPoisonsLaterCallbacks) {
  TestKernels kernels;
  SimBackend::Options options = FastOptions();
  options.kernels = &kernels.table;
  auto backend = MakeBackend(options);
  StreamHandle s = backend->CreateStream(0).value();
  StreamHandle other = backend->CreateStream(0).value();
  DevicePtr p = backend->Allocate(0, 4).value();
  std::vector<absl::Status> seen;
  absl::Mutex mu;
  auto record = [&](absl::Status status) {
    absl::MutexLock lock(&mu);
    seen.push_back(status);
  };
  ASSERT_TRUE(backend->AddHostCallback(s, record).ok());
  KernelLaunch boom;
  boom.op = "boom";
  ASSERT_TRUE(backend->Launch(boom, s).ok());
  ASSERT_TRUE(backend->Launch(FillF32(p, 4, 9), s).ok());  // skipped
  ASSERT_TRUE(backend->AddHostCallback(s, record).ok());
  ASSERT_TRUE(backend->AddHostCallback(s, record).ok());
  absl::Status sync = backend->SynchronizeStream(s);
  EXPECT_THAT(sync, StatusIs(absl::StatusCode::kInternal));
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_TRUE(seen[0].ok());
    for (int i = 1; i < 3; ++i) {
      EXPECT_THAT(seen[i], StatusIs(absl::StatusCode::kInternal,
                                    AllOf(HasSubstr("boom on device 0"),
                                          HasSubstr("boom went off"))));
    }
  }
  // The skipped fill never touched memory; other streams are unaffected.
  float value = -1;
  ASSERT_TRUE(backend->Launch(FillF32(p, 4, 2), other).ok());
  ASSERT_TRUE(backend->CopyDeviceToHost(&value, p, 4, other).ok());
  EXPECT_TRUE(backend->SynchronizeStream(other).ok());
  EXPECT_EQ(value, 2.0f);
}

TEST(SimBackendTest, InjectedFaultFailsTheLaunch) {
  SimBackend::Options options = FastOptions();
  int launches = 0;
  options.launch_fault = [&launches](int device, const KernelLaunch&) {
    return ++launches == 2 ? absl::UnavailableError("device 1 fell off")
                           : absl::OkStatus();
  };
  auto backend = MakeBackend(options);
  StreamHandle s = backend->CreateStream(1).value();
  ASSERT_TRUE(backend->Launch(Spin(0), s).ok());
  ASSERT_TRUE(backend->Launch(Spin(0), s).ok());
  absl::Status status = backend->SynchronizeStream(s);
  EXPECT_THAT(status,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("fell off")));
}

TEST(SimBackendTest, MemoryFreedBeforeWorkRunsFailsTheWork) {
  TestKernels kernels;
  SimBackend::Options options = FastOptions();
  options.kernels = &kernels.table;
  auto backend = MakeBackend(options);
  StreamHandle s = backend->CreateStream(0).value();
  DevicePtr p = backend->Allocate(0, 4).value();
  KernelLaunch block;
  block.op = "block";
  ASSERT_TRUE(backend->Launch(block, s).ok());
  ASSERT_TRUE(backend->Launch(FillF32(p, 4, 1), s).ok());
  ASSERT_TRUE(backend->Free(p).ok());
  kernels.release.Notify();
  absl::Status status = backend->SynchronizeStream(s);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("fill on device 0")));
}

TEST(SimBackendTest, DestroyStreamWaitsForItsWork) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(0).value();
  bool ran = false;
  ASSERT_TRUE(backend->Launch(Spin(5000), s).ok());
  ASSERT_TRUE(
      backend->AddHostCallback(s, [&](absl::Status) { ran = true; }).ok());
  EXPECT_EQ(backend->stream_count(), 1);
  ASSERT_TRUE(backend->DestroyStream(s).ok());
  EXPECT_TRUE(ran);
  EXPECT_EQ(backend->stream_count(), 0);
  EXPECT_THAT(backend->Launch(Spin(0), s),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(SimBackendTest, ShutsDownPromptlyWithWorkInFlight) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(1).value();
  EventHandle e = backend->CreateEvent(0).value();
  ASSERT_TRUE(backend->Launch(Spin(30e6), a).ok());  // 30 s
  ASSERT_TRUE(backend->RecordEvent(e, a).ok());
  ASSERT_TRUE(backend->StreamWaitEvent(b, e).ok());
  ASSERT_TRUE(backend->Launch(Spin(0), b).ok());
  const absl::Time start = absl::Now();
  backend.reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// ---- Timing model (unpaced: exact virtual times, no real waiting).

SimBackend::Options Unpaced() {
  SimBackend::Options options = FastOptions();
  options.time_scale = 0;
  return options;
}

// Records an event on `s` and returns its virtual time once complete.
double TimeAfter(SimBackend& backend, StreamHandle s, int device) {
  EventHandle e = backend.CreateEvent(device).value();
  EXPECT_TRUE(backend.RecordEvent(e, s).ok());
  EXPECT_TRUE(backend.SynchronizeStream(s).ok());
  absl::StatusOr<double> t = backend.EventTimeUs(e);
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(backend.DestroyEvent(e).ok());
  return t.value_or(-1);
}

// Reads the first float of `ptr` through `s`.
float FirstFloat(SimBackend& backend, DevicePtr ptr, StreamHandle s) {
  float value = 0;
  EXPECT_TRUE(backend.CopyDeviceToHost(&value, ptr, 4, s).ok());
  EXPECT_TRUE(backend.SynchronizeStream(s).ok());
  return value;
}

TEST(SimBackendTimingTest, KernelsLastTheirCostOnTheVirtualClock) {
  auto backend = MakeBackend(Unpaced());
  StreamHandle s = backend->CreateStream(0).value();
  const absl::Time start = absl::Now();
  ASSERT_TRUE(backend->Launch(Spin(1e6), s).ok());  // one virtual second
  ASSERT_TRUE(backend->Launch(Spin(500), s).ok());
  EXPECT_EQ(TimeAfter(*backend, s, 0), 1e6 + 500);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));  // unpaced
  EXPECT_TRUE(backend->has_device_clock());
}

TEST(SimBackendTimingTest, EventTimeNeedsACompletedRecording) {
  TestKernels kernels;
  SimBackend::Options options = Unpaced();
  options.kernels = &kernels.table;
  auto backend = MakeBackend(options);
  StreamHandle s = backend->CreateStream(0).value();
  EventHandle e = backend->CreateEvent(0).value();
  absl::StatusOr<double> never = backend->EventTimeUs(e);
  EXPECT_THAT(never.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                       HasSubstr("never recorded")));
  KernelLaunch block;
  block.op = "block";
  ASSERT_TRUE(backend->Launch(block, s).ok());
  ASSERT_TRUE(backend->RecordEvent(e, s).ok());
  absl::StatusOr<double> pending = backend->EventTimeUs(e);
  EXPECT_THAT(pending.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr("not completed")));
  kernels.release.Notify();
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_TRUE(backend->EventTimeUs(e).ok());
}

TEST(SimBackendTimingTest, WaitsCarryVirtualTimeAcrossStreams) {
  auto backend = MakeBackend(Unpaced());
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(1).value();
  EventHandle e = backend->CreateEvent(0).value();
  ASSERT_TRUE(backend->Launch(Spin(300), a).ok());
  ASSERT_TRUE(backend->RecordEvent(e, a).ok());
  ASSERT_TRUE(backend->SynchronizeStream(a).ok());  // done in real time
  ASSERT_TRUE(backend->Launch(Spin(100), b).ok());
  ASSERT_TRUE(backend->StreamWaitEvent(b, e).ok());
  ASSERT_TRUE(backend->Launch(Spin(50), b).ok());
  EXPECT_EQ(TimeAfter(*backend, b, 1), 350);
}

TEST(SimBackendTimingTest, ConcurrentKernelsAreLimitedPerDevice) {
  SimBackend::Options options = Unpaced();
  options.max_concurrent_kernels = 2;
  auto backend = MakeBackend(options);
  std::vector<StreamHandle> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(backend->CreateStream(0).value());
    // Four quarters would fit side by side; two work queues do not.
    ASSERT_TRUE(backend->Launch(Spin(100, kQuarter), streams.back()).ok());
  }
  StreamHandle other = backend->CreateStream(1).value();
  ASSERT_TRUE(backend->Launch(Spin(100, kQuarter), other).ok());
  std::vector<double> ends;
  for (StreamHandle s : streams) ends.push_back(TimeAfter(*backend, s, 0));
  std::sort(ends.begin(), ends.end());
  // Two at a time: two kernels end at 100, two wait and end at 200.
  EXPECT_THAT(ends, ::testing::ElementsAre(100, 100, 200, 200));
  // Another device has queues of its own.
  EXPECT_EQ(TimeAfter(*backend, other, 1), 100);
}

TEST(SimBackendTimingTest, FullOccupancyKernelsRunOneAfterTheOther) {
  auto backend = MakeBackend(Unpaced());  // 32 work queues
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->Launch(Spin(100), a).ok());
  ASSERT_TRUE(backend->Launch(Spin(100), b).ok());
  // Each fills the device: the second (in launch order) waits.
  EXPECT_EQ(TimeAfter(*backend, a, 0), 100);
  EXPECT_EQ(TimeAfter(*backend, b, 0), 200);
}

TEST(SimBackendTimingTest, PartialOccupancyKernelsRunSideBySide) {
  auto backend = MakeBackend(Unpaced());
  std::vector<StreamHandle> streams;
  for (int i = 0; i < 5; ++i) {
    streams.push_back(backend->CreateStream(0).value());
    ASSERT_TRUE(backend->Launch(Spin(100, kQuarter), streams.back()).ok());
  }
  // Four quarters fill the device; the fifth starts when one ends.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(TimeAfter(*backend, streams[i], 0), 100) << i;
  }
  EXPECT_EQ(TimeAfter(*backend, streams[4], 0), 200);
  // On device 1: a half fits beside a quarter, a second half does not.
  StreamHandle q = backend->CreateStream(1).value();
  StreamHandle h1 = backend->CreateStream(1).value();
  StreamHandle h2 = backend->CreateStream(1).value();
  const int32_t half = scheduler::kOccupancyUnits / 2;
  ASSERT_TRUE(backend->Launch(Spin(1000, kQuarter), q).ok());  // 0..1000
  ASSERT_TRUE(backend->Launch(Spin(100, half), h1).ok());      // 0..100
  ASSERT_TRUE(backend->Launch(Spin(100, half), h2).ok());      // 100..200
  EXPECT_EQ(TimeAfter(*backend, h1, 1), 100);
  EXPECT_EQ(TimeAfter(*backend, h2, 1), 200);
  EXPECT_EQ(TimeAfter(*backend, q, 1), 1000);
}

TEST(SimBackendTimingTest, KernelsOnTwoDevicesRunInParallel) {
  auto backend = MakeBackend(Unpaced());
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(1).value();
  ASSERT_TRUE(backend->Launch(Spin(100), a).ok());
  ASSERT_TRUE(backend->Launch(Spin(100), b).ok());
  EXPECT_EQ(TimeAfter(*backend, a, 0), 100);
  EXPECT_EQ(TimeAfter(*backend, b, 1), 100);
}

TEST(SimBackendTimingTest, CopyLaunchBooksTheDeviceToDeviceEngine) {
  SimBackend::Options options = Unpaced();
  // 1 GB/s everywhere: 1000 bytes per microsecond.
  options.bandwidth_gbps = {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
  auto backend = MakeBackend(options);
  DevicePtr x = backend->Allocate(0, 100000).value();
  DevicePtr y = backend->Allocate(0, 100000).value();
  DevicePtr w = backend->Allocate(0, 100000).value();
  DevicePtr z = backend->Allocate(1, 100000).value();
  StreamHandle copier = backend->CreateStream(0).value();
  StreamHandle kernel = backend->CreateStream(0).value();
  StreamHandle peer = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->Launch(FillF32(x, 100000, 2.5f), copier).ok());
  KernelLaunch copy;
  copy.op = "copy";
  copy.engine = scheduler::Engine::kCopy;
  copy.cost_us = 100;
  copy.args = {DeviceBufferArg{x, 100000, DType::kFloat32, Access::kRead},
               DeviceBufferArg{y, 100000, DType::kFloat32, Access::kWrite}};
  ASSERT_TRUE(backend->Launch(copy, copier).ok());
  // A full-occupancy kernel runs beside it: they use different units.
  ASSERT_TRUE(backend->Launch(Spin(100), kernel).ok());
  // A copy into device 0 from device 1 shares its device-to-device engine
  // with the COPY launch: it waits for it.
  ASSERT_TRUE(backend->CopyDeviceToDevice(w, z, 50000, peer).ok());
  EXPECT_EQ(TimeAfter(*backend, copier, 0), 100);
  EXPECT_EQ(TimeAfter(*backend, kernel, 0), 100);
  EXPECT_EQ(TimeAfter(*backend, peer, 0), 150);
  // The COPY launch still ran its op.
  EXPECT_EQ(FirstFloat(*backend, y, copier), 2.5f);
}

TEST(SimBackendTimingTest, PaddedUploadIsOneUploadOfAllItsBytes) {
  SimBackend::Options options = Unpaced();
  // 1 GB/s everywhere: 1000 bytes per microsecond.
  options.bandwidth_gbps = {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
  auto backend = MakeBackend(options);
  DevicePtr a = backend->Allocate(0, 100000).value();
  DevicePtr b = backend->Allocate(0, 100000).value();
  StreamHandle s = backend->CreateStream(0).value();
  const std::string full = "data" + std::string(100000 - 4, '\0');
  ASSERT_TRUE(backend->CopyHostToDevice(a, full.data(), 100000, s).ok());
  EXPECT_EQ(TimeAfter(*backend, s, 0), 100);
  ASSERT_TRUE(backend->CopyHostToDevicePadded(b, "data", 4, 100000, s).ok());
  EXPECT_EQ(TimeAfter(*backend, s, 0), 200);  // as long as the full one
  std::string back(100000, 'x');
  ASSERT_TRUE(backend->CopyDeviceToHost(back.data(), b, 100000, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_TRUE(back == full);
  // Only the data took host memory, on either path.
  EXPECT_EQ(backend->materialized_bytes(0), 8u);
  EXPECT_THAT(backend->CopyHostToDevicePadded(b, "data", 4, 3, s),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SimBackendTimingTest, DownloadIntoAHostBufferStoresOnlyUpToTheData) {
  SimBackend::Options options = Unpaced();
  // 1 GB/s everywhere: 1000 bytes per microsecond.
  options.bandwidth_gbps = {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
  auto backend = MakeBackend(options);
  constexpr uint64_t kBytes = 100000;
  DevicePtr untouched = backend->Allocate(0, kBytes).value();
  DevicePtr head = backend->Allocate(0, kBytes).value();
  StreamHandle s = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->CopyHostToDevicePadded(head, "data", 4, kBytes, s).ok());
  const double before = TimeAfter(*backend, s, 0);
  HostBuffer zeros, data;
  ASSERT_TRUE(
      backend->CopyDeviceToHostBuffer(&zeros, untouched, kBytes, s).ok());
  ASSERT_TRUE(backend->CopyDeviceToHostBuffer(&data, head, kBytes, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  // Timed as downloads of every byte.
  EXPECT_EQ(TimeAfter(*backend, s, 0) - before, 200);
  // Stored: nothing of the untouched buffer, the data of the other.
  EXPECT_EQ(zeros.size(), kBytes);
  EXPECT_EQ(zeros.stored_bytes(), 0u);
  EXPECT_EQ(data.size(), kBytes);
  EXPECT_EQ(data.stored_bytes(), 4u);
  EXPECT_EQ(data.ToString(), "data" + std::string(kBytes - 4, '\0'));
  // The same bytes as a plain download.
  std::string plain(kBytes, 'x');
  ASSERT_TRUE(backend->CopyDeviceToHost(plain.data(), head, kBytes, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_EQ(data.ToString(), plain);
}

TEST(SimBackendTimingTest, UploadAndDownloadOverlapButTwoUploadsDoNot) {
  SimBackend::Options options = Unpaced();
  options.bandwidth_gbps = {{0, 1, 1}, {1, 0, 1}, {1, 1, 0}};
  auto backend = MakeBackend(options);
  std::string in(100000, 'x'), out(100000, '\0');
  DevicePtr a = backend->Allocate(0, in.size()).value();
  DevicePtr b = backend->Allocate(0, in.size()).value();
  DevicePtr c = backend->Allocate(0, in.size()).value();
  StreamHandle up1 = backend->CreateStream(0).value();
  StreamHandle down = backend->CreateStream(0).value();
  StreamHandle up2 = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->CopyHostToDevice(a, in.data(), in.size(), up1).ok());
  ASSERT_TRUE(backend->CopyDeviceToHost(out.data(), c, in.size(), down).ok());
  ASSERT_TRUE(backend->CopyHostToDevice(b, in.data(), in.size(), up2).ok());
  EXPECT_EQ(TimeAfter(*backend, up1, 0), 100);
  EXPECT_EQ(TimeAfter(*backend, down, 0), 100);  // its own engine
  EXPECT_EQ(TimeAfter(*backend, up2, 0), 200);   // after the first upload
  // Another device's engines are its own.
  DevicePtr d = backend->Allocate(1, in.size()).value();
  StreamHandle up3 = backend->CreateStream(1).value();
  const double before = TimeAfter(*backend, up3, 1);
  ASSERT_TRUE(backend->CopyHostToDevice(d, in.data(), in.size(), up3).ok());
  EXPECT_EQ(TimeAfter(*backend, up3, 1) - before, 100);
}

TEST(SimBackendTimingTest, UnpacedKernelsBookSlotsInLaunchOrder) {
  TestKernels kernels;
  SimBackend::Options options = Unpaced();
  options.kernels = &kernels.table;
  options.max_concurrent_kernels = 1;
  auto backend = MakeBackend(options);
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(0).value();
  StreamHandle c = backend->CreateStream(1).value();
  EventHandle e = backend->CreateEvent(1).value();
  KernelLaunch block;
  block.op = "block";
  ASSERT_TRUE(backend->Launch(block, c).ok());
  ASSERT_TRUE(backend->RecordEvent(e, c).ok());
  // Launched first, but held up (in real time) by the wait.
  ASSERT_TRUE(backend->StreamWaitEvent(a, e).ok());
  ASSERT_TRUE(backend->Launch(Spin(100), a).ok());
  // Launched second and free to run at once: it still books after.
  ASSERT_TRUE(backend->Launch(Spin(50), b).ok());
  EventHandle after_b = backend->CreateEvent(0).value();
  ASSERT_TRUE(backend->RecordEvent(after_b, b).ok());
  EXPECT_FALSE(backend->QueryEvent(after_b).value());
  kernels.release.Notify();
  EXPECT_EQ(TimeAfter(*backend, a, 0), 100);
  EXPECT_EQ(TimeAfter(*backend, b, 0), 150);
}

// Copies book their engine in the order they were enqueued, as kernels do.
TEST(SimBackendTimingTest, UnpacedCopiesBookTheirEngineInEnqueueOrder) {
  TestKernels kernels;
  SimBackend::Options options = Unpaced();
  options.kernels = &kernels.table;
  options.bandwidth_gbps = {{0, 1, 1}, {1, 0, 1}, {1, 1, 0}};
  auto backend = MakeBackend(options);
  std::string in(100000, 'x');
  DevicePtr x = backend->Allocate(0, in.size()).value();
  DevicePtr y = backend->Allocate(0, in.size()).value();
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(0).value();
  StreamHandle c = backend->CreateStream(1).value();
  EventHandle e = backend->CreateEvent(1).value();
  KernelLaunch block;
  block.op = "block";
  ASSERT_TRUE(backend->Launch(block, c).ok());
  ASSERT_TRUE(backend->RecordEvent(e, c).ok());
  // Enqueued first, but held up (in real time) by the wait.
  ASSERT_TRUE(backend->StreamWaitEvent(a, e).ok());
  ASSERT_TRUE(backend->CopyHostToDevice(x, in.data(), in.size(), a).ok());
  // Enqueued second and free to run at once: it still books after.
  ASSERT_TRUE(backend->CopyHostToDevice(y, in.data(), in.size(), b).ok());
  // A kernel launched meanwhile books a unit of its own: no wait.
  StreamHandle k = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->Launch(Spin(10), k).ok());
  EXPECT_EQ(TimeAfter(*backend, k, 0), 10);
  EventHandle after_b = backend->CreateEvent(0).value();
  ASSERT_TRUE(backend->RecordEvent(after_b, b).ok());
  EXPECT_FALSE(backend->QueryEvent(after_b).value());
  kernels.release.Notify();
  EXPECT_EQ(TimeAfter(*backend, a, 0), 100);
  EXPECT_EQ(TimeAfter(*backend, b, 0), 200);
}

TEST(SimBackendTimingTest, CopiesSerializePerEngineAtTheTopologyBandwidth) {
  SimBackend::Options options = Unpaced();
  // GB/s, source row, destination column, host last: host->0 is 1 GB/s
  // (1000 bytes per microsecond), 0->1 is 10 GB/s, 0->host 2 GB/s.
  options.bandwidth_gbps = {{0, 10, 2}, {10, 0, 2}, {1, 1, 0}};
  auto backend = MakeBackend(options);
  std::string in(100000, 'x'), out(100000, '\0');
  DevicePtr d0 = backend->Allocate(0, in.size()).value();
  DevicePtr d0b = backend->Allocate(0, in.size()).value();
  DevicePtr d1 = backend->Allocate(1, in.size()).value();
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(0).value();
  // Two uploads to device 0 on different streams share its one H2D engine.
  ASSERT_TRUE(backend->CopyHostToDevice(d0, in.data(), in.size(), a).ok());
  ASSERT_TRUE(backend->CopyHostToDevice(d0b, in.data(), in.size(), b).ok());
  const double ta = TimeAfter(*backend, a, 0);
  const double tb = TimeAfter(*backend, b, 0);
  EXPECT_EQ(std::min(ta, tb), 100);  // 100000 bytes at 1000 bytes/us
  EXPECT_EQ(std::max(ta, tb), 200);
  // A peer copy and a download use other engines: they overlap.
  StreamHandle c = backend->CreateStream(0).value();
  StreamHandle d = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->CopyDeviceToDevice(d1, d0, in.size(), c).ok());
  ASSERT_TRUE(backend->CopyDeviceToHost(out.data(), d0, in.size(), d).ok());
  EXPECT_EQ(TimeAfter(*backend, c, 0), 10);  // 100000 bytes at 10 GB/s
  EXPECT_EQ(TimeAfter(*backend, d, 0), 50);  // at 2 GB/s
  EXPECT_EQ(out, in);
}

TEST(SimBackendTimingTest, DevicesWithoutALinkCopyThroughTheHost) {
  SimBackend::Options options = Unpaced();
  // No 0 <-> 1 link; 1 GB/s to and from the host.
  options.bandwidth_gbps = {{0, 0, 1}, {0, 0, 1}, {1, 1, 0}};
  auto backend = MakeBackend(options);
  DevicePtr d0 = backend->Allocate(0, 1000).value();
  DevicePtr d1 = backend->Allocate(1, 1000).value();
  StreamHandle s = backend->CreateStream(1).value();
  ASSERT_TRUE(backend->CopyDeviceToDevice(d1, d0, 1000, s).ok());
  EXPECT_EQ(TimeAfter(*backend, s, 1), 2);  // 1 us down, 1 us up
}

TEST(SimBackendTimingTest, RejectsABadTopology) {
  SimBackend::Options options = Unpaced();
  options.bandwidth_gbps = {{1, 1}, {1, 1}};  // 2 devices need 3 x 3
  auto backend = SimBackend::Create(options);
  EXPECT_THAT(backend.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("num_devices + 1 = 3")));
  options.bandwidth_gbps = {{1, 1, 1}, {1, 1}, {1, 1, 1}};
  EXPECT_THAT(SimBackend::Create(options).status().message(),
              HasSubstr("bandwidth_gbps[1] must have 3 entries"));
  options.bandwidth_gbps = {{0, 1, 1}, {1, 0, 1}, {1, 0, 0}};
  EXPECT_THAT(SimBackend::Create(options).status().message(),
              HasSubstr("device 1 needs a link to and from the host"));
  options.bandwidth_gbps = {{0, 1, 1}, {1, 0, -1}, {1, 1, 0}};
  EXPECT_THAT(SimBackend::Create(options).status().message(),
              HasSubstr("bandwidth_gbps[1][2] must be >= 0"));
  options = Unpaced();
  options.max_concurrent_kernels = 0;
  EXPECT_THAT(SimBackend::Create(options).status().message(),
              HasSubstr("max_concurrent_kernels"));
}

TEST(SimBackendTimingTest, PacedClockTakesRealTime) {
  SimBackend::Options options = FastOptions();
  options.time_scale = 1;
  auto backend = MakeBackend(options);
  StreamHandle s = backend->CreateStream(0).value();
  const absl::Time start = absl::Now();
  ASSERT_TRUE(backend->Launch(Spin(10000), s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(10));
}

TEST(SimBackendBatchTest, BatchHoldsWorkUntilItEnds) {
  auto backend = MakeBackend(Unpaced());
  StreamHandle s = backend->CreateStream(0).value();
  absl::Notification ran;
  backend->BeginBatch();
  ASSERT_TRUE(backend->Launch(Spin(1), s).ok());
  ASSERT_TRUE(
      backend->AddHostCallback(s, [&](absl::Status) { ran.Notify(); }).ok());
  EXPECT_FALSE(ran.WaitForNotificationWithTimeout(absl::Milliseconds(30)));
  backend->EndBatch();
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(20)));
  // Synchronizing inside a batch releases what it waits for.
  backend->BeginBatch();
  ASSERT_TRUE(backend->Launch(Spin(1), s).ok());
  EXPECT_TRUE(backend->SynchronizeStream(s).ok());
  backend->EndBatch();
}

TEST(SimBackendBatchTest, SynchronizingFromAnotherThreadReleasesHeldWork) {
  auto backend = MakeBackend(Unpaced());
  StreamHandle s = backend->CreateStream(0).value();
  std::atomic<int> callbacks{0};
  backend->BeginBatch();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(backend->Launch(Spin(1), s).ok());
    ASSERT_TRUE(
        backend->AddHostCallback(s, [&](absl::Status) { ++callbacks; }).ok());
  }
  // The batch is still open on this thread; another thread's synchronizing
  // call waits for the work held in it, and gets it started.
  std::thread other([&] {
    EXPECT_TRUE(backend->SynchronizeStream(s).ok());
    EXPECT_EQ(callbacks.load(), 10);
  });
  other.join();
  backend->EndBatch();
}

TEST(SimBackendBatchTest, StreamDestroyedInsideABatchIsNotFound) {
  auto backend = MakeBackend(Unpaced());
  StreamHandle s = backend->CreateStream(0).value();
  StreamHandle t = backend->CreateStream(1).value();
  backend->BeginBatch();
  ASSERT_TRUE(backend->Launch(Spin(1), s).ok());
  ASSERT_TRUE(backend->Launch(Spin(1), t).ok());
  ASSERT_TRUE(backend->DestroyStream(s).ok());
  EXPECT_THAT(backend->Launch(Spin(1), s),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(backend->AddHostCallback(s, [](absl::Status) {}),
              StatusIs(absl::StatusCode::kNotFound));
  // Destroyed by another thread while this one is inside its batch.
  std::thread other([&] { ASSERT_TRUE(backend->DestroyStream(t).ok()); });
  other.join();
  EXPECT_THAT(backend->Launch(Spin(1), t),
              StatusIs(absl::StatusCode::kNotFound));
  backend->EndBatch();
}

TEST(SimBackendBatchTest, ManyStreamsKeepTheirOrderInsideABatch) {
  auto backend = MakeBackend(Unpaced());
  constexpr int kStreams = 40;
  constexpr int kRounds = 50;
  std::vector<StreamHandle> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(backend->CreateStream(i % 2).value());
  }
  absl::Mutex mu;
  std::vector<std::vector<int>> seen(kStreams);
  backend->BeginBatch();
  for (int r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kStreams; ++i) {
      ASSERT_TRUE(backend->Launch(Spin(1), streams[i]).ok());
      ASSERT_TRUE(backend
                      ->AddHostCallback(streams[i],
                                        [&, i, r](absl::Status status) {
                                          EXPECT_TRUE(status.ok());
                                          absl::MutexLock lock(&mu);
                                          seen[i].push_back(r);
                                        })
                      .ok());
    }
  }
  backend->EndBatch();
  for (StreamHandle s : streams) {
    ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  }
  absl::MutexLock lock(&mu);
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_EQ(seen[i].size(), static_cast<size_t>(kRounds)) << i;
    for (int r = 0; r < kRounds; ++r) EXPECT_EQ(seen[i][r], r);
  }
}

// ---- Launch records (pooled: taken per launch, given back when its work
// is done or dropped).

TEST(SimBackendRecordTest, ReusedRecordsCarryNothingOver) {
  SimBackend::Options options = Unpaced();
  options.launch_faults.push_back({0, 1, absl::DataLossError("flipped")});
  auto backend = MakeBackend(options);
  StreamHandle s = backend->CreateStream(0).value();
  DevicePtr x = backend->Allocate(0, 16).value();
  // The first launch fails; its record goes back with the fault.
  ASSERT_TRUE(backend->SetErrorScope(s, 1).ok());
  ASSERT_TRUE(backend->Launch(Spin(10), s).ok());
  EXPECT_THAT(backend->SynchronizeStream(s),
              StatusIs(absl::StatusCode::kDataLoss));
  ASSERT_TRUE(backend->SetErrorScope(s, 2).ok());
  double expected_us = 0;
  for (int i = 0; i < 200; ++i) {
    const bool batch = i % 3 == 0;
    if (batch) backend->BeginBatch();
    // With and without arguments, with a duration (booked in launch order)
    // and without.
    KernelLaunch fill = FillF32(x, 16, static_cast<float>(i));
    fill.cost_us = i % 2 == 0 ? 1 : 0;
    expected_us += fill.cost_us;
    ASSERT_TRUE(backend->Launch(fill, s).ok());
    ASSERT_TRUE(backend->Launch(Spin(i % 4 == 0 ? 2 : 0), s).ok());
    expected_us += i % 4 == 0 ? 2 : 0;
    if (batch) backend->EndBatch();
    if (i % 10 == 9) {
      ASSERT_EQ(FirstFloat(*backend, x, s), static_cast<float>(i)) << i;
    }
  }
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  // The faulted launch lasted nothing: it never ran.
  EXPECT_EQ(TimeAfter(*backend, s, 0), expected_us);
}

TEST(SimBackendRecordTest, SkippedLaunchGivesUpItsTurn) {
  SimBackend::Options options = Unpaced();
  options.max_concurrent_kernels = 1;
  options.launch_faults.push_back({0, 1, absl::DataLossError("flipped")});
  auto backend = MakeBackend(options);
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->Launch(Spin(10), a).ok());   // fails
  ASSERT_TRUE(backend->Launch(Spin(100), a).ok());  // skipped, never books
  ASSERT_TRUE(backend->Launch(Spin(50), b).ok());   // books after both
  EXPECT_THAT(backend->SynchronizeStream(a),
              StatusIs(absl::StatusCode::kDataLoss));
  ASSERT_TRUE(backend->SynchronizeStream(b).ok());
  EXPECT_EQ(TimeAfter(*backend, b, 0), 50);
}

TEST(SimBackendRecordTest, ThreadsLaunchingAtOnceShareThePool) {
  auto backend = MakeBackend(Unpaced());
  constexpr int kThreads = 4;
  constexpr int kLaunches = 300;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&backend, t] {
      StreamHandle s = backend->CreateStream(t % 2).value();
      DevicePtr x = backend->Allocate(t % 2, 16).value();
      for (int i = 0; i < kLaunches; ++i) {
        const bool batch = (i / 7) % 2 == 0;
        if (batch) backend->BeginBatch();
        KernelLaunch fill = FillF32(x, 16, static_cast<float>(t * 1000 + i));
        fill.cost_us = i % 2;
        ASSERT_TRUE(backend->Launch(fill, s).ok());
        if (batch) backend->EndBatch();
      }
      EXPECT_EQ(FirstFloat(*backend, x, s),
                static_cast<float>(t * 1000 + kLaunches - 1));
    });
  }
  for (std::thread& thread : threads) thread.join();
}

// ---- Error scopes, gates and faults.

TEST(SimBackendScopeTest, FailureStaysInItsScope) {
  TestKernels kernels;
  SimBackend::Options options = Unpaced();
  options.kernels = &kernels.table;
  auto backend = MakeBackend(options);
  StreamHandle s = backend->CreateStream(0).value();
  DevicePtr p = backend->Allocate(0, 4).value();
  absl::Status seen_a, seen_b;
  KernelLaunch boom;
  boom.op = "boom";
  ASSERT_TRUE(backend->SetErrorScope(s, 1).ok());
  ASSERT_TRUE(backend->Launch(boom, s).ok());
  ASSERT_TRUE(backend->SetErrorScope(s, 2).ok());
  ASSERT_TRUE(backend->Launch(FillF32(p, 4, 5), s).ok());
  ASSERT_TRUE(
      backend->AddHostCallback(s, [&](absl::Status st) { seen_b = st; }).ok());
  ASSERT_TRUE(backend->SetErrorScope(s, 1).ok());
  ASSERT_TRUE(
      backend->AddHostCallback(s, [&](absl::Status st) { seen_a = st; }).ok());
  EXPECT_THAT(backend->SynchronizeStream(s),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_TRUE(seen_b.ok()) << seen_b;
  EXPECT_THAT(seen_a.message(), HasSubstr("boom went off"));
  float value = 0;
  ASSERT_TRUE(backend->SetErrorScope(s, 2).ok());
  ASSERT_TRUE(backend->CopyDeviceToHost(&value, p, 4, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_EQ(value, 5.0f);
}

// On one worker, a kernel that reaches its slot before an earlier launch
// parks its stream until that launch has booked: the worker runs the
// earlier launch's stream meanwhile.
TEST(SimBackendTimingTest, LaunchOrderHoldsOnASingleWorker) {
  SimBackend::Options options = OnOneWorker(Unpaced());
  options.max_concurrent_kernels = 1;
  auto backend = MakeBackend(options);
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(0).value();
  GateHandle gate = backend->EnqueueHostGate(a).value();
  ASSERT_TRUE(backend->Launch(Spin(100), a).ok());
  ASSERT_TRUE(backend->Launch(Spin(50), b).ok());
  EventHandle after_b = backend->CreateEvent(0).value();
  ASSERT_TRUE(backend->RecordEvent(after_b, b).ok());
  EXPECT_FALSE(backend->QueryEvent(after_b).value());
  ASSERT_TRUE(backend->OpenHostGate(gate, absl::OkStatus(), 0).ok());
  EXPECT_EQ(TimeAfter(*backend, a, 0), 100);
  EXPECT_EQ(TimeAfter(*backend, b, 0), 150);
  EXPECT_EQ(backend->worker_threads(), 1);
}

// Many streams chained by events on one worker: every wait parks, none
// holds the thread, and the chain's time adds up.
TEST(SimBackendTimingTest, ManyStreamsOnOneWorker) {
  auto backend = MakeBackend(OnOneWorker(Unpaced()));
  constexpr int kStreams = 24;
  std::vector<StreamHandle> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(backend->CreateStream(i % 2).value());
  }
  // Held until the end of the batch, then released in creation order: the
  // worker may reach a wait before the stream it waits for has run.
  backend->BeginBatch();
  for (int i = 0; i < kStreams; ++i) {
    if (i > 0) {
      EventHandle e = backend->CreateEvent((i - 1) % 2).value();
      ASSERT_TRUE(backend->RecordEvent(e, streams[i - 1]).ok());
      ASSERT_TRUE(backend->StreamWaitEvent(streams[i], e).ok());
    }
    ASSERT_TRUE(backend->Launch(Spin(10), streams[i]).ok());
  }
  backend->EndBatch();
  EXPECT_EQ(TimeAfter(*backend, streams[kStreams - 1], 1), 10 * kStreams);
  EXPECT_EQ(backend->worker_threads(), 1);
}

TEST(SimBackendGateTest, GateHoldsTheStreamAndAddsTheHostTime) {
  auto backend = MakeBackend(Unpaced());
  ASSERT_TRUE(backend->supports_host_gates());
  StreamHandle s = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->Launch(Spin(10), s).ok());
  GateHandle gate = backend->EnqueueHostGate(s).value();
  ASSERT_TRUE(backend->Launch(Spin(5), s).ok());
  EventHandle e = backend->CreateEvent(0).value();
  ASSERT_TRUE(backend->RecordEvent(e, s).ok());
  absl::SleepFor(absl::Milliseconds(10));
  EXPECT_FALSE(backend->QueryEvent(e).value());
  ASSERT_TRUE(backend->OpenHostGate(gate, absl::OkStatus(), 100).ok());
  EXPECT_THAT(backend->OpenHostGate(gate, absl::OkStatus(), 0),
              StatusIs(absl::StatusCode::kNotFound));
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_EQ(backend->EventTimeUs(e).value(), 115);
}

TEST(SimBackendFaultTest, FailsTheNthLaunchOnADevice) {
  SimBackend::Options options = Unpaced();
  options.launch_faults.push_back({1, 2, absl::DataLossError("flipped bits")});
  auto backend = MakeBackend(options);
  StreamHandle s0 = backend->CreateStream(0).value();
  StreamHandle s1 = backend->CreateStream(1).value();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(backend->Launch(Spin(1), s0).ok());
  ASSERT_TRUE(backend->Launch(Spin(1), s1).ok());
  std::vector<absl::Status> seen;
  absl::Mutex mu;
  ASSERT_TRUE(backend
                  ->AddHostCallback(s1,
                                    [&](absl::Status st) {
                                      absl::MutexLock lock(&mu);
                                      seen.push_back(st);
                                    })
                  .ok());
  ASSERT_TRUE(backend->Launch(Spin(1), s1).ok());  // the 2nd on device 1
  absl::Status status = backend->SynchronizeStream(s1);
  EXPECT_THAT(status,
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("flipped bits"),
                             HasSubstr("launch 2 on device 1, op 'spin'"))));
  EXPECT_TRUE(backend->SynchronizeStream(s0).ok());  // device 0 unharmed
  absl::MutexLock lock(&mu);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].ok());  // before the fault
}

TEST(SimBackendFaultTest, FailsTheNthLaunchOverall) {
  auto backend = MakeBackend(Unpaced());
  StreamHandle s0 = backend->CreateStream(0).value();
  StreamHandle s1 = backend->CreateStream(1).value();
  ASSERT_TRUE(backend->Launch(Spin(1), s0).ok());  // before arming
  ASSERT_TRUE(
      backend->InjectLaunchFault({-1, 2, absl::InternalError("zap")}).ok());
  ASSERT_TRUE(backend->Launch(Spin(1), s0).ok());
  ASSERT_TRUE(backend->Launch(Spin(1), s1).ok());  // 2nd since arming
  EXPECT_TRUE(backend->SynchronizeStream(s0).ok());
  absl::Status status = backend->SynchronizeStream(s1);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInternal,
                               HasSubstr("zap (launch 3 overall")));
  EXPECT_THAT(backend->InjectLaunchFault({2, 1, absl::InternalError("x")}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      backend->InjectLaunchFault({0, 0, absl::InternalError("x")}).message(),
      HasSubstr("nth counts from 1"));
  EXPECT_THAT(backend->InjectLaunchFault({0, 1, absl::OkStatus()}).message(),
              HasSubstr("must be an error"));
}

TEST(SimBackendFaultTest, LostDeviceFailsEverythingOnItOnly) {
  TestKernels kernels;
  SimBackend::Options options = Unpaced();
  options.kernels = &kernels.table;
  auto backend = MakeBackend(options);
  StreamHandle s0 = backend->CreateStream(0).value();
  StreamHandle s1 = backend->CreateStream(1).value();
  KernelLaunch block;
  block.op = "block";
  ASSERT_TRUE(backend->Launch(block, s1).ok());
  ASSERT_TRUE(backend->Launch(Spin(1), s1).ok());  // queued behind it
  absl::Status seen;
  ASSERT_TRUE(
      backend->AddHostCallback(s1, [&](absl::Status st) { seen = st; }).ok());
  ASSERT_TRUE(backend->LoseDevice(1, "fell off the bus").ok());
  EXPECT_TRUE(backend->device_lost(1));
  kernels.release.Notify();
  absl::Status status = backend->SynchronizeStream(s1);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable,
                               AllOf(HasSubstr("device 1"),
                                     HasSubstr("was lost: fell off the bus"))));
  EXPECT_THAT(seen, StatusIs(absl::StatusCode::kUnavailable));
  // Later calls fail at once.
  EXPECT_THAT(backend->Launch(Spin(1), s1),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(backend->CreateStream(1).status(),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(backend->Allocate(1, 16).status(),
              StatusIs(absl::StatusCode::kUnavailable));
  // Device 0 carries on.
  EXPECT_FALSE(backend->device_lost(0));
  ASSERT_TRUE(backend->Launch(Spin(1), s0).ok());
  EXPECT_TRUE(backend->SynchronizeStream(s0).ok());
}

// ---- Memory contents: host memory only where real contents are needed.

TEST(SimBackendMemoryTest, SpinsOnLargeBuffersMaterializeNothing) {
  SimBackend::Options options = Unpaced();
  options.memory_bytes = uint64_t{1} << 30;
  auto backend = MakeBackend(options);
  constexpr uint64_t kBig = uint64_t{256} << 20;
  DevicePtr a = backend->Allocate(0, kBig).value();
  DevicePtr b = backend->Allocate(0, kBig).value();
  DevicePtr c = backend->Allocate(1, kBig).value();
  EXPECT_EQ(backend->memory_used_bytes(0), 2 * kBig);  // accounted by size
  StreamHandle s0 = backend->CreateStream(0).value();
  StreamHandle s1 = backend->CreateStream(1).value();
  KernelLaunch spin = Spin(10);
  spin.args = {DeviceBufferArg{a, kBig, DType::kFloat32, Access::kRead},
               DeviceBufferArg{b, kBig, DType::kFloat32, Access::kReadWrite}};
  // Zero fills, spins and copies between memory without contents.
  KernelLaunch zero;
  zero.op = "fill";
  zero.args = {DeviceBufferArg{a, kBig, DType::kBytes, Access::kWrite}, 0.0};
  ASSERT_TRUE(backend->Launch(zero, s0).ok());
  ASSERT_TRUE(backend->Launch(FillF32(b, kBig, 0.0f), s0).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(backend->Launch(spin, s0).ok());
  ASSERT_TRUE(backend->CopyDeviceToDevice(b, a, kBig, s0).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s0).ok());
  ASSERT_TRUE(backend->CopyDeviceToDevice(c, b, kBig, s1).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s1).ok());
  EXPECT_EQ(backend->materialized_bytes(0), 0u);
  EXPECT_EQ(backend->materialized_bytes(1), 0u);
  // Reading memory without contents sees zeros.
  std::vector<char> out(4096, 'x');
  ASSERT_TRUE(backend->CopyDeviceToHost(out.data(), c, out.size(), s1).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s1).ok());
  EXPECT_EQ(out, std::vector<char>(out.size(), '\0'));
  EXPECT_EQ(backend->materialized_bytes(1), 0u);
  // The timing is the model's all the same: four spins of 10 us (the
  // fills cost nothing, the copies are instantaneous here).
  EXPECT_EQ(TimeAfter(*backend, s0, 0), 40);
}

TEST(SimBackendMemoryTest, RealOpsGetContentsAndComputeRight) {
  auto backend = MakeBackend(Unpaced());
  constexpr uint64_t kBytes = 4096;
  constexpr int kFloats = kBytes / sizeof(float);
  DevicePtr x = backend->Allocate(0, kBytes).value();
  DevicePtr y = backend->Allocate(0, kBytes).value();
  DevicePtr z = backend->Allocate(0, kBytes).value();
  StreamHandle s = backend->CreateStream(0).value();
  // fill(x, 2); y stays without contents (zeros); y = 3 * x + y.
  ASSERT_TRUE(backend->Launch(FillF32(x, kBytes, 2.0f), s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_EQ(backend->materialized_bytes(0), kBytes);
  KernelLaunch axpy;
  axpy.op = "axpy";
  axpy.args = {3.0f, DeviceBufferArg{x, kBytes, DType::kFloat32, Access::kRead},
               DeviceBufferArg{y, kBytes, DType::kFloat32, Access::kReadWrite}};
  ASSERT_TRUE(backend->Launch(axpy, s).ok());
  std::vector<float> out(kFloats);
  ASSERT_TRUE(backend->CopyDeviceToHost(out.data(), y, kBytes, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_THAT(out, ::testing::Each(6.0f));
  EXPECT_EQ(backend->materialized_bytes(0), 2 * kBytes);
  // A zero fill of memory with contents does write zeros, and a copy from
  // memory without contents (z) over it does too.
  ASSERT_TRUE(backend->Launch(FillF32(x, kBytes, 0.0f), s).ok());
  ASSERT_TRUE(backend->CopyDeviceToHost(out.data(), x, kBytes, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_THAT(out, ::testing::Each(0.0f));
  ASSERT_TRUE(backend->CopyDeviceToDevice(y, z, kBytes, s).ok());
  ASSERT_TRUE(backend->CopyDeviceToHost(out.data(), y, kBytes, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_THAT(out, ::testing::Each(0.0f));
  EXPECT_EQ(backend->materialized_bytes(0), 2 * kBytes);  // z still none
  // A -0.0 fill is not all zero bytes: it gets contents.
  ASSERT_TRUE(backend->Launch(FillF32(z, kBytes, -0.0f), s).ok());
  ASSERT_TRUE(backend->CopyDeviceToHost(out.data(), z, kBytes, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_TRUE(std::signbit(out[0]));
  // An upload gives contents; freeing gives the host memory back.
  DevicePtr u = backend->Allocate(0, 8).value();
  const char data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(backend->CopyHostToDevice(u, data, 8, s).ok());
  char back[8] = {};
  ASSERT_TRUE(backend->CopyDeviceToHost(back, u, 8, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_EQ(std::memcmp(back, data, 8), 0);
  EXPECT_EQ(backend->materialized_bytes(0), 3 * kBytes + 8);
  for (DevicePtr p : {x, y, z, u}) ASSERT_TRUE(backend->Free(p).ok());
  EXPECT_EQ(backend->materialized_bytes(0), 0u);
}

TEST(SimBackendMemoryTest, ZerosAfterDataAndZeroFillsTakeNoHostMemory) {
  SimBackend::Options options = Unpaced();
  options.memory_bytes = uint64_t{2} << 30;
  auto backend = MakeBackend(options);
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  DevicePtr a = backend->Allocate(0, kGiB).value();
  DevicePtr b = backend->Allocate(1, kGiB).value();
  StreamHandle s = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->CopyHostToDevicePadded(a, "x", 1, kGiB, s).ok());
  ASSERT_TRUE(backend->CopyDeviceToDevice(b, a, kGiB, s).ok());
  KernelLaunch zero;
  zero.op = "fill";
  zero.args = {DeviceBufferArg{a, kGiB, DType::kBytes, Access::kWrite}, 0.0};
  ASSERT_TRUE(backend->Launch(zero, s).ok());
  char head[2] = {'?', '?'};
  ASSERT_TRUE(backend->CopyDeviceToHost(head, a, 2, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_EQ(head[0], 0);  // cleared
  ASSERT_TRUE(backend->CopyDeviceToHost(head, b, 2, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_EQ(std::string(head, 2), std::string("x\0", 2));
  EXPECT_EQ(backend->materialized_bytes(0), 1u);
  EXPECT_EQ(backend->materialized_bytes(1), 1u);
  // A kernel computing on the cleared range reads zeros there.
  KernelLaunch sum;
  sum.op = "reduce_sum";
  DevicePtr total = backend->Allocate(0, 4).value();
  sum.args = {DeviceBufferArg{a, 4096, DType::kFloat32, Access::kRead},
              DeviceBufferArg{total, 4, DType::kFloat32, Access::kWrite}};
  ASSERT_TRUE(backend->Launch(sum, s).ok());
  EXPECT_EQ(FirstFloat(*backend, total, s), 0.0f);
}

// ---- Paced: the host's time running the work is not device time.

TEST(SimBackendTimingTest, PacedHostWorkDoesNotDelayVirtualTime) {
  CpuKernelTable table = CpuKernelTable::WithBuiltins();
  // A kernel whose CPU implementation takes far longer than its cost.
  ASSERT_TRUE(table
                  .Register("slow",
                            [](absl::Span<const HostArg>) {
                              absl::SleepFor(absl::Milliseconds(100));
                              return absl::OkStatus();
                            })
                  .ok());
  SimBackend::Options options = FastOptions();
  options.time_scale = 1;
  options.kernels = &table;
  auto backend = MakeBackend(options);
  StreamHandle s = backend->CreateStream(0).value();
  const double enqueued = backend->NowUs();
  KernelLaunch slow;
  slow.op = "slow";
  slow.cost_us = 1000;
  ASSERT_TRUE(backend->Launch(slow, s).ok());
  ASSERT_TRUE(backend->Launch(Spin(1000), s).ok());
  const double end = TimeAfter(*backend, s, 0);
  // 2 ms of model from when the work was enqueued (give or take the time
  // the test took to enqueue it), not 100 ms of host time plus 1 ms.
  EXPECT_GE(end, enqueued + 2000);
  EXPECT_LT(end, enqueued + 2000 + 50000);
}

// ---- User kernels: not run, only timed.

TEST(SimBackendUserKernelTest, TakesItsCostAndLeavesBuffersUnchanged) {
  auto backend = MakeBackend(Unpaced());
  StreamHandle s = backend->CreateStream(0).value();
  DevicePtr p = backend->Allocate(0, 16).value();
  ASSERT_TRUE(backend->Launch(FillF32(p, 16, 3.0f), s).ok());

  scheduler::ModuleSpec module;
  module.name = "m";
  module.code = "this is not CUDA and is never compiled here";
  scheduler::KernelSpec spec;
  spec.module = 0;
  spec.kernel = "k";
  KernelLaunch launch;
  launch.op = std::string(scheduler::kUserKernelOp);
  launch.cost_us = 250;
  launch.user_kernel = &spec;
  launch.module = &module;
  launch.args = {DeviceBufferArg{p, 16, DType::kFloat32, Access::kReadWrite},
                 2.0f, int64_t{4}};
  const double before = TimeAfter(*backend, s, 0);
  ASSERT_TRUE(backend->Launch(launch, s).ok());
  EXPECT_DOUBLE_EQ(TimeAfter(*backend, s, 0) - before, 250);

  float out[4] = {};
  ASSERT_TRUE(backend->CopyDeviceToHost(out, p, 16, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  for (float v : out) EXPECT_EQ(v, 3.0f);
}

TEST(SimBackendUserKernelTest, StillChecksBufferAddresses) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(0).value();
  scheduler::ModuleSpec module;
  scheduler::KernelSpec spec;
  KernelLaunch launch;
  launch.op = std::string(scheduler::kUserKernelOp);
  launch.user_kernel = &spec;
  launch.module = &module;
  launch.args = {
      DeviceBufferArg{DevicePtr{0, 12345}, 16, DType::kFloat32, Access::kRead}};
  const absl::Status status = backend->Launch(launch, s);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("[0x3039, +16) is not inside an allocation"));
}

TEST(SimBackendUserKernelTest, AcceptsEveryModule) {
  auto backend = MakeBackend(FastOptions());
  scheduler::ModuleSpec module;
  module.name = "bad";
  module.code = "not even close to CUDA";
  scheduler::Graph graph("g", {}, {}, {module});
  EXPECT_TRUE(backend->PrepareModules(graph).ok());
}

// ---- Interruption: aborting a scope stops its work in progress.

SimBackend::Options Paced() {
  SimBackend::Options options = FastOptions();
  options.time_scale = 1;
  return options;
}

// Adds a host callback to `s` that stores its status and notifies.
void Notify(SimBackend& backend, StreamHandle s, absl::Status* seen,
            absl::Notification* done) {
  ASSERT_TRUE(backend
                  .AddHostCallback(s,
                                   [seen, done](absl::Status status) {
                                     *seen = std::move(status);
                                     done->Notify();
                                   })
                  .ok());
}

TEST(SimBackendInterruptTest, AbortStopsARunningSpinAndFreesItsDevice) {
  auto backend = MakeBackend(Paced());
  EXPECT_TRUE(backend->interrupts_aborted_work());
  StreamHandle s = backend->CreateStream(0).value();
  StreamHandle other = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->SetErrorScope(s, 1).ok());
  ASSERT_TRUE(backend->Launch(Spin(20e6), s).ok());  // 20 s
  absl::Status seen;
  absl::Notification done;
  Notify(*backend, s, &seen, &done);
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time aborted = absl::Now();
  ASSERT_TRUE(
      backend->AbortErrorScope(s, 1, absl::CancelledError("job cancelled"))
          .ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(2)));
  EXPECT_LT(absl::Now() - aborted, absl::Seconds(2));
  EXPECT_THAT(seen, StatusIs(absl::StatusCode::kCancelled));
  // The device's time after the interruption is free: a full-device kernel
  // on another stream starts at once, not after 20 s.
  const absl::Time next = absl::Now();
  ASSERT_TRUE(backend->Launch(Spin(1000), other).ok());
  EXPECT_LT(TimeAfter(*backend, other, 0), 3e6);
  EXPECT_LT(absl::Now() - next, absl::Seconds(2));
  // And the interrupted stream serves the next scope at once.
  ASSERT_TRUE(backend->SetErrorScope(s, 2).ok());
  ASSERT_TRUE(backend->Launch(Spin(1000), s).ok());
  EXPECT_LT(TimeAfter(*backend, s, 0), 3e6);
}

TEST(SimBackendInterruptTest, AbortStopsAGraphChainAndFreesItsDevice) {
  auto backend = MakeBackend(Paced());
  StreamHandle s = backend->CreateStream(0).value();
  StreamHandle other = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->SetErrorScope(s, 1).ok());
  // A graph of two 20 s spins in a chain: one stream item, which books
  // both at once on a paced clock ([0, 20 s] and [20 s, 40 s]).
  DeviceGraph chain;
  const int first = chain.AddKernel(Spin(20e6), {});
  chain.AddKernel(Spin(20e6), {first});
  ASSERT_TRUE(backend->LaunchDeviceGraph(chain, s).ok());
  absl::Status seen;
  absl::Notification done;
  Notify(*backend, s, &seen, &done);
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(
      backend->AbortErrorScope(s, 1, absl::CancelledError("job cancelled"))
          .ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(2)));
  EXPECT_THAT(seen, StatusIs(absl::StatusCode::kCancelled));
  // Both bookings were given back: a full-device kernel on another stream
  // starts at once, neither after 20 s nor after 40 s.
  ASSERT_TRUE(backend->Launch(Spin(1000), other).ok());
  EXPECT_LT(TimeAfter(*backend, other, 0), 3e6);
}

TEST(SimBackendPacedTest, AJobWaitingOnTheHostHoldsUpNoOtherJob) {
  auto backend = MakeBackend(Paced());
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->SetErrorScope(a, 1).ok());
  ASSERT_TRUE(backend->SetErrorScope(b, 2).ok());
  // Job 1's kernel waits behind host work; job 2's is enqueued after it
  // on the same device.
  GateHandle gate = backend->EnqueueHostGate(a).value();
  ASSERT_TRUE(backend->Launch(Spin(1000), a).ok());
  ASSERT_TRUE(backend->Launch(Spin(1000), b).ok());
  absl::Status seen;
  absl::Notification done;
  Notify(*backend, b, &seen, &done);
  // Each job books in its own order: job 2's kernel runs meanwhile.
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(seen.ok()) << seen;
  ASSERT_TRUE(backend->OpenHostGate(gate, absl::OkStatus(), 0).ok());
  EXPECT_TRUE(backend->SynchronizeStream(a).ok());
  EXPECT_TRUE(backend->SynchronizeStream(b).ok());
}

TEST(SimBackendInterruptTest, AbortGivesBackBookingsThatHadNotStarted) {
  auto backend = MakeBackend(Paced());
  std::vector<StreamHandle> streams;
  std::vector<absl::Status> seen(64);
  std::vector<absl::Notification> done(64);
  // 64 full-device spins of 20 s on one device: booked one after the
  // other, the last ends after 21 minutes.
  for (int i = 0; i < 64; ++i) {
    streams.push_back(backend->CreateStream(0).value());
    ASSERT_TRUE(backend->SetErrorScope(streams[i], 1).ok());
    ASSERT_TRUE(backend->Launch(Spin(20e6), streams[i]).ok());
    Notify(*backend, streams[i], &seen[i], &done[i]);
  }
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time aborted = absl::Now();
  for (StreamHandle s : streams) {
    ASSERT_TRUE(
        backend->AbortErrorScope(s, 1, absl::CancelledError("job cancelled"))
            .ok());
  }
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(done[i].WaitForNotificationWithTimeout(absl::Seconds(2)))
        << "stream " << i;
    EXPECT_THAT(seen[i], StatusIs(absl::StatusCode::kCancelled));
  }
  EXPECT_LT(absl::Now() - aborted, absl::Seconds(2));
  StreamHandle fresh = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->Launch(Spin(1000), fresh).ok());
  EXPECT_LT(TimeAfter(*backend, fresh, 0), 3e6);
}

TEST(SimBackendInterruptTest, OtherScopesKeepTheirWork) {
  auto backend = MakeBackend(Paced());
  StreamHandle a = backend->CreateStream(0).value();
  StreamHandle b = backend->CreateStream(0).value();
  // Quarter-device spins side by side: b's is not disturbed by a's abort.
  ASSERT_TRUE(backend->SetErrorScope(a, 1).ok());
  ASSERT_TRUE(backend->Launch(Spin(20e6, kQuarter), a).ok());
  ASSERT_TRUE(backend->SetErrorScope(b, 2).ok());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(backend->Launch(Spin(200000, kQuarter), b).ok());  // 200 ms
  ASSERT_TRUE(
      backend->AbortErrorScope(a, 1, absl::CancelledError("job cancelled"))
          .ok());
  EXPECT_THAT(backend->SynchronizeStream(a),
              StatusIs(absl::StatusCode::kCancelled));
  ASSERT_TRUE(backend->SynchronizeStream(b).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
}

TEST(SimBackendInterruptTest, WithoutInterruptionRunningWorkFinishes) {
  SimBackend::Options options = Paced();
  options.interrupt_aborted_work = false;
  auto backend = MakeBackend(options);
  EXPECT_FALSE(backend->interrupts_aborted_work());
  StreamHandle s = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->SetErrorScope(s, 1).ok());
  const absl::Time start = absl::Now();
  ASSERT_TRUE(backend->Launch(Spin(300000), s).ok());  // 300 ms
  ASSERT_TRUE(backend->Launch(Spin(20e6), s).ok());    // skipped
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_TRUE(
      backend->AbortErrorScope(s, 1, absl::CancelledError("job cancelled"))
          .ok());
  EXPECT_THAT(backend->SynchronizeStream(s),
              StatusIs(absl::StatusCode::kCancelled));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(300));
  EXPECT_LT(took, absl::Seconds(10));
}

TEST(SimBackendInterruptTest, AbsurdCostsAreClampedNotOverflowed) {
  auto backend = MakeBackend(Unpaced());
  StreamHandle s = backend->CreateStream(0).value();
  ASSERT_TRUE(backend->Launch(Spin(1e18), s).ok());
  ASSERT_TRUE(backend->Launch(Spin(kInfinite), s).ok());
  ASSERT_TRUE(backend->Launch(Spin(std::nan("")), s).ok());
  ASSERT_TRUE(backend->Launch(Spin(-5), s).ok());
  EXPECT_EQ(TimeAfter(*backend, s, 0), 2 * SimBackend::kMaxDurationUs);

  // Paced, an endless spin is interrupted like any other.
  auto paced = MakeBackend(Paced());
  StreamHandle p = paced->CreateStream(1).value();
  ASSERT_TRUE(paced->SetErrorScope(p, 3).ok());
  ASSERT_TRUE(paced->Launch(Spin(kInfinite), p).ok());
  absl::SleepFor(absl::Milliseconds(20));
  const absl::Time aborted = absl::Now();
  ASSERT_TRUE(
      paced->AbortErrorScope(p, 3, absl::CancelledError("job cancelled")).ok());
  EXPECT_THAT(paced->SynchronizeStream(p),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_LT(absl::Now() - aborted, absl::Seconds(2));
}

}  // namespace
}  // namespace weft::runtime
