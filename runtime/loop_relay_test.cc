// LoopRelay on the simulated backend: iterations continued in the
// completion callbacks, and every reason to hand the loop back.
#include "runtime/loop_relay.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;

DeviceBufferArg Buf(DevicePtr ptr, DType dtype, Access access) {
  return DeviceBufferArg{ptr, 4, dtype, access};
}

class LoopRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SimBackend::Options options;
    options.num_devices = 1;
    backend_ = SimBackend::Create(options).value();
    stream_ = backend_->CreateStream(0).value();
    one_ = backend_->Allocate(0, 4).value();
    i_ = backend_->Allocate(0, 4).value();
    go_ = backend_->Allocate(0, 4).value();
    Set(one_, 1.0f);
    Set(i_, 0.0f);
    Set(go_, int32_t{1});
    // i += 1; go = i < limit_.
    KernelLaunch inc;
    inc.op = "axpy";
    inc.args = {1.0f, Buf(one_, DType::kFloat32, Access::kRead),
                Buf(i_, DType::kFloat32, Access::kReadWrite)};
    body_.device = 0;
    const int a = body_.AddKernel(inc, {});
    KernelLaunch test;
    test.op = "less";
    test.args = {Buf(i_, DType::kFloat32, Access::kRead), 50.0f,
                 Buf(go_, DType::kInt32, Access::kWrite)};
    body_.AddKernel(test, {a});
    ASSERT_OK(backend_->PrepareDeviceGraph(body_));
  }

  template <typename T>
  void Set(DevicePtr ptr, T value) {
    ASSERT_OK(backend_->CopyHostToDevice(ptr, &value, sizeof(T), stream_));
    ASSERT_OK(backend_->SynchronizeStream(stream_));
  }

  float Counter() {
    float value = 0;
    EXPECT_OK(backend_->CopyDeviceToHost(&value, i_, 4, stream_));
    EXPECT_OK(backend_->SynchronizeStream(stream_));
    return value;
  }

  struct HandBack {
    absl::Notification done;
    int64_t ran = -1;
    absl::Status status;
    std::atomic<int64_t> progress_calls{0};
    std::atomic<int64_t> last_progress{0};
  };

  std::shared_ptr<LoopRelay> Relay(HandBack& back, int64_t max_iterations) {
    LoopRelay::Loop loop;
    loop.backend = backend_.get();
    loop.body = &body_;
    loop.stream = stream_;
    loop.condition = go_;
    loop.value = value_;
    loop.bytes = 4;
    loop.dtype = DType::kInt32;
    loop.max_iterations = max_iterations;
    loop.hand_back = [&back](int64_t ran, absl::Status status) {
      back.ran = ran;
      back.status = std::move(status);
      back.done.Notify();
    };
    loop.progress = [&back](int64_t iteration) {
      back.progress_calls.fetch_add(1);
      back.last_progress.store(iteration);
    };
    return std::make_shared<LoopRelay>(std::move(loop));
  }

  std::unique_ptr<SimBackend> backend_;
  StreamHandle stream_;
  DevicePtr one_, i_, go_;
  DeviceGraph body_;
  char value_[8] = {};
};

TEST_F(LoopRelayTest, RunsTheLoopToItsEndInTheCallbacks) {
  HandBack back;
  std::shared_ptr<LoopRelay> relay = Relay(back, 1000);
  ASSERT_OK(relay->Launch(1, /*relay=*/true));
  ASSERT_TRUE(back.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_OK(back.status);
  // Iteration 1 was the caller's; the relay began 49 more, and the last
  // condition it read was false.
  EXPECT_EQ(back.ran, 49);
  EXPECT_EQ(Counter(), 50.0f);
  int32_t go = -1;
  std::memcpy(&go, value_, 4);
  EXPECT_EQ(go, 0);
  EXPECT_LE(back.last_progress.load(), 50);
}

TEST_F(LoopRelayTest, WithoutRelayHandsBackAfterOneIteration) {
  HandBack back;
  std::shared_ptr<LoopRelay> relay = Relay(back, 1000);
  ASSERT_OK(relay->Launch(1, /*relay=*/false));
  ASSERT_TRUE(back.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_OK(back.status);
  EXPECT_EQ(back.ran, 0);
  EXPECT_EQ(Counter(), 1.0f);
}

TEST_F(LoopRelayTest, HandsBackAtTheBound) {
  HandBack back;
  std::shared_ptr<LoopRelay> relay = Relay(back, 10);
  ASSERT_OK(relay->Launch(1, /*relay=*/true));
  ASSERT_TRUE(back.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_OK(back.status);
  // Iterations 2..10 in the relay; the 11th is the caller's to refuse.
  EXPECT_EQ(back.ran, 9);
  EXPECT_EQ(Counter(), 10.0f);
}

TEST_F(LoopRelayTest, MarksEachIterationAndHandsBackWhenMarkersRunOut) {
  HandBack back;
  std::shared_ptr<LoopRelay> relay = Relay(back, 1000);
  std::vector<EventHandle> markers;
  for (int k = 0; k < 7; ++k) {  // three iterations' worth, and one over
    markers.push_back(backend_->CreateEvent(0).value());
  }
  ASSERT_OK(relay->Launch(1, /*relay=*/true, markers));
  ASSERT_TRUE(back.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_OK(back.status);
  EXPECT_EQ(back.ran, 3);
  EXPECT_EQ(Counter(), 4.0f);
  const std::vector<EventHandle> recorded = relay->RecordedMarkers();
  ASSERT_EQ(recorded.size(), 6u);
  // Each pair brackets an iteration, one after another on the device.
  double last = -1;
  for (EventHandle marker : recorded) {
    absl::StatusOr<double> at = backend_->EventTimeUs(marker);
    ASSERT_OK(at.status());
    EXPECT_GE(*at, last);
    last = *at;
  }
  for (EventHandle marker : markers) ASSERT_OK(backend_->DestroyEvent(marker));
}

TEST_F(LoopRelayTest, StopHandsBackBeforeTheNextIteration) {
  HandBack back;
  std::shared_ptr<LoopRelay> relay = Relay(back, 1000);
  relay->Stop();
  ASSERT_OK(relay->Launch(1, /*relay=*/true));
  ASSERT_TRUE(back.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(back.ran, 0);
  EXPECT_EQ(Counter(), 1.0f);
}

TEST_F(LoopRelayTest, AFailedBodyHandsBackItsError) {
  HandBack back;
  std::shared_ptr<LoopRelay> relay = Relay(back, 1000);
  // The stream's error scope fails: the body's callback sees the error.
  ASSERT_OK(backend_->SetErrorScope(stream_, 7));
  ASSERT_OK(backend_->AbortErrorScope(stream_, 7,
                                      absl::AbortedError("job cancelled")));
  ASSERT_OK(relay->Launch(1, /*relay=*/true));
  ASSERT_TRUE(back.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(back.status.code(), absl::StatusCode::kAborted) << back.status;
  EXPECT_EQ(back.ran, 0);
  backend_->ReleaseErrorScope(stream_, 7);
}

}  // namespace
}  // namespace weft::runtime
