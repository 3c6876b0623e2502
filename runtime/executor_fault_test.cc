// Faults: a job that hits one fails with the node and the reason; the
// executor and every other job carry on, including jobs sharing its device
// and, at the stream cap, its very stream.
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/ops/test_kernels.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using namespace ::weft::runtime::executor_testing;  // NOLINT: test helpers
using ::weft::testing::StatusIs;

constexpr double kInfinite = std::numeric_limits<double>::infinity();

// Device kernels: "block" and "boom" (fails with DATA_LOSS).
struct FaultKernels : BlockAndBoomKernels {
  FaultKernels() : BlockAndBoomKernels(absl::DataLossError("bits fell out")) {}
};

// `n` nodes adding one to a counter on one stream of `device`: the output
// "counter" ends at n.
TestJob Counter(int device, int n) {
  TestJob job(1, {device});
  const int counter = job.Buffer("counter", 4, DType::kFloat32,
                                 BufferSpec::Init::kZero, 0, "", true);
  const int one =
      job.Buffer("one", 4, DType::kFloat32, BufferSpec::Init::kFill, 1);
  for (int i = 0; i < n; ++i) {
    job.Node("add" + std::to_string(i), "axpy",
             {1.0f, Use(one, Access::kRead), Use(counter, Access::kReadWrite)},
             0);
  }
  return job;
}

void ExpectCounter(Outcome& outcome, int n) {
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(Floats(outcome.outputs.at("counter"))[0], static_cast<float>(n));
}

class ExecutorFaultTest : public ::testing::Test {
 protected:
  void Make(int max_streams_per_device, double time_scale = 0,
            int max_in_flight_per_job = 4096) {
    executor_.reset();
    SimBackend::Options options;
    options.num_devices = 2;
    options.memory_bytes = 64 << 20;
    options.host_to_device_gbps = kInfinite;
    options.device_to_host_gbps = kInfinite;
    options.device_to_device_gbps = kInfinite;
    options.time_scale = time_scale;
    options.kernels = &kernels_.table;
    backend_ = SimBackend::Create(options).value();
    Executor::Options exec;
    exec.backend = backend_.get();
    exec.max_streams_per_device = max_streams_per_device;
    exec.max_in_flight_per_job = max_in_flight_per_job;
    executor_ = Executor::Create(exec).value();
  }
  void SetUp() override { Make(8); }
  void TearDown() override {
    if (!kernels_.release.HasBeenNotified()) kernels_.release.Notify();
    executor_.reset();
    backend_.reset();
  }

  void Run(const TestJob& job, Outcome& outcome) {
    ASSERT_TRUE(
        executor_->Start(job.graph(), job.plan(), outcome.Callbacks()).ok());
  }

  void ExpectNothingHeld() {
    ExpectNoMemoryHeld(*backend_, *executor_);
    for (int d = 0; d < 2; ++d) {
      EXPECT_EQ(executor_->Load()[d].streams_busy, 0) << "device " << d;
    }
  }

  FaultKernels kernels_;
  std::unique_ptr<SimBackend> backend_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(ExecutorFaultTest, FaultOnASharedStreamFailsOnlyItsJob) {
  Make(/*max_streams_per_device=*/1);
  // Job A blocks the one stream of device 0, then fails on it.
  TestJob bad(1, {0});
  bad.Node("hold", "block", {}, 0);
  const NodeId boom = bad.Node("boom", "boom", {}, 0);
  const NodeId after = bad.Node("after", "spin", {}, 0);
  Outcome bad_outcome, good_outcome;
  Run(bad, bad_outcome);
  kernels_.started.WaitForNotification();
  // Job B's work queues on the same stream, behind A's failure.
  Run(Counter(0, 20), good_outcome);
  kernels_.release.Notify();
  ASSERT_TRUE(bad_outcome.Wait());
  ASSERT_TRUE(good_outcome.Wait());
  EXPECT_THAT(bad_outcome.status,
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("boom on device 0: bits fell out")));
  EXPECT_EQ(bad_outcome.failed_node, boom);
  EXPECT_GE(bad_outcome.IndexOf(after, NodeEventKind::kFailed), 0);
  ExpectCounter(good_outcome, 20);
  EXPECT_EQ(good_outcome.CountOf(NodeEventKind::kFailed), 0);
  EXPECT_EQ(executor_->Load()[0].streams_total, 0);  // retired after use
  ExpectNothingHeld();
  // The device keeps working.
  Outcome later;
  Run(Counter(0, 3), later);
  ASSERT_TRUE(later.Wait());
  ExpectCounter(later, 3);
}

TEST_F(ExecutorFaultTest, JobsTakingTurnsOnASharedStreamKeepTheirScopes) {
  // One stream per device and one node in flight per job: the two jobs
  // issue alternately onto the same stream, each switching its scope back.
  Make(/*max_streams_per_device=*/1, /*time_scale=*/0,
       /*max_in_flight_per_job=*/1);
  TestJob bad(1, {0});
  for (int i = 0; i < 10; ++i) {
    bad.Node("before" + std::to_string(i), "spin", {}, 0);
  }
  const NodeId boom = bad.Node("boom", "boom", {}, 0);
  for (int i = 0; i < 10; ++i) {
    bad.Node("after" + std::to_string(i), "spin", {}, 0);
  }
  Outcome bad_outcome, good_outcome;
  Run(bad, bad_outcome);
  Run(Counter(0, 40), good_outcome);
  ASSERT_TRUE(bad_outcome.Wait());
  ASSERT_TRUE(good_outcome.Wait());
  EXPECT_THAT(bad_outcome.status, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_EQ(bad_outcome.failed_node, boom);
  ExpectCounter(good_outcome, 40);
  EXPECT_EQ(good_outcome.CountOf(NodeEventKind::kFailed), 0);
  ExpectNothingHeld();
}

TEST_F(ExecutorFaultTest, KthLaunchFaultFailsItsJobAndSparesTheOthers) {
  // Launches on device 0 are counted in issue order; job A issues first.
  ASSERT_TRUE(
      backend_
          ->InjectLaunchFault({0, 3, absl::InternalError("injected ECC error")})
          .ok());
  TestJob a(1, {0});
  for (int i = 0; i < 5; ++i) a.Node("a" + std::to_string(i), "spin", {}, 0);
  Outcome a_outcome, b_outcome, c_outcome;
  Run(a, a_outcome);
  Run(Counter(1, 10), b_outcome);  // another device
  Run(Counter(0, 10), c_outcome);  // the same device, its own stream
  ASSERT_TRUE(a_outcome.Wait());
  ASSERT_TRUE(b_outcome.Wait());
  ASSERT_TRUE(c_outcome.Wait());
  EXPECT_THAT(
      a_outcome.status,
      StatusIs(
          absl::StatusCode::kInternal,
          HasSubstr("injected ECC error (launch 3 on device 0, op 'spin')")));
  EXPECT_EQ(a_outcome.failed_node, 2);
  EXPECT_EQ(a_outcome.CountOf(NodeEventKind::kFinished), 2);
  ExpectCounter(b_outcome, 10);
  ExpectCounter(c_outcome, 10);
  ExpectNothingHeld();
}

TEST_F(ExecutorFaultTest, LostDeviceFailsItsJobsAndSparesTheOthers) {
  TestJob a(1, {1});
  const NodeId hold = a.Node("hold", "block", {}, 0);
  const NodeId next = a.Node("next", "spin", {}, 0);
  Outcome a_outcome, b_outcome;
  Run(a, a_outcome);
  Run(Counter(0, 10), b_outcome);
  kernels_.started.WaitForNotification();
  ASSERT_TRUE(backend_->LoseDevice(1, "fell off the bus").ok());
  kernels_.release.Notify();
  ASSERT_TRUE(a_outcome.Wait());
  ASSERT_TRUE(b_outcome.Wait());
  EXPECT_THAT(
      a_outcome.status,
      StatusIs(
          absl::StatusCode::kUnavailable,
          HasSubstr(
              "device 1 (Weft Simulated GPU) was lost: fell off the bus")));
  // The loss is seen when "hold" completes: its report, and everything
  // after it, fail.
  EXPECT_EQ(a_outcome.failed_node, hold);
  EXPECT_GE(a_outcome.IndexOf(next, NodeEventKind::kFailed), 0);
  ExpectCounter(b_outcome, 10);
  // Afterwards: device 0 works, device 1 refuses at once.
  Outcome c_outcome, d_outcome;
  Run(Counter(0, 5), c_outcome);
  Run(Counter(1, 5), d_outcome);
  ASSERT_TRUE(c_outcome.Wait());
  ASSERT_TRUE(d_outcome.Wait());
  ExpectCounter(c_outcome, 5);
  EXPECT_THAT(d_outcome.status,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("was lost")));
  ExpectNoMemoryHeld(*backend_, *executor_);
}

TEST_F(ExecutorFaultTest, FailureSkipsDependentsOnOtherStreams) {
  // boom on stream 0 signals; the node waiting on it on stream 1 is skipped
  // and reported failed, not run.
  TestJob job(2, {0, 1});
  const int buf = job.Buffer("buf", 16, DType::kFloat32,
                             BufferSpec::Init::kZero, 0, "", true);
  const NodeId boom = job.Node("boom", "boom", {}, 0, {}, 0);
  const NodeId dependent =
      job.Node("dependent", "fill", {Use(buf, Access::kWrite), 1.0f}, 1, {0});
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.Wait());
  EXPECT_EQ(outcome.failed_node, boom);
  EXPECT_GE(outcome.IndexOf(dependent, NodeEventKind::kFailed), 0);
  EXPECT_EQ(outcome.IndexOf(dependent, NodeEventKind::kFinished), -1);
  ExpectNothingHeld();
}

TEST_F(ExecutorFaultTest, AtTheCapAJobFoldsOntoItsOwnStreams) {
  Make(/*max_streams_per_device=*/2);
  // Six independent chains on six logical streams of device 0, each adding
  // into its own counter.
  TestJob job(6, {0, 0, 0, 0, 0, 0});
  const int one =
      job.Buffer("one", 4, DType::kFloat32, BufferSpec::Init::kFill, 1);
  for (int s = 0; s < 6; ++s) {
    const int c = job.Buffer("c" + std::to_string(s), 4, DType::kFloat32,
                             BufferSpec::Init::kZero, 0, "", true);
    for (int i = 0; i <= s; ++i) {
      job.Node("n" + std::to_string(s) + "_" + std::to_string(i), "axpy",
               {1.0f, Use(one, Access::kRead), Use(c, Access::kReadWrite)}, s);
    }
  }
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  for (int s = 0; s < 6; ++s) {
    EXPECT_EQ(Floats(outcome.outputs.at("c" + std::to_string(s)))[0],
              static_cast<float>(s + 1));
  }
  EXPECT_LE(executor_->Load()[0].streams_total, 2);
  EXPECT_EQ(backend_->stream_count(), executor_->Load()[0].streams_total);
  ExpectNothingHeld();
}

}  // namespace
}  // namespace weft::runtime
