// Cancelling jobs whose work is running: on the simulator the work is
// interrupted and the job ends at once with its streams free; on a backend
// that cannot interrupt (the simulator with interruption off, as CUDA) the
// job is abandoned: reported at once, its streams fenced off until the
// device has finished the work.
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using namespace ::weft::runtime::executor_testing;  // NOLINT: test helpers
using ::weft::testing::StatusIs;

// Twenty seconds of device time: far beyond every bound below.
constexpr double kLongUs = 20e6;
// Cancelled work ends well within this (a loaded two-core host included).
constexpr absl::Duration kPrompt = absl::Seconds(2);

// Polls `done` until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

class ExecutorCancelTest : public ::testing::Test {
 protected:
  // A paced simulator (real time), so long work really takes long.
  void SetUpExecutor(bool interrupt, int max_streams_per_device = 8) {
    SimBackend::Options options;
    options.num_devices = 2;
    options.memory_bytes = uint64_t{64} << 20;
    options.host_to_device_gbps = std::numeric_limits<double>::infinity();
    options.device_to_host_gbps = std::numeric_limits<double>::infinity();
    options.device_to_device_gbps = std::numeric_limits<double>::infinity();
    options.time_scale = 1;
    options.interrupt_aborted_work = interrupt;
    executor_.reset();
    backend_ = SimBackend::Create(options).value();
    Executor::Options exec_options;
    exec_options.backend = backend_.get();
    exec_options.max_streams_per_device = max_streams_per_device;
    executor_ = Executor::Create(exec_options).value();
  }

  void TearDown() override {
    executor_.reset();
    backend_.reset();
  }

  // Starts `job`; `started` is notified when its first node is issued.
  uint64_t Start(const TestJob& job, Outcome& outcome,
                 absl::Notification* started = nullptr) {
    JobCallbacks callbacks = outcome.Callbacks();
    auto record = callbacks.on_node;
    callbacks.on_node = [record, started](NodeId node, NodeEventKind kind,
                                          const absl::Status& s) {
      record(node, kind, s);
      if (started != nullptr && kind == NodeEventKind::kStarted &&
          !started->HasBeenNotified()) {
        started->Notify();
      }
    };
    absl::StatusOr<uint64_t> id =
        executor_->Start(job.graph(), job.plan(), std::move(callbacks));
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(0);
  }

  // Starts `job`, lets it run for 50 ms, cancels it and waits for its
  // outcome; returns how long that took after the cancel.
  absl::Duration RunAndCancel(const TestJob& job, Outcome& outcome) {
    absl::Notification started;
    const uint64_t id = Start(job, outcome, &started);
    started.WaitForNotification();
    absl::SleepFor(absl::Milliseconds(50));
    const absl::Time cancelled = absl::Now();
    executor_->Cancel(id);
    EXPECT_TRUE(outcome.Wait());
    return absl::Now() - cancelled;
  }

  // A small job on device 0 runs to its result within kPrompt.
  void ExpectASmallJobRuns() {
    TestJob next(1, {0});
    const int y = next.Buffer("y", 16, DType::kFloat32, BufferSpec::Init::kFill,
                              2, "", true);
    next.Node("scale", "scale",
              {scheduler::Arg(3.0f), Use(y, Access::kReadWrite)}, 0, {}, -1,
              1000);
    Outcome outcome;
    const absl::Time start = absl::Now();
    Start(next, outcome);
    ASSERT_TRUE(outcome.Wait());
    EXPECT_LT(absl::Now() - start, kPrompt);
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    EXPECT_EQ(Floats(outcome.outputs["y"])[0], 6.0f);
  }

  std::unique_ptr<SimBackend> backend_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(ExecutorCancelTest, CancelInterruptsARunningSpin) {
  SetUpExecutor(/*interrupt=*/true);
  TestJob job(1, {0});
  job.Node("forever", "spin", {}, 0, {}, -1, kLongUs);
  Outcome outcome;
  EXPECT_LT(RunAndCancel(job, outcome), kPrompt);
  EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(outcome.CountOf(NodeEventKind::kFinished), 0);
  // Everything is back by the time the job is reported.
  ExpectNoMemoryHeld(*backend_, *executor_);
  EXPECT_EQ(executor_->Load()[0].streams_busy, 0);
  ExpectASmallJobRuns();
}

TEST_F(ExecutorCancelTest, CancelInterruptsALongKernel) {
  SetUpExecutor(/*interrupt=*/true);
  TestJob job(1, {0});
  const int x = job.Buffer("x", 1 << 12, DType::kFloat32,
                           BufferSpec::Init::kFill, 1, "", true);
  job.Node("slow_scale", "scale",
           {scheduler::Arg(2.0f), Use(x, Access::kReadWrite)}, 0, {}, -1,
           kLongUs);
  job.Node("after", "scale", {scheduler::Arg(2.0f), Use(x, Access::kReadWrite)},
           0, {}, -1, kLongUs);
  Outcome outcome;
  EXPECT_LT(RunAndCancel(job, outcome), kPrompt);
  EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_TRUE(outcome.outputs.empty());
  ExpectNoMemoryHeld(*backend_, *executor_);
  ExpectASmallJobRuns();
}

TEST_F(ExecutorCancelTest, CancelInterruptsParallelSpinsPinningEveryStream) {
  SetUpExecutor(/*interrupt=*/true, /*max_streams_per_device=*/8);
  // 64 logical streams over two devices, folded onto every pooled stream.
  std::vector<int> devices;
  for (int s = 0; s < 64; ++s) devices.push_back(s % 2);
  TestJob job(64, devices);
  for (int s = 0; s < 64; ++s) {
    job.Node("spin" + std::to_string(s), "spin", {}, s, {}, -1, kLongUs);
  }
  Outcome outcome;
  EXPECT_LT(RunAndCancel(job, outcome), kPrompt);
  EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(outcome.CountOf(NodeEventKind::kFinished), 0);
  for (const DeviceLoad& load : executor_->Load()) {
    EXPECT_EQ(load.streams_busy, 0);
    EXPECT_EQ(load.streams_total, 8);
  }
  // A job using both devices runs at once: no stream or device time is
  // left to the cancelled spins.
  Outcome next;
  const absl::Time start = absl::Now();
  Start(VectorPipeline(2.0f), next);
  ASSERT_TRUE(next.Wait());
  EXPECT_LT(absl::Now() - start, kPrompt);
  ExpectPipelineResult(next, 2.0f);
}

TEST_F(ExecutorCancelTest, UninterruptibleWorkIsAbandonedBehindAFence) {
  // One stream per device: the cancelled job's is the only one.
  SetUpExecutor(/*interrupt=*/false, /*max_streams_per_device=*/1);
  TestJob job(1, {0});
  const int x = job.Buffer("x", 1 << 12, DType::kFloat32,
                           BufferSpec::Init::kFill, 1, "", true);
  // Runs 3 s once started; the second node is skipped.
  job.Node("long", "spin", {Use(x, Access::kReadWrite)}, 0, {}, -1, 3e6);
  job.Node("skipped", "spin", {Use(x, Access::kReadWrite)}, 0, {}, -1, kLongUs);
  Outcome outcome;
  const absl::Time start = absl::Now();
  // Reported at once, while the device still runs the spin.
  EXPECT_LT(RunAndCancel(job, outcome), kPrompt);
  EXPECT_THAT(outcome.status,
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  EXPECT_EQ(outcome.on_done_calls, 1);
  const int events_at_done = outcome.CountOf(NodeEventKind::kStarted) +
                             outcome.CountOf(NodeEventKind::kFinished) +
                             outcome.CountOf(NodeEventKind::kFailed);

  // Its stream is fenced off and its memory held until the spin ends.
  const bool still_running = absl::Now() - start < absl::Milliseconds(2500);
  DeviceLoad load = executor_->Load()[0];
  if (still_running) {
    EXPECT_EQ(load.streams_fenced, 1);
    EXPECT_EQ(load.streams_busy, 1);
    EXPECT_GT(load.memory.in_use_bytes, 0u);
    // Not handed to another job: with no other stream, that job is
    // refused rather than queued behind the abandoned work.
    TestJob other(1, {0});
    other.Node("n", "spin", {}, 0, {}, -1, 1000);
    Outcome refused;
    Start(other, refused);
    ASSERT_TRUE(refused.Wait());
    EXPECT_THAT(refused.status, StatusIs(absl::StatusCode::kUnavailable,
                                         HasSubstr("fenced off")));
  }

  // Once the device has finished, the stream and memory come back.
  ASSERT_TRUE(Eventually(
      [&] {
        const DeviceLoad now = executor_->Load()[0];
        return now.streams_fenced == 0 && now.streams_busy == 0;
      },
      absl::Seconds(20)));
  EXPECT_GE(absl::Now() - start, absl::Seconds(3));
  ExpectNoMemoryHeld(*backend_, *executor_);
  // No callback of the job ran after on_done.
  EXPECT_EQ(outcome.CountOf(NodeEventKind::kStarted) +
                outcome.CountOf(NodeEventKind::kFinished) +
                outcome.CountOf(NodeEventKind::kFailed),
            events_at_done);
  EXPECT_EQ(outcome.on_done_calls, 1);
  // The same stream serves the next job.
  const int streams = backend_->stream_count();
  ExpectASmallJobRuns();
  EXPECT_EQ(backend_->stream_count(), streams);
}

TEST_F(ExecutorCancelTest, DestroyingTheExecutorWaitsForAbandonedWork) {
  SetUpExecutor(/*interrupt=*/false);
  TestJob job(1, {0});
  job.Node("long", "spin", {}, 0, {}, -1, 300000);  // 300 ms
  Outcome outcome;
  const absl::Time start = absl::Now();
  EXPECT_LT(RunAndCancel(job, outcome), kPrompt);
  EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kCancelled));
  // The backend's callbacks still reach the executor until then.
  executor_.reset();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_EQ(outcome.on_done_calls, 1);
}

}  // namespace
}  // namespace weft::runtime
