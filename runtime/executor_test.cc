#include "runtime/executor.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor_test_util.h"
#include "runtime/forwarding_backend.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using namespace ::weft::runtime::executor_testing;  // NOLINT: test helpers
using ::testing::AllOf;
using ::weft::testing::StatusIs;

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUpBackend(const CpuKernelTable* kernels = nullptr,
                    uint64_t memory_bytes = uint64_t{64} << 20) {
    SimBackend::Options options;
    options.num_devices = 2;
    options.memory_bytes = memory_bytes;
    options.host_to_device_gbps = std::numeric_limits<double>::infinity();
    options.device_to_host_gbps = std::numeric_limits<double>::infinity();
    options.device_to_device_gbps = std::numeric_limits<double>::infinity();
    options.kernels = kernels;
    executor_.reset();  // it uses the backend
    backend_ = SimBackend::Create(options).value();
    Executor::Options exec_options;
    exec_options.backend = backend_.get();
    exec_options.max_streams_per_device = 8;
    exec_options.max_in_flight_per_job = window_;
    executor_ = Executor::Create(exec_options).value();
  }

  void SetUp() override { SetUpBackend(); }

  void TearDown() override {
    executor_.reset();
    backend_.reset();
  }

  uint64_t Run(const TestJob& job, Outcome& outcome) {
    absl::StatusOr<uint64_t> id =
        executor_->Start(job.graph(), job.plan(), outcome.Callbacks());
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(0);
  }

  void ExpectNoMemoryInUse() { ExpectNoMemoryHeld(*backend_, *executor_); }

  int window_ = 4096;
  std::unique_ptr<SimBackend> backend_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(ExecutorTest, RunsVectorPipelineAcrossTwoDevices) {
  Outcome outcome;
  Run(VectorPipeline(2.0f), outcome);
  ASSERT_TRUE(outcome.Wait());
  ExpectPipelineResult(outcome, 2.0f);
  EXPECT_EQ(outcome.on_done_calls, 1);
  EXPECT_EQ(outcome.CountOf(NodeEventKind::kStarted), 3);
  EXPECT_EQ(outcome.CountOf(NodeEventKind::kFinished), 3);
  for (NodeId node = 0; node < 3; ++node) {
    EXPECT_LT(outcome.IndexOf(node, NodeEventKind::kStarted),
              outcome.IndexOf(node, NodeEventKind::kFinished));
  }
  ExpectNoMemoryInUse();
  std::vector<DeviceLoad> load = executor_->Load();
  ASSERT_EQ(load.size(), 2u);
  EXPECT_EQ(load[0].streams_busy, 0);
  EXPECT_EQ(load[0].streams_total, 1);
  // Its node stream and the stream its input went up on before the first
  // node.
  EXPECT_EQ(load[1].streams_total, 2);
}

TEST_F(ExecutorTest, ReadersOnOtherStreamsWaitForTheTransfer) {
  // Two readers of `src` on different streams of device 1 (readers do not
  // depend on each other); the first one triggers the upload, the second
  // must still see the data. Each copies it into its own output.
  TestJob job(2, {1, 1});
  const int src =
      job.Buffer("src", 4096, DType::kBytes, BufferSpec::Init::kFill, 7);
  const int a = job.Buffer("a", 4096, DType::kBytes, BufferSpec::Init::kZero, 0,
                           "", true);
  const int b = job.Buffer("b", 4096, DType::kBytes, BufferSpec::Init::kZero, 0,
                           "", true);
  job.Node("slow", "spin", {}, 0, {}, -1, 20000);
  job.Node("copy_a", "copy", {Use(src, Access::kRead), Use(a, Access::kWrite)},
           0);
  job.Node("copy_b", "copy", {Use(src, Access::kRead), Use(b, Access::kWrite)},
           1);
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.outputs.at("a"), std::string(4096, '\x07'));
  EXPECT_EQ(outcome.outputs.at("b"), std::string(4096, '\x07'));
}

TEST_F(ExecutorTest, ForkJoinOfSpinsRunsBranchesConcurrently) {
  // root -> four 40 ms branches on four streams over two devices -> join.
  TestJob job(4, {0, 0, 1, 1});
  const int shared = job.Buffer("shared", 256, DType::kBytes);
  const NodeId root =
      job.Node("root", "spin", {Use(shared, Access::kWrite)}, 0, {}, 0);
  std::vector<NodeId> branches;
  for (int s = 0; s < 4; ++s) {
    branches.push_back(job.Node(
        "branch" + std::to_string(s), "spin", {Use(shared, Access::kRead)}, s,
        s == 0 ? std::vector<int>{} : std::vector<int>{0}, s == 0 ? -1 : s,
        40000));
  }
  const NodeId join =
      job.Node("join", "spin", {Use(shared, Access::kWrite)}, 0, {1, 2, 3});
  Outcome outcome;
  const absl::Time start = absl::Now();
  Run(job, outcome);
  ASSERT_TRUE(outcome.Wait());
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_GE(took, absl::Milliseconds(40));
  EXPECT_LT(took, absl::Milliseconds(150));  // serial would be 160 ms
  for (NodeId branch : branches) {
    EXPECT_LT(outcome.IndexOf(root, NodeEventKind::kFinished),
              outcome.IndexOf(branch, NodeEventKind::kFinished));
    EXPECT_LT(outcome.IndexOf(branch, NodeEventKind::kFinished),
              outcome.IndexOf(join, NodeEventKind::kFinished));
  }
  ExpectNoMemoryInUse();
}

TEST_F(ExecutorTest, UnknownOpFailsItsJobOnly) {
  TestJob bad(1, {0});
  const int buf = bad.Buffer("buf", 64, DType::kFloat32);
  bad.Node("first", "spin", {Use(buf, Access::kWrite)}, 0, {}, -1, 5000);
  const NodeId broken =
      bad.Node("broken", "no_such_op", {Use(buf, Access::kReadWrite)}, 0);
  bad.Node("never", "spin", {Use(buf, Access::kRead)}, 0);

  Outcome bad_outcome, good_outcome;
  Run(bad, bad_outcome);
  Run(VectorPipeline(1.0f), good_outcome);
  ASSERT_TRUE(bad_outcome.Wait());
  ASSERT_TRUE(good_outcome.Wait());
  EXPECT_THAT(bad_outcome.status, StatusIs(absl::StatusCode::kUnimplemented,
                                           HasSubstr("'no_such_op'")));
  EXPECT_EQ(bad_outcome.failed_node, broken);
  EXPECT_TRUE(bad_outcome.outputs.empty());
  EXPECT_EQ(bad_outcome.IndexOf(2, NodeEventKind::kStarted), -1);
  EXPECT_GE(bad_outcome.IndexOf(broken, NodeEventKind::kFailed), 0);
  ExpectPipelineResult(good_outcome, 1.0f);
  ExpectNoMemoryInUse();
}

TEST(ExecutorFailureTest, KernelErrorFailsTheNodeAndRetiresItsStream) {
  CpuKernelTable kernels = CpuKernelTable::WithBuiltins();
  ASSERT_TRUE(kernels
                  .Register("boom",
                            [](absl::Span<const HostArg>) {
                              return absl::DataLossError("bits fell out");
                            })
                  .ok());
  SimBackend::Options options;
  options.num_devices = 2;
  options.kernels = &kernels;
  auto backend = SimBackend::Create(options).value();
  Executor::Options exec_options;
  exec_options.backend = backend.get();
  auto executor = Executor::Create(exec_options).value();

  TestJob bad(1, {1});
  const int buf = bad.Buffer("buf", 64, DType::kFloat32,
                             BufferSpec::Init::kZero, 0, "", true);
  bad.Node("warmup", "spin", {Use(buf, Access::kWrite)}, 0, {}, -1, 10000);
  const NodeId boom = bad.Node("boom", "boom", {Use(buf, Access::kWrite)}, 0);
  const NodeId after = bad.Node("after", "spin", {Use(buf, Access::kRead)}, 0);
  Outcome bad_outcome, good_outcome;
  ASSERT_TRUE(
      executor->Start(bad.graph(), bad.plan(), bad_outcome.Callbacks()).ok());
  TestJob good = VectorPipeline(4.0f);
  ASSERT_TRUE(
      executor->Start(good.graph(), good.plan(), good_outcome.Callbacks())
          .ok());
  ASSERT_TRUE(bad_outcome.Wait());
  ASSERT_TRUE(good_outcome.Wait());
  EXPECT_THAT(bad_outcome.status, StatusIs(absl::StatusCode::kDataLoss,
                                           HasSubstr("bits fell out")));
  EXPECT_EQ(bad_outcome.failed_node, boom);
  EXPECT_GE(bad_outcome.IndexOf(boom, NodeEventKind::kFailed), 0);
  // Work queued behind the failure on the same stream is reported failed.
  EXPECT_GE(bad_outcome.IndexOf(after, NodeEventKind::kFailed), 0);
  ExpectPipelineResult(good_outcome, 4.0f);
  ExpectNoMemoryHeld(*backend, *executor);
  // The failed stream was destroyed instead of going back to the pool.
  std::vector<DeviceLoad> load = executor->Load();
  EXPECT_EQ(load[0].streams_busy + load[1].streams_busy, 0);
  // The good job's device-1 stream and its upload stream.
  EXPECT_EQ(load[1].streams_total, 2);
  EXPECT_EQ(backend->stream_count(), 3);
}

TEST_F(ExecutorTest, CancelMidRunReportsCancelledAndFreesEverything) {
  window_ = 2;
  SetUpBackend();
  TestJob job(1, {0});
  const int buf = job.Buffer("buf", 1 << 16, DType::kFloat32,
                             BufferSpec::Init::kFill, 1, "", true);
  for (int i = 0; i < 20; ++i) {
    job.Node("step" + std::to_string(i), "spin", {Use(buf, Access::kReadWrite)},
             0, {}, -1, 20000);
  }
  absl::Notification first_finished;
  Outcome outcome;
  JobCallbacks callbacks = outcome.Callbacks();
  auto record = callbacks.on_node;
  callbacks.on_node = [&, record](NodeId node, NodeEventKind kind,
                                  const absl::Status& s) {
    record(node, kind, s);
    if (node == 0 && kind == NodeEventKind::kFinished) first_finished.Notify();
  };
  const absl::Time start = absl::Now();
  uint64_t id = executor_->Start(job.graph(), job.plan(), callbacks).value();
  first_finished.WaitForNotification();
  EXPECT_GT(backend_->memory_used_bytes(0), 0u);
  executor_->Cancel(id);
  ASSERT_TRUE(outcome.Wait());
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(300));  // 400 ms of work
  EXPECT_THAT(outcome.status,
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  EXPECT_EQ(outcome.failed_node, -1);
  EXPECT_TRUE(outcome.outputs.empty());
  EXPECT_LT(outcome.CountOf(NodeEventKind::kFinished), 20);
  ExpectNoMemoryInUse();
  EXPECT_EQ(executor_->Load()[0].streams_busy, 0);
  executor_->Cancel(id);  // finished: no-op
  executor_->Cancel(12345);
  EXPECT_EQ(outcome.on_done_calls, 1);
}

// With a wide window the whole chain is issued at once; cancelling must
// withdraw the queued work rather than let it drain, and leave the streams
// healthy for the next job.
TEST_F(ExecutorTest, CancelWithdrawsIssuedWorkAndKeepsStreamsUsable) {
  TestJob job(1, {0});
  const int buf = job.Buffer("buf", 1 << 10, DType::kFloat32,
                             BufferSpec::Init::kFill, 1, "", true);
  for (int i = 0; i < 50; ++i) {
    job.Node("step" + std::to_string(i), "spin", {Use(buf, Access::kReadWrite)},
             0, {}, -1, 50000);
  }
  absl::Notification first_finished;
  Outcome outcome;
  JobCallbacks callbacks = outcome.Callbacks();
  auto record = callbacks.on_node;
  callbacks.on_node = [&, record](NodeId node, NodeEventKind kind,
                                  const absl::Status& s) {
    record(node, kind, s);
    if (node == 0 && kind == NodeEventKind::kFinished) first_finished.Notify();
  };
  uint64_t id = executor_->Start(job.graph(), job.plan(), callbacks).value();
  first_finished.WaitForNotification();
  const absl::Time cancelled_at = absl::Now();
  executor_->Cancel(id);
  ASSERT_TRUE(outcome.Wait());
  // 2.5 s of work was queued; at most the running spin (50 ms) finishes.
  EXPECT_LT(absl::Now() - cancelled_at, absl::Milliseconds(500));
  EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_LT(outcome.CountOf(NodeEventKind::kFinished), 5);
  EXPECT_EQ(outcome.CountOf(NodeEventKind::kFailed), 0);
  ExpectNoMemoryInUse();

  // The streams the cancelled job used serve the next job normally.
  TestJob next(1, {0});
  const int y = next.Buffer("y", 16, DType::kFloat32, BufferSpec::Init::kFill,
                            2, "", true);
  next.Node("scale", "scale",
            {scheduler::Arg(3.0f), Use(y, Access::kReadWrite)}, 0);
  Outcome next_outcome;
  Run(next, next_outcome);
  ASSERT_TRUE(next_outcome.Wait());
  EXPECT_TRUE(next_outcome.status.ok()) << next_outcome.status;
}

TEST_F(ExecutorTest, ManyConcurrentJobsAllFinish) {
  constexpr int kJobs = 50;
  std::vector<std::unique_ptr<Outcome>> outcomes;
  for (int j = 0; j < kJobs; ++j) {
    outcomes.push_back(std::make_unique<Outcome>());
    Run(VectorPipeline(static_cast<float>(j), 256), *outcomes.back());
  }
  for (int j = 0; j < kJobs; ++j) {
    ASSERT_TRUE(outcomes[j]->Wait()) << "job " << j;
    ExpectPipelineResult(*outcomes[j], static_cast<float>(j), 256);
    EXPECT_EQ(outcomes[j]->on_done_calls, 1);
  }
  ExpectNoMemoryInUse();
  for (const DeviceLoad& load : executor_->Load()) {
    EXPECT_EQ(load.streams_busy, 0);
    EXPECT_LE(load.streams_total, 8);  // the cap
  }
}

// With no turn running, Start's caller issues the job's first nodes itself
// (no hop to the scheduling thread before the first work reaches a
// device); a job started from a job callback, inside a turn, is posted.
TEST_F(ExecutorTest, StartBeginsTheJobOnTheCallerWhenIdle) {
  const std::thread::id caller = std::this_thread::get_id();
  absl::Mutex mu;
  std::vector<std::thread::id> first_started;  // per job
  std::vector<std::unique_ptr<Outcome>> outcomes;
  auto callbacks = [&](Outcome& outcome, int job) {
    JobCallbacks c = outcome.Callbacks();
    auto inner = std::move(c.on_node);
    c.on_node = [&, job, inner = std::move(inner)](
                    NodeId node, NodeEventKind kind, const absl::Status& s) {
      if (kind == NodeEventKind::kStarted) {
        absl::MutexLock lock(&mu);
        if (first_started[job] == std::thread::id()) {
          first_started[job] = std::this_thread::get_id();
        }
      }
      inner(node, kind, s);
    };
    return c;
  };
  for (int j = 0; j < 2; ++j) {
    outcomes.push_back(std::make_unique<Outcome>());
    first_started.emplace_back();
  }
  const TestJob first = VectorPipeline(1.0f);
  const TestJob second = VectorPipeline(2.0f);
  JobCallbacks c0 = callbacks(*outcomes[0], 0);
  // The first job's end starts the second, from inside the turn.
  auto done0 = std::move(c0.on_done);
  absl::Notification second_started;
  c0.on_done = [&, done0 = std::move(done0)](absl::Status s, NodeId node,
                                             HostBuffers out) {
    EXPECT_TRUE(
        executor_
            ->Start(second.graph(), second.plan(), callbacks(*outcomes[1], 1))
            .ok());
    second_started.Notify();
    done0(std::move(s), node, std::move(out));
  };
  ASSERT_TRUE(
      executor_->Start(first.graph(), first.plan(), std::move(c0)).ok());
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(first_started[0], caller);
  }
  ASSERT_TRUE(outcomes[0]->Wait());
  ASSERT_TRUE(outcomes[1]->Wait());
  ExpectPipelineResult(*outcomes[0], 1.0f);
  ExpectPipelineResult(*outcomes[1], 2.0f);
  absl::MutexLock lock(&mu);
  EXPECT_NE(first_started[1], caller);
  EXPECT_NE(first_started[1], std::thread::id());
}

// The name the calling thread was given (pthread_setname_np).
std::string ThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

TEST_F(ExecutorTest, CompletionsAreHandledByTheThreadsThatReportThem) {
  // A chain on one stream whose nodes run 5 ms each (paced): every
  // completion arrives while no turn runs, and the simulator's worker that
  // reports it handles it at once, without handing it to the scheduling
  // thread.
  TestJob job(1);
  const int x = job.Buffer("x", 256, DType::kFloat32, BufferSpec::Init::kZero,
                           0, "", /*output=*/true);
  for (int i = 0; i < 4; ++i) {
    job.Node("n" + std::to_string(i), "spin", {Use(x, Access::kReadWrite)}, 0,
             {}, -1, 5000);
  }
  absl::Mutex mu;
  std::vector<std::string> finished_on;  // by node, in completion order
  std::string done_on;
  Outcome outcome;
  JobCallbacks callbacks = outcome.Callbacks();
  auto on_node = std::move(callbacks.on_node);
  callbacks.on_node = [&, on_node = std::move(on_node)](NodeId node,
                                                        NodeEventKind kind,
                                                        const absl::Status& s) {
    if (kind == NodeEventKind::kFinished) {
      absl::MutexLock lock(&mu);
      finished_on.push_back(ThreadName());
    }
    on_node(node, kind, s);
  };
  auto on_done = std::move(callbacks.on_done);
  callbacks.on_done = [&, on_done = std::move(on_done)](
                          absl::Status s, NodeId node, HostBuffers out) {
    {
      absl::MutexLock lock(&mu);
      done_on = ThreadName();
    }
    on_done(std::move(s), node, std::move(out));
  };
  ASSERT_TRUE(
      executor_->Start(job.graph(), job.plan(), std::move(callbacks)).ok());
  ASSERT_TRUE(outcome.Wait());
  EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  absl::MutexLock lock(&mu);
  ASSERT_EQ(finished_on.size(), 4u);
  for (const std::string& name : finished_on) EXPECT_NE(name, "weft-scheduler");
  EXPECT_NE(done_on, "weft-scheduler");
  EXPECT_FALSE(done_on.empty());
}

TEST_F(ExecutorTest, LongChainBeyondTheWindow) {
  // More nodes than the in-flight window, alternating devices, each adding
  // one to a counter.
  TestJob job(2, {0, 1});
  const int counter = job.Buffer("counter", 4, DType::kFloat32,
                                 BufferSpec::Init::kZero, 0, "", true);
  const int one =
      job.Buffer("one", 4, DType::kFloat32, BufferSpec::Init::kFill, 1);
  constexpr int kNodes = 5000;
  for (int i = 0; i < kNodes; ++i) {
    const int stream = (i / 1000) % 2;  // switch device every 1000 nodes
    const bool switches = i > 0 && i % 1000 == 0;
    const bool next_switches = (i + 1) % 1000 == 0;
    job.Node("add" + std::to_string(i), "axpy",
             {1.0f, Use(one, Access::kRead), Use(counter, Access::kReadWrite)},
             stream, switches ? std::vector<int>{0} : std::vector<int>{},
             next_switches ? 0 : -1);
  }
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(Floats(outcome.outputs.at("counter"))[0],
            static_cast<float>(kNodes));
  EXPECT_EQ(outcome.CountOf(NodeEventKind::kFinished), kNodes);
}

TEST_F(ExecutorTest, UntouchedOutputKeepsItsInitialContents) {
  TestJob job(1, {0});
  job.Buffer("ints", 12, DType::kInt32, BufferSpec::Init::kFill, 42, "", true);
  job.Buffer("raw", 6, DType::kBytes, BufferSpec::Init::kData, 0, "abc", true);
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  std::vector<int32_t> ints(3);
  std::memcpy(ints.data(), outcome.outputs.at("ints").data(), 12);
  EXPECT_THAT(ints, ::testing::ElementsAre(42, 42, 42));
  EXPECT_EQ(outcome.outputs.at("raw"), std::string("abc\0\0\0", 6));
}

TEST_F(ExecutorTest, OutputsHoldOnlyTheirDataOnTheHost) {
  // 16 MiB outputs that kernels touch without writing contents (spins), or
  // that nothing touches: the host stores their data, not their zeros.
  constexpr uint64_t kBytes = uint64_t{16} << 20;
  TestJob job(1, {0});
  const int zeros = job.Buffer("zeros", kBytes, DType::kBytes,
                               BufferSpec::Init::kZero, 0, "", true);
  const int head = job.Buffer("head", kBytes, DType::kBytes,
                              BufferSpec::Init::kData, 0, "abc", true);
  job.Buffer("untouched", kBytes, DType::kBytes, BufferSpec::Init::kData, 0,
             "xyz", true);
  job.Node("a", "spin", {Use(zeros, Access::kReadWrite)}, 0);
  job.Node("b", "spin", {Use(head, Access::kReadWrite)}, 0);
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  const HostBuffers& out = outcome.host_outputs;
  ASSERT_EQ(out.size(), 3u);
  for (const auto& [name, buffer] : out) EXPECT_EQ(buffer.size(), kBytes);
  EXPECT_EQ(out.at("zeros").stored_bytes(), 0u);
  EXPECT_EQ(out.at("head").stored_bytes(), 3u);
  EXPECT_EQ(out.at("untouched").stored_bytes(), 3u);
  // Read in full, they are what a dense download gives.
  EXPECT_EQ(outcome.outputs.at("zeros"), std::string(kBytes, '\0'));
  EXPECT_EQ(outcome.outputs.at("head"), "abc" + std::string(kBytes - 3, '\0'));
  EXPECT_EQ(outcome.outputs.at("untouched"),
            "xyz" + std::string(kBytes - 3, '\0'));
}

TEST_F(ExecutorTest, OutOfMemoryFailsTheJob) {
  SetUpBackend(nullptr, /*memory_bytes=*/1 << 20);
  TestJob job(1, {0});
  const int big = job.Buffer("big", 2 << 20, DType::kBytes);
  job.Node("touch", "spin", {Use(big, Access::kWrite)}, 0);
  Outcome outcome;
  Run(job, outcome);
  ASSERT_TRUE(outcome.Wait());
  EXPECT_THAT(outcome.status,
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("buffer 'big'"),
                             HasSubstr("requested 2097152 bytes"))));
  EXPECT_EQ(outcome.failed_node, -1);
  ExpectNoMemoryInUse();
}

TEST_F(ExecutorTest, StartRejectsBadPlans) {
  TestJob job(1, {0});
  job.Node("a", "spin", {}, 0);
  auto plan = std::make_shared<Plan>(*job.plan());
  plan->nodes[0].device = 1;  // stream 0 is on device 0
  Outcome outcome;
  absl::StatusOr<uint64_t> id =
      executor_->Start(job.graph(), plan, outcome.Callbacks());
  EXPECT_THAT(id.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("its stream 0 is on device 0")));
  JobCallbacks no_done;
  EXPECT_THAT(executor_->Start(job.graph(), job.plan(), no_done).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Checked for a machine of another size.
  absl::StatusOr<CheckedPlan> checked =
      CheckPlan(job.graph(), job.plan(), executor_->device_count() + 1);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_THAT(
      executor_->Start(*std::move(checked), outcome.Callbacks(), JobOptions{})
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("checked for 3 devices; the executor has 2")));
}

TEST_F(ExecutorTest, StartsAPlanCheckedBeforehand) {
  const TestJob job = VectorPipeline(3.0f);
  const auto plan = job.plan();
  absl::StatusOr<CheckedPlan> checked =
      CheckPlan(job.graph(), plan, executor_->device_count());
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->plan(), plan);
  Outcome outcome;
  ASSERT_TRUE(
      executor_->Start(*std::move(checked), outcome.Callbacks(), JobOptions{})
          .ok());
  ASSERT_TRUE(outcome.Wait());
  ExpectPipelineResult(outcome, 3.0f);
}

TEST_F(ExecutorTest, DestroyingTheExecutorCancelsRunningJobs) {
  window_ = 2;
  SetUpBackend();
  TestJob job(1, {0});
  for (int i = 0; i < 50; ++i) {
    job.Node("n" + std::to_string(i), "spin", {}, 0, {}, -1, 20000);
  }
  Outcome outcome;
  Run(job, outcome);
  executor_.reset();
  ASSERT_TRUE(outcome.done.HasBeenNotified());
  EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(outcome.on_done_calls, 1);
}

TEST(ExecutorCreateTest, RejectsBadOptions) {
  Executor::Options options;
  auto executor = Executor::Create(options);
  EXPECT_THAT(executor.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("backend")));
}

TEST_F(ExecutorTest, CopyBetweenDevicesJoinsItsPeerStream) {
  // Stream 0 on device 1, stream 1 on device 0. produce (slow) and later
  // `after` run on stream 1; move, on stream 0, copies src to device 1
  // holding stream 1 as its peer stream. With no plan event at all, move
  // still runs after produce, and `after`, which reads what move wrote,
  // after move.
  TestJob job(2, {1, 0});
  const int src =
      job.Buffer("src", 4096, DType::kBytes, BufferSpec::Init::kFill, 7);
  const int dst = job.Buffer("dst", 4096, DType::kBytes,
                             BufferSpec::Init::kZero, 0, "", true);
  const int back = job.Buffer("back", 4096, DType::kBytes,
                              BufferSpec::Init::kZero, 0, "", true);
  const NodeId produce = job.Node(
      "produce", "spin", {Use(src, Access::kReadWrite)}, 1, {}, -1, 20000);
  const NodeId move = job.Node(
      "move", "copy", {Use(src, Access::kRead), Use(dst, Access::kWrite)}, 0,
      {}, -1, 20000);
  const NodeId after = job.Node(
      "after", "copy", {Use(dst, Access::kRead), Use(back, Access::kWrite)}, 1);
  auto plan = std::make_shared<Plan>(*job.plan());
  plan->nodes[1].peer_stream = 1;
  Outcome outcome;
  ASSERT_TRUE(executor_->Start(job.graph(), plan, outcome.Callbacks()).ok());
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(outcome.outputs.at("dst"), std::string(4096, '\x07'));
  EXPECT_EQ(outcome.outputs.at("back"), std::string(4096, '\x07'));
  EXPECT_LT(outcome.IndexOf(produce, NodeEventKind::kFinished),
            outcome.IndexOf(move, NodeEventKind::kFinished));
  EXPECT_LT(outcome.IndexOf(move, NodeEventKind::kFinished),
            outcome.IndexOf(after, NodeEventKind::kFinished));
  ExpectNoMemoryInUse();
}

TEST_F(ExecutorTest, StartRejectsAPeerStreamOnTheNodesDevice) {
  TestJob job(2, {0, 0});
  job.Node("a", "spin", {}, 0);
  auto plan = std::make_shared<Plan>(*job.plan());
  plan->nodes[0].peer_stream = 1;  // device 0, like the node
  Outcome outcome;
  absl::StatusOr<uint64_t> id =
      executor_->Start(job.graph(), plan, outcome.Callbacks());
  EXPECT_THAT(
      id.status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("peer stream 1 is not a stream of another device")));
  plan->nodes[0].peer_stream = 5;
  id = executor_->Start(job.graph(), plan, outcome.Callbacks());
  EXPECT_THAT(id.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("peer stream 5")));
}

// Records the order in which the executor issues launches and uploads.
class IssueOrderBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status CopyHostToDevice(DevicePtr dst, const void* src, uint64_t bytes,
                                StreamHandle stream) override {
    Note("upload");
    return wrapped()->CopyHostToDevice(dst, src, bytes, stream);
  }
  absl::Status CopyHostToDevicePadded(DevicePtr dst, const void* src,
                                      uint64_t src_bytes, uint64_t bytes,
                                      StreamHandle stream) override {
    Note("upload");
    return wrapped()->CopyHostToDevicePadded(dst, src, src_bytes, bytes,
                                             stream);
  }
  absl::Status Launch(const KernelLaunch& launch,
                      StreamHandle stream) override {
    Note(launch.op);
    return wrapped()->Launch(launch, stream);
  }
  std::vector<std::string> order() {
    absl::MutexLock lock(&mu_);
    return order_;
  }

 private:
  void Note(std::string what) {
    absl::MutexLock lock(&mu_);
    order_.push_back(std::move(what));
  }
  absl::Mutex mu_;
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
};

// Runs `spins` spin nodes and then a copy of a buffer with initial data;
// the order in which the backend saw launches and uploads.
std::vector<std::string> IssueOrderOf(int spins) {
  SimBackend::Options options;
  options.num_devices = 1;
  std::unique_ptr<SimBackend> sim = SimBackend::Create(options).value();
  IssueOrderBackend backend(sim.get());
  Executor::Options exec_options;
  exec_options.backend = &backend;
  std::unique_ptr<Executor> executor = Executor::Create(exec_options).value();
  TestJob job(1);
  const int x =
      job.Buffer("x", 4 * sizeof(float), DType::kFloat32,
                 BufferSpec::Init::kData, 0, FloatBytes({1, 2, 3, 4}));
  const int y = job.Buffer("y", 4 * sizeof(float), DType::kFloat32,
                           BufferSpec::Init::kZero, 0, "", true);
  for (int i = 0; i < spins; ++i) {
    job.Node("spin" + std::to_string(i), "spin", {}, 0, {}, -1, 1);
  }
  job.Node("copy", "copy", {Use(x, Access::kRead), Use(y, Access::kWrite)}, 0);
  Outcome outcome;
  EXPECT_TRUE(
      executor->Start(job.graph(), job.plan(), outcome.Callbacks()).ok());
  EXPECT_TRUE(outcome.Wait());
  EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(Floats(outcome.outputs.at("y")), std::vector<float>({1, 2, 3, 4}));
  executor.reset();
  // Without y's zero fill (a "fill" launch) before the copy.
  std::vector<std::string> order = backend.order();
  order.erase(std::remove(order.begin(), order.end(), "fill"), order.end());
  return order;
}

TEST(ExecutorIssueOrderTest, NodesReadingNoInitialDataGoBeforeTheUploads) {
  // The node that reads x goes first: its upload is issued before it.
  EXPECT_THAT(IssueOrderOf(0), ::testing::ElementsAre("upload", "copy"));
  // Nodes that read no initial data start without waiting for the host to
  // issue the uploads; the upload goes just before its reader.
  EXPECT_THAT(IssueOrderOf(3),
              ::testing::ElementsAre("spin", "spin", "spin", "upload", "copy"));
  // But no more than Job::kNodesBeforeUploads (16) of them go first.
  std::vector<std::string> order = IssueOrderOf(20);
  ASSERT_EQ(order.size(), 22u);
  EXPECT_EQ(std::count(order.begin(), order.begin() + 16, "spin"), 16);
  EXPECT_EQ(order[16], "upload");
  EXPECT_EQ(order.back(), "copy");
}

}  // namespace
}  // namespace weft::runtime
