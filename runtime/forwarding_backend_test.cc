#include "runtime/forwarding_backend.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/backend.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

std::unique_ptr<SimBackend> MakeSim() {
  SimBackend::Options options;
  options.num_devices = 2;
  options.memory_bytes = 1 << 20;
  auto sim = SimBackend::Create(options);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return std::move(sim).value();
}

KernelLaunch Spin(double us) {
  KernelLaunch launch;
  launch.op = "spin";
  launch.cost_us = us;
  return launch;
}

// Waits for a host callback on `stream` and returns the status it got.
absl::Status CallbackStatus(Backend& backend, StreamHandle stream) {
  absl::Notification done;
  absl::Status seen;
  absl::Status added =
      backend.AddHostCallback(stream, [&done, &seen](absl::Status status) {
        seen = std::move(status);
        done.Notify();
      });
  if (!added.ok()) return added;
  done.WaitForNotification();
  return seen;
}

TEST(ForwardingBackendTest, ForwardsQueriesAndCapabilities) {
  std::unique_ptr<SimBackend> sim = MakeSim();
  ForwardingBackend forwarding(sim.get());
  EXPECT_EQ(forwarding.device_count(), 2);
  EXPECT_EQ(forwarding.device_info(1).uuid, sim->device_info(1).uuid);
  EXPECT_EQ(forwarding.supports_host_gates(), sim->supports_host_gates());
  EXPECT_EQ(forwarding.has_device_clock(), sim->has_device_clock());
  EXPECT_TRUE(forwarding.supports_stamps());
  EXPECT_TRUE(forwarding.supports_host_gates());
  EXPECT_TRUE(forwarding.interrupts_aborted_work());
  EXPECT_EQ(forwarding.supports_device_graphs(), sim->supports_device_graphs());
  EXPECT_EQ(forwarding.supports_device_loops(), sim->supports_device_loops());
  EXPECT_TRUE(forwarding.supports_device_loops());
  EXPECT_EQ(forwarding.prefers_device_graphs(), sim->prefers_device_graphs());
  EXPECT_TRUE(forwarding.supports_device_graph_op("axpy"));
  EXPECT_FALSE(forwarding.supports_device_graph_op("no_such_op"));

  auto ptr = forwarding.Allocate(0, 4096);
  ASSERT_TRUE(ptr.ok()) << ptr.status();
  EXPECT_EQ(sim->memory_used_bytes(0), 4096u);
  EXPECT_EQ(forwarding.memory_used_bytes(0), 4096u);
  ASSERT_TRUE(forwarding.Free(*ptr).ok());
  EXPECT_EQ(sim->memory_used_bytes(0), 0u);

  StreamHandle stream = forwarding.CreateStream(0).value();
  auto stamp = forwarding.Stamp(stream);
  ASSERT_TRUE(stamp.ok()) << stamp.status();
  ASSERT_TRUE(forwarding.SynchronizeStream(stream).ok());
  EXPECT_TRUE((*stamp)->TimeUs().has_value());
  EXPECT_FALSE(forwarding.Stamp(StreamHandle{999999}).ok());
  ASSERT_TRUE(forwarding.DestroyStream(stream).ok());
}

// A Backend with the default padded upload: everything else is the
// simulator's.
class DefaultPaddedUpload final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status CopyHostToDevicePadded(DevicePtr dst, const void* src,
                                      uint64_t src_bytes, uint64_t bytes,
                                      StreamHandle stream) override {
    return Backend::CopyHostToDevicePadded(dst, src, src_bytes, bytes, stream);
  }
};

TEST(ForwardingBackendTest, PaddedUploadsGiveDataThenZeros) {
  std::unique_ptr<SimBackend> sim = MakeSim();
  ForwardingBackend forwarding(sim.get());
  DefaultPaddedUpload fallback(sim.get());
  for (Backend* backend : std::vector<Backend*>{&forwarding, &fallback}) {
    auto ptr = backend->Allocate(0, 64);
    auto stream = backend->CreateStream(0);
    ASSERT_TRUE(ptr.ok() && stream.ok());
    const std::string junk(64, 'j');
    ASSERT_TRUE(backend->CopyHostToDevice(*ptr, junk.data(), 64, *stream).ok());
    ASSERT_TRUE(
        backend->CopyHostToDevicePadded(*ptr, "abc", 3, 64, *stream).ok());
    std::string back(64, '?');
    ASSERT_TRUE(backend->CopyDeviceToHost(back.data(), *ptr, 64, *stream).ok());
    ASSERT_TRUE(backend->SynchronizeStream(*stream).ok());
    EXPECT_EQ(back, "abc" + std::string(61, '\0'));
    EXPECT_THAT(backend->CopyHostToDevicePadded(*ptr, "abc", 3, 2, *stream),
                StatusIs(absl::StatusCode::kInvalidArgument));
    ASSERT_TRUE(backend->Free(*ptr).ok());
    ASSERT_TRUE(backend->DestroyStream(*stream).ok());
  }
}

TEST(ForwardingBackendTest, AbortErrorScopeSkipsQueuedWorkOfThatScopeOnly) {
  std::unique_ptr<SimBackend> sim = MakeSim();
  ForwardingBackend backend(sim.get());
  auto stream = backend.CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status();

  ASSERT_TRUE(backend.SetErrorScope(*stream, 7).ok());
  const absl::Time start = absl::Now();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(backend.Launch(Spin(50'000), *stream).ok());
  }
  ASSERT_TRUE(
      backend
          .AbortErrorScope(*stream, 7, absl::CancelledError("job 7 cancelled"))
          .ok());
  absl::Status aborted = CallbackStatus(backend, *stream);
  EXPECT_THAT(aborted, StatusIs(absl::StatusCode::kCancelled,
                                HasSubstr("job 7 cancelled")));
  // Twenty 50 ms spins would take a second; at most the running one ends.
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(600));

  // Another scope on the same stream is unaffected.
  ASSERT_TRUE(backend.SetErrorScope(*stream, 8).ok());
  ASSERT_TRUE(backend.Launch(Spin(0), *stream).ok());
  EXPECT_TRUE(CallbackStatus(backend, *stream).ok());

  // Once released, the scope's record is gone and its work runs again.
  backend.ReleaseErrorScope(*stream, 7);
  ASSERT_TRUE(backend.SetErrorScope(*stream, 7).ok());
  ASSERT_TRUE(backend.Launch(Spin(0), *stream).ok());
  EXPECT_TRUE(CallbackStatus(backend, *stream).ok());

  ASSERT_TRUE(backend.SynchronizeStream(*stream).ok());
  ASSERT_TRUE(backend.DestroyStream(*stream).ok());
}

TEST(ForwardingBackendTest, AbortErrorScopeRejectsOkStatus) {
  std::unique_ptr<SimBackend> sim = MakeSim();
  ForwardingBackend backend(sim.get());
  auto stream = backend.CreateStream(0);
  ASSERT_TRUE(stream.ok());
  absl::Status s = backend.AbortErrorScope(*stream, 1, absl::OkStatus());
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_TRUE(backend.DestroyStream(*stream).ok());
}

}  // namespace
}  // namespace weft::runtime
