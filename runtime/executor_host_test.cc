// Host-engine nodes: they run on the executor's host worker pool, gated
// into their streams, between device nodes.
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using namespace ::weft::runtime::executor_testing;  // NOLINT: test helpers
using ::weft::testing::StatusIs;

constexpr double kInfinite = std::numeric_limits<double>::infinity();

// Host kernels: the built-ins plus ops only the host has, which record the
// thread they ran on: "host_axpy" (axpy), "host_wait" (waits for `release`
// first, then axpy) and "host_fail".
struct HostKernels {
  HostKernels() : table(CpuKernelTable::WithBuiltins()) {
    EXPECT_TRUE(table
                    .Register("host_axpy",
                              [this](absl::Span<const HostArg> args) {
                                Note();
                                return AxpyKernel(args);
                              })
                    .ok());
    EXPECT_TRUE(table
                    .Register("host_wait",
                              [this](absl::Span<const HostArg> args) {
                                Note();
                                started.Notify();
                                release.WaitForNotification();
                                return AxpyKernel(args);
                              })
                    .ok());
    EXPECT_TRUE(table
                    .Register("host_fail",
                              [](absl::Span<const HostArg>) {
                                return absl::DataLossError("host bits lost");
                              })
                    .ok());
  }
  void Note() {
    absl::MutexLock lock(&mu);
    threads.push_back(std::this_thread::get_id());
  }
  std::vector<std::thread::id> Threads() {
    absl::MutexLock lock(&mu);
    return threads;
  }

  CpuKernelTable table;
  absl::Notification started;
  absl::Notification release;
  absl::Mutex mu;
  std::vector<std::thread::id> threads ABSL_GUARDED_BY(mu);
};

class ExecutorHostTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(/*host_threads=*/2); }
  void TearDown() override {
    if (!host_.release.HasBeenNotified()) host_.release.Notify();
    executor_.reset();
    backend_.reset();
  }

  void Make(int host_threads) {
    executor_.reset();
    SimBackend::Options options;
    options.num_devices = 2;
    options.memory_bytes = 64 << 20;
    options.host_to_device_gbps = kInfinite;
    options.device_to_host_gbps = kInfinite;
    options.device_to_device_gbps = kInfinite;
    options.time_scale = 0;
    backend_ = SimBackend::Create(options).value();
    Executor::Options exec;
    exec.backend = backend_.get();
    exec.host_threads = host_threads;
    exec.host_kernels = &host_.table;
    executor_ = Executor::Create(exec).value();
  }

  void Run(const TestJob& job, Outcome& outcome, bool traced = false) {
    ASSERT_TRUE(
        executor_->Start(job.graph(), job.plan(), outcome.Callbacks(traced))
            .ok());
  }

  HostKernels host_;
  std::unique_ptr<SimBackend> backend_;
  std::unique_ptr<Executor> executor_;
};

// fill(x) on device 0 -> host `op`(3, x, y) -> reduce_sum(y) on device 1.
// Streams: 0 (device 0), 1 (host, on device 1), 2 (device 1).
TestJob HostPipeline(const std::string& op, float fill_value, int n = 256) {
  TestJob job(3, {0, 1, 1});
  job.HostStream(1);
  std::vector<float> y0(n);
  for (int i = 0; i < n; ++i) y0[i] = static_cast<float>(i);
  const int x = job.Buffer("x", n * 4, DType::kFloat32);
  const int y = job.Buffer("y", n * 4, DType::kFloat32, BufferSpec::Init::kData,
                           0, FloatBytes(y0), true);
  const int sum = job.Buffer("sum", 4, DType::kFloat32, BufferSpec::Init::kZero,
                             0, "", true);
  job.Node("fill", "fill", {Use(x, Access::kWrite), fill_value}, 0, {}, 0);
  job.Node("host", op,
           {3.0f, Use(x, Access::kRead), Use(y, Access::kReadWrite)}, 1, {0},
           1);
  job.Node("reduce", "reduce_sum",
           {Use(y, Access::kRead), Use(sum, Access::kWrite)}, 2, {1});
  return job;
}

TEST_F(ExecutorHostTest, HostNodeRunsOnThePoolBetweenDeviceNodes) {
  std::thread::id scheduling_thread;
  Outcome outcome;
  JobCallbacks callbacks = outcome.Callbacks();
  auto record = callbacks.on_node;
  callbacks.on_node = [&, record](NodeId node, NodeEventKind kind,
                                  const absl::Status& s) {
    scheduling_thread = std::this_thread::get_id();
    record(node, kind, s);
  };
  TestJob job = HostPipeline("host_axpy", 2.0f);
  ASSERT_TRUE(executor_->Start(job.graph(), job.plan(), callbacks).ok());
  ASSERT_TRUE(outcome.Wait());
  // The op exists only on the host: it cannot have run on a device.
  ExpectPipelineResult(outcome, 2.0f, 256);
  std::vector<std::thread::id> threads = host_.Threads();
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_NE(threads[0], scheduling_thread);
  EXPECT_NE(threads[0], std::this_thread::get_id());
  EXPECT_LT(outcome.IndexOf(0, NodeEventKind::kFinished),
            outcome.IndexOf(1, NodeEventKind::kFinished));
  EXPECT_LT(outcome.IndexOf(1, NodeEventKind::kFinished),
            outcome.IndexOf(2, NodeEventKind::kFinished));
  ExpectNoMemoryHeld(*backend_, *executor_);
}

TEST_F(ExecutorHostTest, DependentsWaitForTheHostOpWhileOthersRun) {
  // HostPipeline with "host_wait", plus an independent device node on a
  // stream of its own.
  TestJob with_other(4, {0, 1, 1, 1});
  with_other.HostStream(1);
  const int n = 256;
  std::vector<float> y0(n, 0.0f);
  const int x = with_other.Buffer("x", n * 4, DType::kFloat32);
  const int y =
      with_other.Buffer("y", n * 4, DType::kFloat32, BufferSpec::Init::kData, 0,
                        FloatBytes(y0), true);
  const int sum = with_other.Buffer("sum", 4, DType::kFloat32,
                                    BufferSpec::Init::kZero, 0, "", true);
  const int z = with_other.Buffer("z", 16, DType::kFloat32);
  with_other.Node("fill", "fill", {Use(x, Access::kWrite), 1.0f}, 0, {}, 0);
  const NodeId host = with_other.Node(
      "host", "host_wait",
      {3.0f, Use(x, Access::kRead), Use(y, Access::kReadWrite)}, 1, {0}, 1);
  const NodeId reduce = with_other.Node(
      "reduce", "reduce_sum", {Use(y, Access::kRead), Use(sum, Access::kWrite)},
      2, {1});
  const NodeId other =
      with_other.Node("other", "fill", {Use(z, Access::kWrite), 5.0f}, 3);

  absl::Notification other_finished;
  Outcome outcome;
  JobCallbacks callbacks = outcome.Callbacks();
  auto record = callbacks.on_node;
  callbacks.on_node = [&, record](NodeId node, NodeEventKind kind,
                                  const absl::Status& s) {
    record(node, kind, s);
    if (node == other && kind == NodeEventKind::kFinished) {
      other_finished.Notify();
    }
  };
  ASSERT_TRUE(
      executor_->Start(with_other.graph(), with_other.plan(), callbacks).ok());
  host_.started.WaitForNotification();
  // The host op holds its dependents, not the devices nor the executor.
  other_finished.WaitForNotification();
  EXPECT_EQ(outcome.IndexOf(reduce, NodeEventKind::kFinished), -1);
  EXPECT_EQ(outcome.IndexOf(host, NodeEventKind::kFinished), -1);
  host_.release.Notify();
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_LT(outcome.IndexOf(host, NodeEventKind::kFinished),
            outcome.IndexOf(reduce, NodeEventKind::kFinished));
  EXPECT_EQ(Floats(outcome.outputs.at("sum"))[0], 3.0f * n);
}

TEST_F(ExecutorHostTest, HostOpFailureFailsItsJobWithTheNode) {
  TestJob bad = HostPipeline("host_fail", 1.0f);
  Outcome bad_outcome, good_outcome;
  Run(bad, bad_outcome);
  Run(VectorPipeline(2.0f, 256), good_outcome);
  ASSERT_TRUE(bad_outcome.Wait());
  ASSERT_TRUE(good_outcome.Wait());
  EXPECT_THAT(bad_outcome.status,
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("host_fail on the host: host bits lost")));
  EXPECT_EQ(bad_outcome.failed_node, 1);
  EXPECT_GE(bad_outcome.IndexOf(1, NodeEventKind::kFailed), 0);
  EXPECT_EQ(bad_outcome.IndexOf(2, NodeEventKind::kFinished), -1);
  EXPECT_TRUE(bad_outcome.outputs.empty());
  ExpectPipelineResult(good_outcome, 2.0f, 256);
  ExpectNoMemoryHeld(*backend_, *executor_);
}

TEST_F(ExecutorHostTest, UnknownHostOpFailsAtIssue) {
  TestJob job(1, {0});
  job.HostStream(0);
  job.Node("h", "no_such_host_op", {}, 0);
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.Wait());
  EXPECT_THAT(
      outcome.status,
      StatusIs(absl::StatusCode::kUnimplemented,
               HasSubstr("'no_such_host_op' has no host implementation")));
  EXPECT_EQ(outcome.failed_node, 0);
}

TEST_F(ExecutorHostTest, OutputWrittenLastOnTheHost) {
  TestJob job(2, {0, 0});
  job.HostStream(1);
  const int x = job.Buffer("x", 16, DType::kFloat32, BufferSpec::Init::kFill, 1,
                           "", true);
  const int y = job.Buffer("y", 16, DType::kFloat32, BufferSpec::Init::kFill,
                           10, "", true);
  job.Node("scale", "scale", {4.0f, Use(x, Access::kReadWrite)}, 0, {}, 0);
  job.Node("host", "host_axpy",
           {2.0f, Use(x, Access::kRead), Use(y, Access::kReadWrite)}, 1, {0});
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_THAT(Floats(outcome.outputs.at("x")),
              ::testing::ElementsAre(4, 4, 4, 4));
  EXPECT_THAT(Floats(outcome.outputs.at("y")),
              ::testing::ElementsAre(18, 18, 18, 18));
}

TEST_F(ExecutorHostTest, HostOpsRunInlineWithoutPoolThreads) {
  Make(/*host_threads=*/0);
  Outcome outcome;
  Run(HostPipeline("host_axpy", 5.0f), outcome);
  ASSERT_TRUE(outcome.Wait());
  ExpectPipelineResult(outcome, 5.0f, 256);
}

TEST_F(ExecutorHostTest, HostOpTakesItsCostInDeviceTime) {
  // spin on the host for 300 us between two 100 us device spins: the trace
  // shows the host span and the device clock includes it.
  TestJob job(2, {0, 0});
  job.HostStream(1);
  job.Node("a", "spin", {}, 0, {}, 0, 100);
  job.Node("h", "spin", {}, 1, {0}, 1, 300);
  job.Node("b", "spin", {}, 0, {1}, -1, 100);
  Outcome outcome;
  Run(job, outcome, /*traced=*/true);
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  ASSERT_EQ(outcome.on_trace_calls, 1);
  EXPECT_DOUBLE_EQ(outcome.trace.NodeMakespanUs(), 500);
  int host_spans = 0;
  for (const TraceSpan& span : outcome.trace.spans) {
    if (span.kind != SpanKind::kHost) continue;
    ++host_spans;
    EXPECT_EQ(span.name, "h");
    EXPECT_DOUBLE_EQ(span.start_us, 100);
    EXPECT_DOUBLE_EQ(span.end_us, 400);
    EXPECT_EQ(outcome.trace.tracks[span.track].device, -1);
  }
  EXPECT_EQ(host_spans, 1);
}

// A backend without the optional capabilities: forwards the required ones.
class PlainBackend final : public Backend {
 public:
  explicit PlainBackend(Backend* base) : base_(base) {}
  int device_count() const override { return base_->device_count(); }
  DeviceInfo device_info(int d) const override { return base_->device_info(d); }
  uint64_t memory_used_bytes(int d) const override {
    return base_->memory_used_bytes(d);
  }
  absl::StatusOr<StreamHandle> CreateStream(int d) override {
    return base_->CreateStream(d);
  }
  absl::Status DestroyStream(StreamHandle s) override {
    return base_->DestroyStream(s);
  }
  absl::StatusOr<EventHandle> CreateEvent(int d) override {
    return base_->CreateEvent(d);
  }
  absl::Status DestroyEvent(EventHandle e) override {
    return base_->DestroyEvent(e);
  }
  absl::Status RecordEvent(EventHandle e, StreamHandle s) override {
    return base_->RecordEvent(e, s);
  }
  absl::Status StreamWaitEvent(StreamHandle s, EventHandle e) override {
    return base_->StreamWaitEvent(s, e);
  }
  absl::StatusOr<bool> QueryEvent(EventHandle e) override {
    return base_->QueryEvent(e);
  }
  absl::Status SynchronizeStream(StreamHandle s) override {
    return base_->SynchronizeStream(s);
  }
  absl::StatusOr<DevicePtr> Allocate(int d, uint64_t bytes) override {
    return base_->Allocate(d, bytes);
  }
  absl::Status Free(DevicePtr p) override { return base_->Free(p); }
  absl::Status CopyHostToDevice(DevicePtr dst, const void* src, uint64_t n,
                                StreamHandle s) override {
    return base_->CopyHostToDevice(dst, src, n, s);
  }
  absl::Status CopyDeviceToHost(void* dst, DevicePtr src, uint64_t n,
                                StreamHandle s) override {
    return base_->CopyDeviceToHost(dst, src, n, s);
  }
  absl::Status CopyDeviceToDevice(DevicePtr dst, DevicePtr src, uint64_t n,
                                  StreamHandle s) override {
    return base_->CopyDeviceToDevice(dst, src, n, s);
  }
  absl::Status Launch(const KernelLaunch& l, StreamHandle s) override {
    return base_->Launch(l, s);
  }
  absl::Status AddHostCallback(StreamHandle s, HostCallback cb) override {
    return base_->AddHostCallback(s, std::move(cb));
  }

 private:
  Backend* const base_;
};

TEST_F(ExecutorHostTest, WithoutGatesHostNodesRunOnTheirStream) {
  PlainBackend plain(backend_.get());
  EXPECT_FALSE(plain.supports_host_gates());
  EXPECT_THAT(plain.EnqueueHostGate(StreamHandle{1}).status(),
              StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_FALSE(plain.has_device_clock());
  EXPECT_THAT(plain.EventTimeUs(EventHandle{1}).status(),
              StatusIs(absl::StatusCode::kUnimplemented));
  Executor::Options exec;
  exec.backend = &plain;
  exec.host_kernels = &host_.table;
  auto executor = Executor::Create(exec).value();
  // "axpy" exists on the simulated device too.
  Outcome outcome;
  TestJob job = HostPipeline("axpy", 3.0f);
  ASSERT_TRUE(
      executor->Start(job.graph(), job.plan(), outcome.Callbacks(true)).ok());
  ASSERT_TRUE(outcome.Wait());
  ExpectPipelineResult(outcome, 3.0f, 256);
  EXPECT_TRUE(host_.Threads().empty());
  // Host-clock trace: every node still has a span.
  EXPECT_FALSE(outcome.trace.device_clock);
  int node_spans = 0;
  for (const TraceSpan& span : outcome.trace.spans)
    node_spans += span.node >= 0;
  EXPECT_EQ(node_spans, 3);
}

}  // namespace
}  // namespace weft::runtime
