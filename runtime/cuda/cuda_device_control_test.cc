// Device loops and device cases on real GPUs (CUDA graphs with WHILE and
// SWITCH conditional nodes, and cases by device graph launch), alone and
// through the executor. Every case skips itself without a GPU.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "runtime/backend.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/device_graph.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "scheduler/graph_builder.h"
#include "scheduler/planner.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

DeviceBufferArg Buf(DevicePtr ptr, DType dtype, Access access,
                    uint64_t bytes = 4) {
  return DeviceBufferArg{ptr, bytes, dtype, access};
}

KernelLaunch Fill(DevicePtr ptr, DType dtype, double value,
                  uint64_t bytes = 0) {
  KernelLaunch launch;
  launch.op = "fill";
  if (bytes == 0) bytes = static_cast<uint64_t>(scheduler::DTypeSize(dtype));
  launch.args = {Buf(ptr, dtype, Access::kWrite, bytes), value};
  return launch;
}

// y += a * x, one float.
KernelLaunch Axpy(float a, DevicePtr x, DevicePtr y) {
  KernelLaunch launch;
  launch.op = "axpy";
  launch.args = {a, Buf(x, DType::kFloat32, Access::kRead),
                 Buf(y, DType::kFloat32, Access::kReadWrite)};
  return launch;
}

// flag = x < t, an int32 flag.
KernelLaunch Less(DevicePtr x, float t, DevicePtr flag) {
  KernelLaunch launch;
  launch.op = "less";
  launch.args = {Buf(x, DType::kFloat32, Access::kRead), t,
                 Buf(flag, DType::kInt32, Access::kWrite)};
  return launch;
}

KernelLaunch Scale(float a, DevicePtr x) {
  KernelLaunch launch;
  launch.op = "scale";
  launch.args = {a, Buf(x, DType::kFloat32, Access::kReadWrite)};
  return launch;
}

class CudaDeviceControlTest : public ::testing::Test {
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
    if (!backend_->supports_device_loops()) {
      GTEST_SKIP() << "the CUDA driver has no conditional graph nodes";
    }
    stream_ = backend_->CreateStream(0).value();
    body_stream_ = backend_->CreateStream(0).value();
  }

  DevicePtr Alloc(uint64_t bytes = 8) {
    return backend_->Allocate(0, bytes).value();
  }

  template <typename T>
  void Set(DevicePtr ptr, T value) {
    ASSERT_OK(backend_->CopyHostToDevice(ptr, &value, sizeof(T), stream_));
    ASSERT_OK(backend_->SynchronizeStream(stream_));
  }

  template <typename T>
  T Get(DevicePtr ptr) {
    T value{};
    EXPECT_OK(backend_->SynchronizeStream(stream_));
    EXPECT_OK(backend_->CopyDeviceToHost(&value, ptr, sizeof(T), stream_));
    EXPECT_OK(backend_->SynchronizeStream(stream_));
    return value;
  }

  // The status a host callback enqueued on the stream now receives.
  absl::Status Done() {
    absl::Notification done;
    absl::Status result;
    absl::Status added = backend_->AddHostCallback(
        stream_, [&done, &result](absl::Status status) {
          result = std::move(status);
          done.Notify();
        });
    if (!added.ok()) return added;
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    return result;
  }

  // i += 1; go = i < limit.
  DeviceGraph CountingBody(DevicePtr one, DevicePtr i, DevicePtr go,
                           int limit) {
    DeviceGraph g;
    g.device = 0;
    const int inc = g.AddKernel(Axpy(1, one, i), {});
    g.AddKernel(Less(i, static_cast<float>(limit), go), {inc});
    return g;
  }

  DeviceLoop Loop(DeviceGraph* body, DevicePtr condition, DType dtype,
                  uint32_t max_iterations) {
    DeviceLoop loop;
    loop.name = "count";
    loop.body = body;
    loop.condition = condition;
    loop.dtype = dtype;
    loop.max_iterations = max_iterations;
    loop.iterations = std::make_shared<std::atomic<int64_t>>(-7);
    return loop;
  }

  // A counting loop from i = 0, go = 1 up to `limit`.
  struct Counter {
    DevicePtr one, i, go;
  };
  Counter NewCounter() {
    Counter c{Alloc(), Alloc(), Alloc()};
    Set(c.one, 1.0f);
    Set(c.i, 0.0f);
    Set(c.go, int32_t{1});
    return c;
  }

  std::unique_ptr<CudaBackend> backend_;
  StreamHandle stream_;
  StreamHandle body_stream_;
};

TEST_F(CudaDeviceControlTest, LoopCountsToN) {
  const Counter c = NewCounter();
  DeviceGraph body = CountingBody(c.one, c.i, c.go, 1000);
  DeviceLoop loop = Loop(&body, c.go, DType::kInt32, 100000);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(loop.iterations->load(), 1000);
  EXPECT_EQ(Get<float>(c.i), 1000.0f);
  EXPECT_EQ(Get<int32_t>(c.go), 0);
}

TEST_F(CudaDeviceControlTest, FalseConditionRunsNoIteration) {
  const Counter c = NewCounter();
  Set(c.go, int32_t{0});
  DeviceGraph body = CountingBody(c.one, c.i, c.go, 10);
  DeviceLoop loop = Loop(&body, c.go, DType::kInt32, 100);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(loop.iterations->load(), 0);
  EXPECT_EQ(Get<float>(c.i), 0.0f);
}

TEST_F(CudaDeviceControlTest, LoopBeyondItsBoundFailsNamingIt) {
  const Counter c = NewCounter();
  DeviceGraph body = CountingBody(c.one, c.i, c.go, 10);
  DeviceLoop loop = Loop(&body, c.go, DType::kInt32, 4);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  EXPECT_THAT(
      Done(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("loop 'count' would exceed max_iterations 4: its "
                         "condition still holds after 4 iterations")));
  EXPECT_EQ(loop.iterations->load(), 4);
  EXPECT_EQ(Get<float>(c.i), 4.0f);
  // The failure sticks to the error scope until it is released.
  EXPECT_THAT(Done(), StatusIs(absl::StatusCode::kFailedPrecondition));
  backend_->ReleaseErrorScope(stream_, 0);
  EXPECT_OK(Done());

  // A bound of zero fails before the first iteration.
  Set(c.i, 0.0f);
  Set(c.go, int32_t{1});
  DeviceLoop none = Loop(&body, c.go, DType::kInt32, 0);
  ASSERT_OK(backend_->LaunchDeviceLoop(none, stream_, body_stream_));
  EXPECT_THAT(Done(), StatusIs(absl::StatusCode::kFailedPrecondition,
                               HasSubstr("max_iterations 0")));
  EXPECT_EQ(none.iterations->load(), 0);
  backend_->ReleaseErrorScope(stream_, 0);
}

TEST_F(CudaDeviceControlTest, FailureStaysInItsErrorScope) {
  const Counter c = NewCounter();
  DeviceGraph body = CountingBody(c.one, c.i, c.go, 10);
  DeviceLoop loop = Loop(&body, c.go, DType::kInt32, 2);
  ASSERT_OK(backend_->SetErrorScope(stream_, 41));
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  EXPECT_THAT(Done(), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(backend_->SetErrorScope(stream_, 42));
  EXPECT_OK(Done());
  backend_->ReleaseErrorScope(stream_, 41);
}

// The condition is the float counter itself: 5, 4, ..., 0.
TEST_F(CudaDeviceControlTest, Float32Condition) {
  const DevicePtr one = Alloc();
  const DevicePtr x = Alloc();
  Set(one, 1.0f);
  Set(x, 5.0f);
  DeviceGraph body;
  body.device = 0;
  body.AddKernel(Axpy(-1, one, x), {});
  DeviceLoop loop = Loop(&body, x, DType::kFloat32, 100);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(loop.iterations->load(), 5);
  EXPECT_EQ(Get<float>(x), 0.0f);
}

// 64-bit conditions the body clears: one iteration each.
TEST_F(CudaDeviceControlTest, Int64AndFloat64Conditions) {
  for (DType dtype : {DType::kInt64, DType::kFloat64}) {
    SCOPED_TRACE(scheduler::DTypeName(dtype));
    const DevicePtr cond = Alloc();
    if (dtype == DType::kInt64) {
      Set(cond, int64_t{1} << 40);  // nonzero only in the high word
    } else {
      Set(cond, 0.25);
    }
    DeviceGraph body;
    body.device = 0;
    body.AddKernel(Fill(cond, dtype, 0), {});
    DeviceLoop loop = Loop(&body, cond, dtype, 10);
    ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
    ASSERT_OK(Done());
    EXPECT_EQ(loop.iterations->load(), 1);
  }
}

// Two lanes in the body (x doubles beside the counter), joined before the
// check.
TEST_F(CudaDeviceControlTest, BodyWithParallelKernels) {
  const Counter c = NewCounter();
  const DevicePtr x = Alloc();
  Set(x, 1.0f);
  DeviceGraph body;
  body.device = 0;
  const int inc = body.AddKernel(Axpy(1, c.one, c.i), {});
  body.AddKernel(Scale(2, x), {});
  body.AddKernel(Less(c.i, 6, c.go), {inc});
  DeviceLoop loop = Loop(&body, c.go, DType::kInt32, 100);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(loop.iterations->load(), 6);
  EXPECT_EQ(Get<float>(x), 64.0f);
}

TEST_F(CudaDeviceControlTest, RepeatedLoopsHitTheCache) {
  const Counter c = NewCounter();
  DeviceGraph body = CountingBody(c.one, c.i, c.go, 3);
  for (int round = 0; round < 3; ++round) {
    Set(c.i, 0.0f);
    Set(c.go, int32_t{1});
    DeviceLoop loop = Loop(&body, c.go, DType::kInt32, 10);
    ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
    ASSERT_OK(Done());
    EXPECT_EQ(loop.iterations->load(), 3);
  }
  CudaBackend::DeviceControlStats stats = backend_->device_control_stats();
  EXPECT_EQ(stats.instantiations, 1u);
  EXPECT_EQ(stats.cache_hits, 2u);
  EXPECT_EQ(stats.updates, 0u);

  // The same structure over new buffers and a new limit: updated in place
  // (or, where CUDA refuses the update, built anew), and right.
  const Counter d = NewCounter();
  DeviceGraph other = CountingBody(d.one, d.i, d.go, 7);
  DeviceLoop loop = Loop(&other, d.go, DType::kInt32, 10);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(loop.iterations->load(), 7);
  EXPECT_EQ(Get<float>(d.i), 7.0f);
  EXPECT_EQ(Get<float>(c.i), 3.0f);
  stats = backend_->device_control_stats();
  EXPECT_EQ(stats.cache_hits, 3u);
  EXPECT_EQ(stats.updates + stats.instantiations, 2u);
  EXPECT_EQ(stats.cached, 1);

  // Another bound is another structure.
  Set(d.i, 0.0f);
  Set(d.go, int32_t{1});
  DeviceLoop bounded = Loop(&other, d.go, DType::kInt32, 20);
  ASSERT_OK(backend_->LaunchDeviceLoop(bounded, stream_, body_stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(backend_->device_control_stats().cached, 2);
}

TEST_F(CudaDeviceControlTest, LoopsOnTwoStreamsShareAnExecutable) {
  const StreamHandle other = backend_->CreateStream(0).value();
  const Counter a = NewCounter();
  const Counter b = NewCounter();
  DeviceGraph body_a = CountingBody(a.one, a.i, a.go, 5);
  DeviceGraph body_b = CountingBody(b.one, b.i, b.go, 9);
  DeviceLoop la = Loop(&body_a, a.go, DType::kInt32, 100);
  DeviceLoop lb = Loop(&body_b, b.go, DType::kInt32, 100);
  ASSERT_OK(backend_->LaunchDeviceLoop(la, stream_, body_stream_));
  ASSERT_OK(backend_->LaunchDeviceLoop(lb, other, body_stream_));
  ASSERT_OK(Done());
  absl::Notification done;
  ASSERT_OK(backend_->AddHostCallback(
      other, [&done](absl::Status) { done.Notify(); }));
  done.WaitForNotification();
  EXPECT_EQ(la.iterations->load(), 5);
  EXPECT_EQ(lb.iterations->load(), 9);
}

// A large reduce_sum takes stream-ordered scratch memory, which a
// conditional body cannot hold: the loop is refused, naming it, unless the
// driver builds it (then it must run right).
TEST_F(CudaDeviceControlTest, BodyCudaCannotBuildFailsNamingTheLoop) {
  constexpr uint64_t kN = 1 << 20;
  const DevicePtr x = Alloc(kN * 4);
  const DevicePtr sum = Alloc();
  const DevicePtr go = Alloc();
  Set(go, int32_t{1});
  DeviceGraph body;
  body.device = 0;
  const int fill = body.AddKernel(Fill(x, DType::kFloat32, 0.5, kN * 4), {});
  KernelLaunch reduce;
  reduce.op = "reduce_sum";
  reduce.args = {Buf(x, DType::kFloat32, Access::kRead, kN * 4),
                 Buf(sum, DType::kFloat32, Access::kWrite)};
  const int r = body.AddKernel(reduce, {fill});
  body.AddKernel(Fill(go, DType::kInt32, 0), {r});
  DeviceLoop loop = Loop(&body, go, DType::kInt32, 10);
  const absl::Status launched =
      backend_->LaunchDeviceLoop(loop, stream_, body_stream_);
  if (launched.ok()) {
    ASSERT_OK(Done());
    EXPECT_EQ(loop.iterations->load(), 1);
    EXPECT_EQ(Get<float>(sum), 0.5f * kN);
    return;
  }
  EXPECT_THAT(launched,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("loop 'count' cannot run as a CUDA graph")));
  // Nothing was enqueued, and the backend carries on.
  ASSERT_OK(Done());
  const Counter c = NewCounter();
  DeviceGraph counting = CountingBody(c.one, c.i, c.go, 2);
  DeviceLoop next = Loop(&counting, c.go, DType::kInt32, 10);
  ASSERT_OK(backend_->LaunchDeviceLoop(next, stream_, body_stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(next.iterations->load(), 2);
}

TEST_F(CudaDeviceControlTest, RejectsALoopOnAnotherDevice) {
  const Counter c = NewCounter();
  DeviceGraph body = CountingBody(c.one, c.i, c.go, 3);
  body.device = 1;
  DeviceLoop loop = Loop(&body, c.go, DType::kInt32, 10);
  EXPECT_THAT(backend_->LaunchDeviceLoop(loop, stream_, body_stream_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("device loop 'count'")));
}

// ---- Cases, by SWITCH node and by device graph launch.

enum class CasePath { kSwitch, kDeviceLaunch };

class CudaDeviceCaseTest : public CudaDeviceControlTest,
                           public ::testing::WithParamInterface<CasePath> {
 protected:
  void SetUp() override {
    CudaDeviceControlTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    out_ = Alloc();
    for (int i = 0; i < 3; ++i) {
      branches_[i].device = 0;
      branches_[i].AddKernel(Fill(out_, DType::kFloat32, 10 + i), {});
    }
  }

  absl::Status Launch(const DeviceCase& choice) {
    return GetParam() == CasePath::kSwitch
               ? backend_->LaunchDeviceCase(choice, stream_, body_stream_)
               : backend_->LaunchDeviceCaseByDeviceLaunch(choice, stream_);
  }

  DeviceCase Case(DevicePtr selector, DType dtype) {
    DeviceCase choice;
    choice.name = "pick";
    choice.branches = {&branches_[0], &branches_[1], &branches_[2]};
    choice.selector = selector;
    choice.dtype = dtype;
    choice.taken = std::make_shared<std::atomic<int64_t>>(-7);
    return choice;
  }

  DevicePtr out_;
  DeviceGraph branches_[3];
};

INSTANTIATE_TEST_SUITE_P(Paths, CudaDeviceCaseTest,
                         ::testing::Values(CasePath::kSwitch,
                                           CasePath::kDeviceLaunch),
                         [](const ::testing::TestParamInfo<CasePath>& info) {
                           return info.param == CasePath::kSwitch
                                      ? "Switch"
                                      : "DeviceLaunch";
                         });

TEST_P(CudaDeviceCaseTest, PicksEachBranch) {
  const DevicePtr selector = Alloc();
  for (int32_t i = 0; i < 3; ++i) {
    Set(out_, 0.0f);
    Set(selector, i);
    DeviceCase choice = Case(selector, DType::kInt32);
    ASSERT_OK(Launch(choice));
    ASSERT_OK(Done());
    EXPECT_EQ(choice.taken->load(), i);
    EXPECT_EQ(Get<float>(out_), 10.0f + i);
  }
  const CudaBackend::DeviceControlStats stats =
      backend_->device_control_stats();
  EXPECT_EQ(stats.instantiations, 1u);
  EXPECT_EQ(stats.cache_hits, 2u);
}

TEST_P(CudaDeviceCaseTest, SelectorOutOfRangeRunsNoBranch) {
  const DevicePtr selector = Alloc();
  for (int32_t value : {3, -1, 1 << 30}) {
    Set(out_, 0.0f);
    Set(selector, value);
    DeviceCase choice = Case(selector, DType::kInt32);
    ASSERT_OK(Launch(choice));
    ASSERT_OK(Done());
    EXPECT_EQ(choice.taken->load(), -1) << value;
    EXPECT_EQ(Get<float>(out_), 0.0f) << value;
  }
}

TEST_P(CudaDeviceCaseTest, Int64Selector) {
  const DevicePtr selector = Alloc();
  Set(out_, 0.0f);
  Set(selector, int64_t{2});
  DeviceCase choice = Case(selector, DType::kInt64);
  ASSERT_OK(Launch(choice));
  ASSERT_OK(Done());
  EXPECT_EQ(choice.taken->load(), 2);
  EXPECT_EQ(Get<float>(out_), 12.0f);
  // Read whole: 2^32 + 1 is out of range (its low word alone would be 1).
  Set(out_, 0.0f);
  Set(selector, (int64_t{1} << 32) + 1);
  DeviceCase wide = Case(selector, DType::kInt64);
  ASSERT_OK(Launch(wide));
  ASSERT_OK(Done());
  EXPECT_EQ(wide.taken->load(), -1);
  EXPECT_EQ(Get<float>(out_), 0.0f);
}

TEST_P(CudaDeviceCaseTest, NullBranchRunsNothing) {
  const DevicePtr selector = Alloc();
  Set(out_, 0.0f);
  Set(selector, int32_t{0});
  DeviceCase choice = Case(selector, DType::kInt32);
  choice.branches[0] = nullptr;
  ASSERT_OK(Launch(choice));
  ASSERT_OK(Done());
  EXPECT_EQ(choice.taken->load(), 0);
  EXPECT_EQ(Get<float>(out_), 0.0f);
}

TEST_P(CudaDeviceCaseTest, NewBuffersUpdateTheCachedCase) {
  const DevicePtr selector = Alloc();
  Set(selector, int32_t{1});
  DeviceCase choice = Case(selector, DType::kInt32);
  ASSERT_OK(Launch(choice));
  ASSERT_OK(Done());
  // The same shapes over another output and other values.
  const DevicePtr out2 = Alloc();
  Set(out2, 0.0f);
  DeviceGraph others[3];
  for (int i = 0; i < 3; ++i) {
    others[i].device = 0;
    others[i].AddKernel(Fill(out2, DType::kFloat32, 20 + i), {});
  }
  DeviceCase moved = Case(selector, DType::kInt32);
  moved.branches = {&others[0], &others[1], &others[2]};
  ASSERT_OK(Launch(moved));
  ASSERT_OK(Done());
  EXPECT_EQ(moved.taken->load(), 1);
  EXPECT_EQ(Get<float>(out2), 21.0f);
  EXPECT_EQ(Get<float>(out_), 11.0f);
  const CudaBackend::DeviceControlStats stats =
      backend_->device_control_stats();
  EXPECT_EQ(stats.cache_hits, 1u);
  EXPECT_EQ(stats.updates + stats.instantiations, 2u);
}

TEST_P(CudaDeviceCaseTest, RejectsAFloatSelector) {
  const DevicePtr selector = Alloc();
  DeviceCase choice = Case(selector, DType::kFloat32);
  EXPECT_THAT(Launch(choice), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("INT32 or INT64")));
}

// ---- Loops by tail launch: the body relaunches itself from the device.

TEST_F(CudaDeviceControlTest, TailLaunchLoopCountsToN) {
  const Counter c = NewCounter();
  DeviceGraph body = CountingBody(c.one, c.i, c.go, 1000);
  DeviceLoop loop = Loop(&body, c.go, DType::kInt32, 100000);
  ASSERT_OK(backend_->LaunchDeviceLoopByTailLaunch(loop, stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(loop.iterations->load(), 1000);
  EXPECT_EQ(Get<float>(c.i), 1000.0f);
  EXPECT_EQ(Get<int32_t>(c.go), 0);

  // A false condition runs no iteration.
  DeviceLoop again = Loop(&body, c.go, DType::kInt32, 100000);
  ASSERT_OK(backend_->LaunchDeviceLoopByTailLaunch(again, stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(again.iterations->load(), 0);
  EXPECT_EQ(Get<float>(c.i), 1000.0f);
}

TEST_F(CudaDeviceControlTest, TailLaunchLoopBeyondItsBoundFailsNamingIt) {
  const Counter c = NewCounter();
  DeviceGraph body = CountingBody(c.one, c.i, c.go, 10);
  DeviceLoop loop = Loop(&body, c.go, DType::kInt32, 4);
  ASSERT_OK(backend_->LaunchDeviceLoopByTailLaunch(loop, stream_));
  EXPECT_THAT(
      Done(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("loop 'count' would exceed max_iterations 4: its "
                         "condition still holds after 4 iterations")));
  backend_->ReleaseErrorScope(stream_, 0);
  EXPECT_EQ(loop.iterations->load(), 4);
  EXPECT_EQ(Get<float>(c.i), 4.0f);
}

TEST_F(CudaDeviceControlTest, TailLaunchLoopTakesNewBuffers) {
  const Counter first = NewCounter();
  const Counter second = NewCounter();
  const uint64_t updates = backend_->device_control_stats().updates;
  for (const Counter* c : {&first, &second, &first}) {
    Set(c->i, 0.0f);
    Set(c->go, int32_t{1});
    DeviceGraph body = CountingBody(c->one, c->i, c->go, 50);
    DeviceLoop loop = Loop(&body, c->go, DType::kInt32, 1000);
    ASSERT_OK(backend_->LaunchDeviceLoopByTailLaunch(loop, stream_));
    ASSERT_OK(Done());
    EXPECT_EQ(loop.iterations->load(), 50);
    EXPECT_EQ(Get<float>(c->i), 50.0f);
  }
  // The second and third launches updated the cached body in place.
  EXPECT_EQ(backend_->device_control_stats().updates, updates + 2);
}

// ---- Nested control: conditional nodes inside conditional bodies.

class CudaNestedControlTest : public CudaDeviceControlTest {
 protected:
  void SetUp() override {
    CudaDeviceControlTest::SetUp();
    if (IsSkipped()) return;
    if (!backend_->supports_nested_device_control()) {
      GTEST_SKIP() << "the CUDA driver has no SWITCH conditional nodes";
    }
  }

  struct Nest {
    DevicePtr one, i, j, total, go, inner_go;
    std::shared_ptr<DeviceGraphControl> inner;
    DeviceGraph outer;
  };
  // Outer loop while j < outer_limit: i = 0, then an inner loop that adds
  // 1 to i and to total while i < inner_limit, then j += 1.
  Nest NewNest(int outer_limit, int inner_limit, uint32_t inner_max) {
    Nest n{Alloc(), Alloc(), Alloc(), Alloc(), Alloc(), Alloc(), nullptr, {}};
    Set(n.one, 1.0f);
    Set(n.i, 0.0f);
    Set(n.j, 0.0f);
    Set(n.total, 0.0f);
    Set(n.go, int32_t{1});
    Set(n.inner_go, int32_t{0});
    n.inner = std::make_shared<DeviceGraphControl>();
    n.inner->loop = true;
    n.inner->name = "inner";
    n.inner->value = n.inner_go;
    n.inner->dtype = DType::kInt32;
    n.inner->max_iterations = inner_max;
    n.inner->result->store(-7);
    DeviceGraph body;
    body.device = 0;
    const int step = body.AddKernel(Axpy(1, n.one, n.i), {});
    const int count = body.AddKernel(Axpy(1, n.one, n.total), {step});
    body.AddKernel(Less(n.i, static_cast<float>(inner_limit), n.inner_go),
                   {count});
    n.inner->bodies.push_back(std::move(body));
    n.outer.device = 0;
    const int reset = n.outer.AddKernel(Fill(n.i, DType::kFloat32, 0), {});
    const int start =
        n.outer.AddKernel(Fill(n.inner_go, DType::kInt32, 1), {reset});
    const int inner = n.outer.AddControl(n.inner, {start});
    const int next = n.outer.AddKernel(Axpy(1, n.one, n.j), {inner});
    n.outer.AddKernel(Less(n.j, static_cast<float>(outer_limit), n.go), {next});
    return n;
  }
};

TEST_F(CudaNestedControlTest, LoopInsideALoop) {
  std::vector<Nest> nests;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    // New buffers in the second round: the loop is built anew for their
    // addresses. The third relaunches the second's, from the cache.
    if (round < 2) {
      nests.push_back(NewNest(3, 4, 10));
    } else {
      Set(nests[1].j, 0.0f);
      Set(nests[1].total, 0.0f);
      Set(nests[1].go, int32_t{1});
    }
    Nest& n = nests.back();
    const uint64_t hits = backend_->device_control_stats().cache_hits;
    DeviceLoop loop = Loop(&n.outer, n.go, DType::kInt32, 10);
    ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
    ASSERT_OK(Done());
    EXPECT_EQ(backend_->device_control_stats().cache_hits,
              hits + (round == 2 ? 1 : 0));
    EXPECT_EQ(loop.iterations->load(), 3);
    // The inner loop's iterations over its three runs.
    EXPECT_EQ(n.inner->result->load(), 12);
    EXPECT_EQ(Get<float>(n.total), 12.0f);
    EXPECT_EQ(Get<float>(n.j), 3.0f);
    EXPECT_EQ(Get<float>(n.i), 4.0f);
  }
}

TEST_F(CudaNestedControlTest, NestedLoopBeyondItsBoundStopsTheLaunch) {
  Nest n = NewNest(3, 4, 2);
  DeviceLoop loop = Loop(&n.outer, n.go, DType::kInt32, 10);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  EXPECT_THAT(
      Done(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("loop 'inner' would exceed max_iterations 2: its "
                         "condition still holds after 2 iterations")));
  backend_->ReleaseErrorScope(stream_, 0);
  // The outer loop stopped after the iteration that failed.
  EXPECT_EQ(loop.iterations->load(), 1);
  EXPECT_EQ(Get<float>(n.total), 2.0f);
  EXPECT_EQ(Get<float>(n.j), 1.0f);

  // The executable runs the next launch from a clean start.
  Nest ok = NewNest(2, 3, 10);
  DeviceLoop again = Loop(&ok.outer, ok.go, DType::kInt32, 10);
  ASSERT_OK(backend_->LaunchDeviceLoop(again, stream_, body_stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(again.iterations->load(), 2);
  EXPECT_EQ(ok.inner->result->load(), 6);
  EXPECT_EQ(Get<float>(ok.total), 6.0f);
}

// j = 0..3: pick = j < 2 (branch 1: x *= 3, branch 0: x *= 2), j += 1.
TEST_F(CudaNestedControlTest, CaseInsideALoop) {
  const DevicePtr one = Alloc(), j = Alloc(), x = Alloc(), go = Alloc(),
                  pick = Alloc();
  Set(one, 1.0f);
  Set(j, 0.0f);
  Set(x, 1.0f);
  Set(go, int32_t{1});
  auto choice = std::make_shared<DeviceGraphControl>();
  choice->loop = false;
  choice->name = "pick";
  choice->value = pick;
  choice->dtype = DType::kInt32;
  choice->result->store(-7);
  for (float factor : {2.0f, 3.0f}) {
    DeviceGraph branch;
    branch.device = 0;
    branch.AddKernel(Scale(factor, x), {});
    choice->bodies.push_back(std::move(branch));
  }
  DeviceGraph body;
  body.device = 0;
  const int test = body.AddKernel(Less(j, 2, pick), {});
  const int chosen = body.AddControl(choice, {test});
  const int next = body.AddKernel(Axpy(1, one, j), {chosen});
  body.AddKernel(Less(j, 4, go), {next});
  DeviceLoop loop = Loop(&body, go, DType::kInt32, 10);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(loop.iterations->load(), 4);
  EXPECT_EQ(Get<float>(x), 36.0f);       // 3 * 3 * 2 * 2
  EXPECT_EQ(choice->result->load(), 0);  // the last run's branch
}

// A loop inside a case's branch, the case on the device at the top.
TEST_F(CudaNestedControlTest, LoopInsideACase) {
  Nest n = NewNest(3, 4, 10);
  const DevicePtr pick = Alloc();
  Set(pick, int64_t{1});
  auto outer = std::make_shared<DeviceGraphControl>();
  outer->loop = true;
  outer->name = "outer";
  outer->value = n.go;
  outer->dtype = DType::kInt32;
  outer->max_iterations = 10;
  outer->bodies.push_back(n.outer);
  DeviceGraph empty;
  empty.device = 0;
  DeviceGraph loop_branch;
  loop_branch.device = 0;
  loop_branch.AddControl(outer, {});
  DeviceCase choice;
  choice.name = "top";
  choice.branches = {&empty, &loop_branch};
  choice.selector = pick;
  choice.dtype = DType::kInt64;
  choice.taken = std::make_shared<std::atomic<int64_t>>(-7);
  ASSERT_OK(backend_->LaunchDeviceCase(choice, stream_, body_stream_));
  ASSERT_OK(Done());
  EXPECT_EQ(choice.taken->load(), 1);
  EXPECT_EQ(outer->result->load(), 3);
  EXPECT_EQ(n.inner->result->load(), 12);
  EXPECT_EQ(Get<float>(n.total), 12.0f);
}

// ---- Through the executor: control nodes in DEVICE mode.

struct RunResult {
  absl::Status status;
  executor_testing::OutputBytes outputs;
  int64_t iterations = 0;
  int64_t branch = -7;
  std::string branch_message;
};

RunResult RunJob(Executor& executor, const std::string& text) {
  RunResult result;
  weft::v1::Graph proto;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto));
  scheduler::GraphLimits limits;
  limits.num_devices = 1;
  absl::StatusOr<scheduler::Graph> built = scheduler::BuildGraph(proto, limits);
  EXPECT_OK(built.status());
  if (!built.ok()) return result;
  auto graph = std::make_shared<const scheduler::Graph>(*std::move(built));
  scheduler::PlannerOptions options;
  options.num_devices = 1;
  options.simulate = false;
  absl::StatusOr<scheduler::Plan> plan = scheduler::PlanGraph(*graph, options);
  EXPECT_OK(plan.status());
  if (!plan.ok()) return result;
  auto shared_plan = std::make_shared<const scheduler::Plan>(*std::move(plan));
  absl::Mutex mu;
  absl::Notification done;
  JobCallbacks callbacks;
  callbacks.on_control = [&](const std::string&, ControlEventKind kind,
                             int64_t value, const std::string& message) {
    absl::MutexLock lock(&mu);
    if (kind == ControlEventKind::kIteration) result.iterations = value;
    if (kind == ControlEventKind::kBranch) {
      result.branch = value;
      result.branch_message = message;
    }
  };
  callbacks.on_done = [&](absl::Status status, scheduler::NodeId,
                          HostBuffers outputs) {
    absl::MutexLock lock(&mu);
    result.status = std::move(status);
    result.outputs = executor_testing::BytesOf(outputs);
    done.Notify();
  };
  JobOptions job_options;
  job_options.control_mode = ControlMode::kDevice;
  absl::StatusOr<uint64_t> id =
      executor.Start(graph, shared_plan, std::move(callbacks), job_options);
  EXPECT_OK(id.status());
  if (!id.ok()) return result;
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  absl::MutexLock lock(&mu);
  return result;
}

// i counts up while i < limit; x doubles alongside.
std::string CountingJob(int limit, int max_iterations) {
  return absl::StrCat(
      R"pb(
        name: "count"
        buffers { name: "i" size_bytes: 4 dtype: FLOAT32 output: true }
        buffers { name: "one" size_bytes: 4 dtype: FLOAT32 fill: 1 }
        buffers { name: "x" size_bytes: 64 dtype: FLOAT32 fill: 1 output: true }
        buffers { name: "go" size_bytes: 4 dtype: INT32 fill: 1 }
        nodes { name: "loop"
                while_loop { condition: "go" max_iterations:)pb",
      max_iterations, R"pb(
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
        body { name: "test" op: "less"
               args { buffer { name: "i" access: READ } }
               args { f32:)pb",
      limit, R"pb(
        }
        args { buffer { name: "go" access: WRITE } }
                            }
                          }
                        }
                      )pb");
}

TEST_F(CudaDeviceControlTest, ExecutorRunsLoopsOnTheDevice) {
  Executor::Options options;
  options.backend = backend_.get();
  std::unique_ptr<Executor> executor = Executor::Create(options).value();
  for (int limit : {10, 3}) {
    RunResult r = RunJob(*executor, CountingJob(limit, 100));
    ASSERT_OK(r.status);
    EXPECT_EQ(executor_testing::Floats(r.outputs["i"])[0],
              static_cast<float>(limit));
    for (float v : executor_testing::Floats(r.outputs["x"])) {
      EXPECT_EQ(v, static_cast<float>(1 << limit));
    }
    EXPECT_EQ(r.iterations, limit);
  }
  // The second job reused the first one's executable.
  EXPECT_GE(backend_->device_control_stats().cache_hits, 1u);

  RunResult bounded = RunJob(*executor, CountingJob(10, 4));
  EXPECT_THAT(bounded.status,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("loop 'loop' would exceed max_iterations 4")));
  // Later jobs are not affected.
  RunResult after = RunJob(*executor, CountingJob(2, 100));
  EXPECT_OK(after.status);
}

// x *= 2 (branch 0) or x *= 3 (branch 1), chosen by an INT64 selector.
std::string ChoiceJob(int selector) {
  return absl::StrCat(
      R"pb(
        name: "choice"
        buffers { name: "x" size_bytes: 16 dtype: FLOAT32 fill: 1 output: true }
        buffers { name: "pick" size_bytes: 8 dtype: INT64 fill:)pb",
      selector, R"pb(
        }
        nodes {
                          name: "case"
                          case_of {
                            selector: "pick"
                            branches {
                              nodes {
                                name: "by2"
                                op: "scale"
                                args { f32: 2 }
                                args { buffer { name: "x" access: READ_WRITE } }
                              }
                            }
                            branches {
                              nodes {
                                name: "by3"
                                op: "scale"
                                args { f32: 3 }
                                args { buffer { name: "x" access: READ_WRITE } }
                              }
                            }
                          }
                        }
                      )pb");
}

TEST_F(CudaDeviceControlTest, ExecutorRunsCasesOnTheDevice) {
  Executor::Options options;
  options.backend = backend_.get();
  std::unique_ptr<Executor> executor = Executor::Create(options).value();
  for (int selector : {0, 1, 5}) {
    SCOPED_TRACE(selector);
    RunResult r = RunJob(*executor, ChoiceJob(selector));
    ASSERT_OK(r.status);
    const float want = selector == 0 ? 2.0f : selector == 1 ? 3.0f : 1.0f;
    for (float v : executor_testing::Floats(r.outputs["x"])) {
      EXPECT_EQ(v, want);
    }
    EXPECT_EQ(r.branch, selector < 2 ? selector : -1);
    EXPECT_THAT(r.branch_message, HasSubstr("on the device"));
  }
}

// The outer loop runs 3 times; the inner loop, on the device inside it,
// 4 times per run.
TEST_F(CudaNestedControlTest, ExecutorRunsNestedLoopsOnTheDevice) {
  Executor::Options options;
  options.backend = backend_.get();
  std::unique_ptr<Executor> executor = Executor::Create(options).value();
  const std::string text = R"pb(
    name: "nested"
    buffers { name: "i" size_bytes: 4 dtype: FLOAT32 }
    buffers { name: "j" size_bytes: 4 dtype: FLOAT32 output: true }
    buffers { name: "one" size_bytes: 4 dtype: FLOAT32 fill: 1 }
    buffers { name: "total" size_bytes: 4 dtype: FLOAT32 output: true }
    buffers { name: "go" size_bytes: 4 dtype: INT32 fill: 1 }
    buffers { name: "inner_go" size_bytes: 4 dtype: INT32 }
    nodes {
      name: "outer"
      while_loop {
        condition: "go"
        max_iterations: 10
        body {
          name: "reset_i"
          op: "fill"
          args { buffer { name: "i" access: WRITE } }
          args { f32: 0 }
        }
        body {
          name: "start_inner"
          op: "fill"
          args { buffer { name: "inner_go" access: WRITE } }
          args { i32: 1 }
        }
        body {
          name: "inner"
          while_loop {
            condition: "inner_go"
            max_iterations: 10
            body {
              name: "next_i"
              op: "axpy"
              args { f32: 1 }
              args { buffer { name: "one" access: READ } }
              args { buffer { name: "i" access: READ_WRITE } }
            }
            body {
              name: "count"
              op: "axpy"
              args { f32: 1 }
              args { buffer { name: "one" access: READ } }
              args { buffer { name: "total" access: READ_WRITE } }
            }
            body {
              name: "inner_test"
              op: "less"
              args { buffer { name: "i" access: READ } }
              args { f32: 4 }
              args { buffer { name: "inner_go" access: WRITE } }
            }
          }
        }
        body {
          name: "next_j"
          op: "axpy"
          args { f32: 1 }
          args { buffer { name: "one" access: READ } }
          args { buffer { name: "j" access: READ_WRITE } }
        }
        body {
          name: "outer_test"
          op: "less"
          args { buffer { name: "j" access: READ } }
          args { f32: 3 }
          args { buffer { name: "go" access: WRITE } }
        }
      }
    }
  )pb";
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    RunResult r = RunJob(*executor, text);
    ASSERT_OK(r.status);
    EXPECT_EQ(executor_testing::Floats(r.outputs["total"])[0], 12.0f);
    EXPECT_EQ(executor_testing::Floats(r.outputs["j"])[0], 3.0f);
  }
}

TEST_F(CudaDeviceControlTest, ExecutorRunsLoopsByTailLaunch) {
  CudaBackend::Options backend_options;
  backend_options.device_launch_loops = true;
  std::unique_ptr<CudaBackend> backend =
      CudaBackend::Create(backend_options).value();
  ASSERT_FALSE(backend->supports_nested_device_control());
  Executor::Options options;
  options.backend = backend.get();
  std::unique_ptr<Executor> executor = Executor::Create(options).value();
  for (int limit : {10, 3}) {
    RunResult r = RunJob(*executor, CountingJob(limit, 100));
    ASSERT_OK(r.status);
    EXPECT_EQ(executor_testing::Floats(r.outputs["i"])[0],
              static_cast<float>(limit));
    for (float v : executor_testing::Floats(r.outputs["x"])) {
      EXPECT_EQ(v, static_cast<float>(1 << limit));
    }
    EXPECT_EQ(r.iterations, limit);
  }
  RunResult bounded = RunJob(*executor, CountingJob(10, 4));
  EXPECT_THAT(bounded.status,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("loop 'loop' would exceed max_iterations 4")));
}

}  // namespace
}  // namespace weft::runtime
