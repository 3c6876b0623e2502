// The executor's use of its per-device memory pools: no device allocation
// per job once warmed up, out-of-memory failing only the job at fault.
#include <atomic>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/forwarding_backend.h"
#include "runtime/memory_pool.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using namespace ::weft::runtime::executor_testing;  // NOLINT: test helpers
using ::testing::AllOf;
using ::weft::testing::StatusIs;

// Counts the allocations and frees that reach the simulator; when armed,
// refuses the fail_callback_at-th host callback.
class AllocCountingBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status AddHostCallback(StreamHandle stream,
                               HostCallback callback) override {
    if (++callbacks == fail_callback_at.load()) {
      return absl::InternalError("callback queue full");
    }
    return wrapped()->AddHostCallback(stream, std::move(callback));
  }
  std::atomic<int> callbacks{0};
  std::atomic<int> fail_callback_at{0};
  absl::StatusOr<DevicePtr> Allocate(int device, uint64_t bytes) override {
    ++allocations;
    return wrapped()->Allocate(device, bytes);
  }
  absl::Status Free(DevicePtr ptr) override {
    ++frees;
    return wrapped()->Free(ptr);
  }
  std::atomic<int> allocations{0};
  std::atomic<int> frees{0};
};

class ExecutorMemoryTest : public ::testing::Test {
 protected:
  void Make(uint64_t memory_bytes,
            uint64_t max_cached = MemoryPool::kUnlimited) {
    executor_.reset();
    counting_.reset();
    SimBackend::Options options;
    options.num_devices = 2;
    options.memory_bytes = memory_bytes;
    sim_ = SimBackend::Create(options).value();
    counting_ = std::make_unique<AllocCountingBackend>(sim_.get());
    Executor::Options exec;
    exec.backend = counting_.get();
    exec.memory_pool_max_cached_bytes = max_cached;
    executor_ = Executor::Create(exec).value();
  }
  void SetUp() override { Make(uint64_t{64} << 20); }
  void TearDown() override {
    executor_.reset();
    counting_.reset();
    sim_.reset();
  }

  void Start(const TestJob& job, Outcome& outcome) {
    ASSERT_TRUE(
        executor_->Start(job.graph(), job.plan(), outcome.Callbacks()).ok());
  }

  MemoryPoolStats Stats(int device) { return executor_->Load()[device].memory; }

  // One buffer of `bytes` written by a node on device 0.
  static TestJob Touch(const std::string& buffer, uint64_t bytes) {
    TestJob job(1, {0});
    const int b = job.Buffer(buffer, bytes, DType::kBytes);
    job.Node("touch", "spin", {Use(b, Access::kWrite)}, 0);
    return job;
  }

  std::unique_ptr<SimBackend> sim_;
  std::unique_ptr<AllocCountingBackend> counting_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(ExecutorMemoryTest, WarmJobsOfAKnownShapeAllocateNothing) {
  {
    Outcome warmup;
    Start(VectorPipeline(1.0f), warmup);
    ASSERT_TRUE(warmup.Wait());
    ExpectPipelineResult(warmup, 1.0f);
  }
  const int warm_allocations = counting_->allocations.load();
  // x on both devices, y on both, sum on device 0.
  EXPECT_EQ(warm_allocations, 5);
  const MemoryPoolStats warm0 = Stats(0);
  const MemoryPoolStats warm1 = Stats(1);
  constexpr int kJobs = 20;
  for (int i = 0; i < kJobs; ++i) {
    Outcome outcome;
    Start(VectorPipeline(static_cast<float>(i)), outcome);
    ASSERT_TRUE(outcome.Wait());
    ExpectPipelineResult(outcome, static_cast<float>(i));
  }
  EXPECT_EQ(counting_->allocations.load(), warm_allocations);
  EXPECT_EQ(counting_->frees.load(), 0);
  const MemoryPoolStats now0 = Stats(0);
  const MemoryPoolStats now1 = Stats(1);
  EXPECT_EQ(now0.backend_allocations, warm0.backend_allocations);
  EXPECT_EQ(now1.backend_allocations, warm1.backend_allocations);
  EXPECT_EQ(now0.cache_hits - warm0.cache_hits, 3u * kJobs);
  EXPECT_EQ(now1.cache_hits - warm1.cache_hits, 2u * kJobs);
  ExpectNoMemoryHeld(*sim_, *executor_);
  EXPECT_GT(now0.cached_bytes, 0u);
}

// Spins never touch contents, so their buffers get no host memory on the
// simulator, however large: zero and zero-fill initializations, the spins
// and the copies between devices all leave it without contents.
TEST_F(ExecutorMemoryTest, SpinsOnLargeBuffersTakeNoHostMemory) {
  Make(uint64_t{2} << 30);
  constexpr uint64_t kBig = uint64_t{256} << 20;
  TestJob job(2, {0, 1});
  const int a = job.Buffer("a", kBig, DType::kFloat32);
  const int b =
      job.Buffer("b", kBig, DType::kFloat32, BufferSpec::Init::kFill, 0.0);
  const int c = job.Buffer("c", kBig, DType::kFloat32);
  job.Node("first", "spin", {Use(a, Access::kRead), Use(b, Access::kWrite)}, 0,
           {}, 0, 10);
  job.Node("second", "spin", {Use(b, Access::kRead), Use(c, Access::kWrite)}, 1,
           {0}, 1, 10);
  job.Node("third", "spin", {Use(c, Access::kRead), Use(a, Access::kWrite)}, 0,
           {1}, -1, 10);
  Outcome outcome;
  Start(job, outcome);
  ASSERT_TRUE(outcome.Wait());
  ASSERT_TRUE(outcome.status.ok()) << outcome.status;
  // a, b and c on device 0, b and c on device 1, accounted by size.
  EXPECT_EQ(sim_->memory_used_bytes(0), 3 * kBig);
  EXPECT_EQ(sim_->memory_used_bytes(1), 2 * kBig);
  EXPECT_EQ(sim_->materialized_bytes(0), 0u);
  EXPECT_EQ(sim_->materialized_bytes(1), 0u);

  // Real ops on the same backend still compute right, and only their
  // buffers get host memory.
  Outcome pipeline;
  Start(VectorPipeline(1.5f), pipeline);
  ASSERT_TRUE(pipeline.Wait());
  ExpectPipelineResult(pipeline, 1.5f);
  EXPECT_GT(sim_->materialized_bytes(0), 0u);
  EXPECT_LT(sim_->materialized_bytes(0) + sim_->materialized_bytes(1),
            uint64_t{1} << 20);
}

// A buffer's initial data is uploaded with a zero tail: on the simulator
// only the data takes host memory, however large the buffer, whether the
// job runs node by node or as device graphs.
TEST_F(ExecutorMemoryTest, InitialDataTakesHostMemoryForTheDataOnly) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  Make(3 * kGiB);
  TestJob job(2, {0, 1});
  const int big =
      job.Buffer("big", kGiB, DType::kBytes, BufferSpec::Init::kData, 0, "x");
  const int out = job.Buffer("out", 16, DType::kBytes, BufferSpec::Init::kData,
                             0, "result", /*output=*/true);
  job.Node("here", "spin", {Use(big, Access::kRead)}, 0, {}, 0, 10);
  job.Node("there", "spin", {Use(big, Access::kRead), Use(out, Access::kRead)},
           1, {0}, -1, 10);
  for (LaunchMode mode : {LaunchMode::kStreams, LaunchMode::kDeviceGraphs}) {
    SCOPED_TRACE(static_cast<int>(mode));
    Outcome outcome;
    JobOptions options;
    options.launch_mode = mode;
    ASSERT_TRUE(
        executor_->Start(job.graph(), job.plan(), outcome.Callbacks(), options)
            .ok());
    ASSERT_TRUE(outcome.Wait());
    ASSERT_TRUE(outcome.status.ok()) << outcome.status;
    EXPECT_EQ(outcome.outputs.at("out"), "result" + std::string(10, '\0'));
    EXPECT_EQ(sim_->memory_used_bytes(0), kGiB + 0);  // cached, by size
    // "x" on device 0, copied to device 1, and "result" there.
    EXPECT_EQ(sim_->materialized_bytes(0), 1u);
    EXPECT_EQ(sim_->materialized_bytes(1), 1u + 6u);
  }
}

TEST_F(ExecutorMemoryTest, WithoutCachingEveryJobAllocates) {
  Make(uint64_t{64} << 20, /*max_cached=*/0);
  for (int i = 0; i < 3; ++i) {
    Outcome outcome;
    Start(VectorPipeline(2.0f), outcome);
    ASSERT_TRUE(outcome.Wait());
    ExpectPipelineResult(outcome, 2.0f);
  }
  EXPECT_EQ(counting_->allocations.load(), 15);
  EXPECT_EQ(counting_->frees.load(), 15);
  for (int d = 0; d < 2; ++d) EXPECT_EQ(sim_->memory_used_bytes(d), 0u);
}

TEST_F(ExecutorMemoryTest, OutOfMemoryFailsOnlyThatJob) {
  Make(uint64_t{1} << 20);
  // A job that holds device 0 busy with a buffer, running while the
  // oversized job fails.
  TestJob good(1, {0});
  const int buf = good.Buffer("small", 4096, DType::kFloat32,
                              BufferSpec::Init::kFill, 1, "", true);
  good.Node("slow", "spin", {Use(buf, Access::kReadWrite)}, 0, {}, -1, 20000);
  Outcome good_outcome, bad_outcome, after_outcome;
  Start(good, good_outcome);
  Start(Touch("big", 2 << 20), bad_outcome);
  ASSERT_TRUE(bad_outcome.Wait());
  EXPECT_THAT(
      bad_outcome.status,
      StatusIs(
          absl::StatusCode::kResourceExhausted,
          AllOf(HasSubstr(
                    "buffer 'big' (first used by node 'touch' on device 0): "
                    "device 0 is out of memory: requested 2097152 bytes"),
                HasSubstr("4096 bytes in use by jobs"))));
  EXPECT_EQ(bad_outcome.failed_node, -1);
  ASSERT_TRUE(good_outcome.Wait());
  ASSERT_TRUE(good_outcome.status.ok()) << good_outcome.status;
  EXPECT_EQ(Floats(good_outcome.outputs.at("small"))[0], 1.0f);
  Start(VectorPipeline(3.0f), after_outcome);
  ASSERT_TRUE(after_outcome.Wait());
  ExpectPipelineResult(after_outcome, 3.0f);
  EXPECT_EQ(Stats(0).failures, 1u);
  ExpectNoMemoryHeld(*sim_, *executor_);
}

TEST_F(ExecutorMemoryTest, CachedBlocksMakeRoomForOtherSizes) {
  Make(uint64_t{1} << 20);
  Outcome first, second;
  Start(Touch("a", 600 << 10), first);
  ASSERT_TRUE(first.Wait());
  ASSERT_TRUE(first.status.ok()) << first.status;
  EXPECT_EQ(Stats(0).cached_bytes, 600u << 10);
  // 700 KiB does not fit beside the cached 600 KiB: the cache is released
  // and the allocation retried.
  Start(Touch("b", 700 << 10), second);
  ASSERT_TRUE(second.Wait());
  ASSERT_TRUE(second.status.ok()) << second.status;
  const MemoryPoolStats s = Stats(0);
  EXPECT_EQ(s.oom_releases, 1u);
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(s.cached_bytes, 700u << 10);
  ExpectNoMemoryHeld(*sim_, *executor_);
}

TEST_F(ExecutorMemoryTest, MemoryOfAJobThatCouldNotFenceIsNotReused) {
  // The node's completion callback is the first, the drain fence the
  // second: without a fence the job cannot know its work has finished, so
  // its block goes back to the device instead of the cache.
  counting_->fail_callback_at = 2;
  Outcome outcome;
  Start(Touch("buf", 4096), outcome);
  ASSERT_TRUE(outcome.Wait());
  EXPECT_THAT(outcome.status, StatusIs(absl::StatusCode::kInternal,
                                       HasSubstr("callback queue full")));
  const MemoryPoolStats s = Stats(0);
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.backend_frees, 1u);
  EXPECT_EQ(counting_->frees.load(), 1);
  EXPECT_EQ(sim_->memory_used_bytes(0), 0u);
}

TEST_F(ExecutorMemoryTest, DestroyingTheExecutorReturnsTheCache) {
  Outcome outcome;
  Start(VectorPipeline(1.0f), outcome);
  ASSERT_TRUE(outcome.Wait());
  EXPECT_GT(sim_->memory_used_bytes(0), 0u);
  executor_.reset();
  for (int d = 0; d < 2; ++d) EXPECT_EQ(sim_->memory_used_bytes(d), 0u);
  EXPECT_EQ(counting_->frees.load(), counting_->allocations.load());
}

}  // namespace
}  // namespace weft::runtime
