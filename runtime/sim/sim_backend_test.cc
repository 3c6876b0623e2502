#include "runtime/sim/sim_backend.h"

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;
using ::testing::HasSubstr;

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

std::unique_ptr<SimBackend> MakeBackend(SimBackend::Options options) {
  auto backend = SimBackend::Create(std::move(options));
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(backend).value();
}

KernelLaunch Spin(double cost_us) {
  KernelLaunch launch;
  launch.op = "spin";
  launch.cost_us = cost_us;
  return launch;
}

KernelLaunch FillF32(DevicePtr ptr, uint64_t bytes, float value) {
  KernelLaunch launch;
  launch.op = "fill";
  launch.args = {DeviceBufferArg{ptr, bytes, DType::kFloat32, Access::kWrite},
                 value};
  return launch;
}

// A kernel table with the built-ins plus "block", which waits until the
// test releases it, and "boom", which fails.
struct TestKernels {
  TestKernels() : table(CpuKernelTable::WithBuiltins()) {
    EXPECT_TRUE(table
                    .Register("block",
                              [this](absl::Span<const HostArg>) {
                                release.WaitForNotification();
                                return absl::OkStatus();
                              })
                    .ok());
    EXPECT_TRUE(table
                    .Register("boom",
                              [](absl::Span<const HostArg>) {
                                return absl::InternalError("boom went off");
                              })
                    .ok());
  }
  absl::Notification release;
  CpuKernelTable table;
};

TEST(SimBackendTest, RejectsBadOptions) {
  SimBackend::Options options;
  options.num_devices = 0;
  auto backend = SimBackend::Create(options);
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(backend.status().message(), HasSubstr("num_devices"));
  options.num_devices = 1;
  options.time_scale = -1;
  EXPECT_EQ(SimBackend::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
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
  EXPECT_EQ(backend->QueryEvent(e).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(SimBackendTest, RecordRejectsEventOfAnotherDevice) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(0).value();
  EventHandle e = backend->CreateEvent(1).value();
  absl::Status status = backend->RecordEvent(e, s);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("belongs to device 1"));
}

TEST(SimBackendTest, OutOfMemoryIsResourceExhausted) {
  auto backend = MakeBackend(FastOptions());
  DevicePtr a = backend->Allocate(1, 700 * 1024).value();
  EXPECT_EQ(backend->memory_used_bytes(1), 700u * 1024);
  EXPECT_EQ(backend->memory_used_bytes(0), 0u);
  auto b = backend->Allocate(1, 400 * 1024);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.status().message(), HasSubstr("device 1"));
  EXPECT_THAT(b.status().message(), HasSubstr("requested 409600 bytes"));
  EXPECT_THAT(b.status().message(), HasSubstr("331776 bytes free"));
  ASSERT_TRUE(backend->Free(a).ok());
  EXPECT_EQ(backend->memory_used_bytes(1), 0u);
  EXPECT_TRUE(backend->Allocate(1, 400 * 1024).ok());
  absl::Status twice = backend->Free(a);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.message(), HasSubstr("not the start of an allocation"));
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
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(), HasSubstr("'matmul'"));
}

TEST(SimBackendTest, AddressOutsideAllocationIsRejected) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(0).value();
  DevicePtr p = backend->Allocate(0, 8).value();
  absl::Status status = backend->Launch(FillF32(p, 16, 1), s);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("not inside an allocation"));
  char buf[4];
  EXPECT_EQ(
      backend->CopyDeviceToHost(buf, DevicePtr{0, 12345}, 4, s).code(),
      absl::StatusCode::kInvalidArgument);
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
  EXPECT_EQ(sync.code(), absl::StatusCode::kInternal);
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_TRUE(seen[0].ok());
    for (int i = 1; i < 3; ++i) {
      EXPECT_EQ(seen[i].code(), absl::StatusCode::kInternal);
      EXPECT_THAT(seen[i].message(), HasSubstr("boom on device 0"));
      EXPECT_THAT(seen[i].message(), HasSubstr("boom went off"));
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
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("fell off"));
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
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("fill on device 0"));
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
  EXPECT_EQ(backend->Launch(Spin(0), s).code(), absl::StatusCode::kNotFound);
}

TEST(SimBackendTest, StreamCannotDestroyItself) {
  auto backend = MakeBackend(FastOptions());
  StreamHandle s = backend->CreateStream(0).value();
  absl::Status from_callback;
  ASSERT_TRUE(backend
                  ->AddHostCallback(s,
                                    [&](absl::Status) {
                                      from_callback =
                                          backend->DestroyStream(s);
                                    })
                  .ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  EXPECT_EQ(from_callback.code(), absl::StatusCode::kFailedPrecondition);
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

}  // namespace
}  // namespace weft::runtime
