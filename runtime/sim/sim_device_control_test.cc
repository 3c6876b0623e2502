// Loops and case..of decided by the simulated device (sim_device_control.h),
// through SimBackend::LaunchDeviceLoop and LaunchDeviceCase.
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device_graph.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

class SimDeviceControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SimBackend::Options options;
    options.num_devices = 1;
    options.memory_bytes = 1 << 20;
    constexpr double kInfinite = std::numeric_limits<double>::infinity();
    options.host_to_device_gbps = kInfinite;
    options.device_to_host_gbps = kInfinite;
    backend_ = SimBackend::Create(options).value();
    stream_ = backend_->CreateStream(0).value();
    body_stream_ = backend_->CreateStream(0).value();
  }

  // A device buffer holding `value`.
  template <typename T>
  DevicePtr Buffer(T value) {
    DevicePtr ptr = backend_->Allocate(0, sizeof(T)).value();
    EXPECT_OK(backend_->CopyHostToDevice(ptr, &value, sizeof(T), stream_));
    EXPECT_OK(backend_->SynchronizeStream(stream_));
    return ptr;
  }
  template <typename T>
  T Read(DevicePtr ptr) {
    T value{};
    EXPECT_OK(backend_->CopyDeviceToHost(&value, ptr, sizeof(T), stream_));
    EXPECT_OK(backend_->SynchronizeStream(stream_));
    return value;
  }
  // The status of everything enqueued on the stream so far.
  absl::Status Drain() {
    absl::Notification done;
    absl::Status result;
    EXPECT_OK(backend_->AddHostCallback(stream_, [&](absl::Status status) {
      result = std::move(status);
      done.Notify();
    }));
    done.WaitForNotification();
    return result;
  }

  static DeviceGraphNode Kernel(const std::string& op,
                                std::vector<KernelArg> args) {
    DeviceGraphNode node;
    node.launch.op = op;
    node.launch.args = std::move(args);
    return node;
  }
  static KernelArg F32(DevicePtr ptr, Access access) {
    return DeviceBufferArg{ptr, 4, DType::kFloat32, access};
  }

  // i += 1; go = i < limit.
  DeviceGraph CountingBody(DevicePtr one, DevicePtr i, DevicePtr go,
                           float limit) {
    DeviceGraph body;
    body.device = 0;
    body.nodes.push_back(Kernel(
        "axpy", {1.0f, F32(one, Access::kRead), F32(i, Access::kReadWrite)}));
    DeviceGraphNode test =
        Kernel("less", {F32(i, Access::kRead), limit,
                        DeviceBufferArg{go, 4, DType::kInt32, Access::kWrite}});
    test.deps = {0};
    body.nodes.push_back(std::move(test));
    return body;
  }

  std::unique_ptr<SimBackend> backend_;
  StreamHandle stream_;
  StreamHandle body_stream_;
};

TEST_F(SimDeviceControlTest, LoopRunsWhileItsConditionHolds) {
  const DevicePtr one = Buffer(1.0f), i = Buffer(0.0f);
  const DevicePtr go = Buffer(int32_t{1});
  DeviceGraph body = CountingBody(one, i, go, 5);
  DeviceLoop loop;
  loop.name = "count";
  loop.body = &body;
  loop.condition = go;
  loop.dtype = DType::kInt32;
  loop.max_iterations = 100;
  loop.iterations = std::make_shared<std::atomic<int64_t>>(-1);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  ASSERT_OK(Drain());
  EXPECT_EQ(loop.iterations->load(), 5);
  EXPECT_EQ(Read<float>(i), 5.0f);
}

TEST_F(SimDeviceControlTest, LoopWithAFalseConditionRunsNoIteration) {
  const DevicePtr one = Buffer(1.0f), i = Buffer(0.0f);
  const DevicePtr go = Buffer(0.0f);  // a float condition
  DeviceGraph body = CountingBody(one, i, go, 5);
  DeviceLoop loop;
  loop.name = "never";
  loop.body = &body;
  loop.condition = go;
  loop.dtype = DType::kFloat32;
  loop.max_iterations = 1;
  loop.iterations = std::make_shared<std::atomic<int64_t>>(-1);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  ASSERT_OK(Drain());
  EXPECT_EQ(loop.iterations->load(), 0);
  EXPECT_EQ(Read<float>(i), 0.0f);
}

TEST_F(SimDeviceControlTest, LoopBeyondItsBoundFailsItsStream) {
  const DevicePtr one = Buffer(1.0f), i = Buffer(0.0f);
  const DevicePtr go = Buffer(int32_t{1});
  DeviceGraph body = CountingBody(one, i, go, 50);
  DeviceLoop loop;
  loop.name = "bounded";
  loop.body = &body;
  loop.condition = go;
  loop.max_iterations = 3;
  loop.iterations = std::make_shared<std::atomic<int64_t>>(-1);
  ASSERT_OK(backend_->SetErrorScope(stream_, 7));
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  EXPECT_THAT(Drain(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("loop 'bounded' would exceed max_iterations "
                                 "3")));
  EXPECT_EQ(loop.iterations->load(), 3);
  backend_->ReleaseErrorScope(stream_, 7);
}

// A loop whose body holds a loop: the outer one counts i to 3, and each
// of its iterations resets j and runs the inner one until j reaches 4,
// adding 1 to total each time.
TEST_F(SimDeviceControlTest, LoopsNestInsideLoopBodies) {
  const DevicePtr one = Buffer(1.0f), i = Buffer(0.0f), j = Buffer(0.0f);
  const DevicePtr total = Buffer(0.0f);
  const DevicePtr outer_go = Buffer(int32_t{1}), inner_go = Buffer(int32_t{0});
  auto inner = std::make_shared<DeviceGraphControl>();
  inner->name = "inner";
  inner->value = inner_go;
  inner->max_iterations = 10;
  DeviceGraph inner_body = CountingBody(one, j, inner_go, 4);
  DeviceGraphNode add = Kernel(
      "axpy", {1.0f, F32(one, Access::kRead), F32(total, Access::kReadWrite)});
  inner_body.nodes.push_back(std::move(add));
  inner->bodies.push_back(std::move(inner_body));
  DeviceGraph body = CountingBody(one, i, outer_go, 3);
  DeviceGraphNode reset_j = Kernel("fill", {F32(j, Access::kWrite), 0.0f});
  reset_j.deps = {1};
  body.nodes.push_back(std::move(reset_j));
  DeviceGraphNode start = Kernel(
      "fill", {DeviceBufferArg{inner_go, 4, DType::kInt32, Access::kWrite},
               int32_t{1}});
  start.deps = {2};
  body.nodes.push_back(std::move(start));
  body.AddControl(inner, {3});
  ASSERT_OK(ValidateDeviceGraph(body));
  DeviceLoop loop;
  loop.name = "outer";
  loop.body = &body;
  loop.condition = outer_go;
  loop.max_iterations = 10;
  loop.iterations = std::make_shared<std::atomic<int64_t>>(-1);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  ASSERT_OK(Drain());
  EXPECT_EQ(loop.iterations->load(), 3);
  EXPECT_EQ(inner->result->load(), 12);
  EXPECT_EQ(Read<float>(total), 12.0f);
  EXPECT_EQ(Read<float>(i), 3.0f);
}

// A nested loop beyond its bound fails the enclosing loop, naming itself.
TEST_F(SimDeviceControlTest, ANestedLoopBeyondItsBoundFailsTheEnclosingOne) {
  const DevicePtr one = Buffer(1.0f), i = Buffer(0.0f), j = Buffer(0.0f);
  const DevicePtr outer_go = Buffer(int32_t{1}), inner_go = Buffer(int32_t{1});
  auto inner = std::make_shared<DeviceGraphControl>();
  inner->name = "inner";
  inner->value = inner_go;
  inner->max_iterations = 2;
  inner->bodies.push_back(CountingBody(one, j, inner_go, 50));
  DeviceGraph body = CountingBody(one, i, outer_go, 3);
  body.AddControl(inner, {1});
  DeviceLoop loop;
  loop.name = "outer";
  loop.body = &body;
  loop.condition = outer_go;
  loop.max_iterations = 10;
  loop.iterations = std::make_shared<std::atomic<int64_t>>(-1);
  ASSERT_OK(backend_->SetErrorScope(stream_, 9));
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  EXPECT_THAT(
      Drain(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr("loop 'inner' would exceed max_iterations 2")));
  EXPECT_EQ(loop.iterations->load(), 1);
  backend_->ReleaseErrorScope(stream_, 9);
}

// A case..of inside a loop picks its branch anew in every iteration.
TEST_F(SimDeviceControlTest, CasesNestInsideLoopBodies) {
  const DevicePtr one = Buffer(1.0f), i = Buffer(0.0f), x = Buffer(1.0f);
  const DevicePtr go = Buffer(int32_t{1}), odd = Buffer(int32_t{0});
  auto pick = std::make_shared<DeviceGraphControl>();
  pick->loop = false;
  pick->name = "pick";
  pick->value = odd;
  pick->result->store(-1);
  for (const auto& [factor, next] : {std::pair{2.0f, 1}, std::pair{3.0f, 0}}) {
    DeviceGraph branch;
    branch.device = 0;
    branch.nodes.push_back(
        Kernel("scale", {factor, F32(x, Access::kReadWrite)}));
    DeviceGraphNode flip =
        Kernel("fill", {DeviceBufferArg{odd, 4, DType::kInt32, Access::kWrite},
                        int32_t{next}});
    flip.deps = {0};
    branch.nodes.push_back(std::move(flip));
    pick->bodies.push_back(std::move(branch));
  }
  DeviceGraph body = CountingBody(one, i, go, 5);
  body.AddControl(pick, {1});
  DeviceLoop loop;
  loop.name = "loop";
  loop.body = &body;
  loop.condition = go;
  loop.max_iterations = 10;
  loop.iterations = std::make_shared<std::atomic<int64_t>>(-1);
  ASSERT_OK(backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
  ASSERT_OK(Drain());
  EXPECT_EQ(loop.iterations->load(), 5);
  EXPECT_EQ(pick->result->load(), 0);  // the fifth iteration: even
  EXPECT_EQ(Read<float>(x), 2.0f * 3 * 2 * 3 * 2);
}

TEST_F(SimDeviceControlTest, CaseRunsTheSelectedBranchOrNone) {
  for (int64_t selector : {0, 1, 2, -1}) {
    const DevicePtr x = Buffer(1.0f);
    const DevicePtr pick = Buffer(selector);
    DeviceGraph by2, by3;
    by2.device = by3.device = 0;
    by2.nodes.push_back(Kernel("scale", {2.0f, F32(x, Access::kReadWrite)}));
    by3.nodes.push_back(Kernel("scale", {3.0f, F32(x, Access::kReadWrite)}));
    DeviceCase choice;
    choice.name = "pick";
    choice.branches = {&by2, &by3, nullptr};  // branch 2 is empty
    choice.selector = pick;
    choice.dtype = DType::kInt64;
    choice.taken = std::make_shared<std::atomic<int64_t>>(-9);
    ASSERT_OK(backend_->LaunchDeviceCase(choice, stream_, body_stream_));
    ASSERT_OK(Drain());
    EXPECT_EQ(choice.taken->load(), selector) << selector;
    const float expected = selector == 0 ? 2.0f : selector == 1 ? 3.0f : 1.0f;
    EXPECT_EQ(Read<float>(x), expected) << selector;
  }
}

TEST_F(SimDeviceControlTest, RefusesWhatTheDeviceCannotDecide) {
  const DevicePtr x = Buffer(1.0f);
  DeviceGraph by2;
  by2.nodes.push_back(Kernel("scale", {2.0f, F32(x, Access::kReadWrite)}));
  DeviceCase choice;
  choice.name = "floaty";
  choice.branches = {&by2};
  choice.selector = x;
  choice.dtype = DType::kFloat32;
  choice.taken = std::make_shared<std::atomic<int64_t>>(-1);
  EXPECT_THAT(backend_->LaunchDeviceCase(choice, stream_, body_stream_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("INT32 or INT64")));
  choice.dtype = DType::kInt32;
  EXPECT_THAT(backend_->LaunchDeviceCase(choice, stream_, stream_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a stream of their own")));
  DeviceLoop loop;
  loop.name = "bodiless";
  loop.condition = x;
  loop.iterations = std::make_shared<std::atomic<int64_t>>(-1);
  EXPECT_THAT(
      backend_->LaunchDeviceLoop(loop, stream_, body_stream_),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no body")));
  ASSERT_OK(Drain());
}

}  // namespace
}  // namespace weft::runtime
