#include "runtime/job_streams.h"

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/forwarding_backend.h"
#include "runtime/job_tracer.h"
#include "runtime/sim/sim_backend.h"
#include "runtime/stream_pool.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

class JobStreamsTest : public ::testing::Test {
 protected:
  // Two devices with pools of at most `max_streams` streams each.
  void Init(int max_streams) {
    SimBackend::Options options;
    options.num_devices = 2;
    options.time_scale = 0;
    backend_ = SimBackend::Create(options).value();
    for (int d = 0; d < 2; ++d) {
      owned_.push_back(
          std::make_unique<StreamPool>(backend_.get(), d, max_streams));
      pools_.push_back(owned_.back().get());
    }
  }

  JobStreams::Shared Shared() {
    return JobStreams::Shared{backend_.get(), pools_, &scopes_, &switches_};
  }

  std::unique_ptr<SimBackend> backend_;
  std::vector<std::unique_ptr<StreamPool>> owned_;
  std::vector<StreamPool*> pools_;
  absl::flat_hash_map<uint64_t, uint64_t> scopes_;
  uint64_t switches_ = 0;
  NullJobTracer tracer_;
};

TEST_F(JobStreamsTest, LeasesAPooledStreamPerLogicalStreamOnFirstUse) {
  Init(/*max_streams=*/8);
  JobStreams streams(7, Shared(), {0, 0, 1}, &tracer_);
  EXPECT_EQ(streams.pooled(0).value, 0u);
  absl::StatusOr<StreamHandle> s0 = streams.For(0);
  ASSERT_OK(s0);
  EXPECT_EQ(streams.For(0).value(), *s0);
  EXPECT_EQ(streams.pooled(0), *s0);
  const StreamHandle s2 = streams.For(2).value();
  const StreamHandle s1 = streams.For(1).value();
  EXPECT_FALSE(s0->value == s1.value);
  EXPECT_EQ(pools_[0]->busy(), 2);
  EXPECT_EQ(pools_[1]->busy(), 1);
  EXPECT_THAT(streams.used(), ElementsAre(*s0, s2, s1));
  streams.Release();
  EXPECT_EQ(pools_[0]->busy(), 0);
  EXPECT_EQ(pools_[1]->busy(), 0);
}

TEST_F(JobStreamsTest, FoldsOntoItsOwnStreamsAtThePoolsCap) {
  Init(/*max_streams=*/2);
  JobStreams mine(1, Shared(), {0, 0, 0, 0}, &tracer_);
  const StreamHandle a = mine.For(0).value();
  const StreamHandle b = mine.For(1).value();
  // The pool is full: further logical streams take turns on a and b.
  EXPECT_EQ(mine.For(2).value(), a);
  EXPECT_EQ(mine.For(3).value(), b);
  EXPECT_EQ(mine.used().size(), 2u);
  // A job holding none on the device shares with other jobs.
  JobStreams other(2, Shared(), {0}, &tracer_);
  ASSERT_OK(other.For(0));
  EXPECT_EQ(pools_[0]->total(), 2);
  other.Release();
  mine.Release();
  EXPECT_EQ(pools_[0]->busy(), 0);
}

TEST_F(JobStreamsTest, EntersItsScopeOncePerSwitch) {
  Init(/*max_streams=*/1);
  JobStreams first(1, Shared(), {0}, &tracer_);
  JobStreams second(2, Shared(), {0}, &tracer_);
  const StreamHandle s = first.For(0).value();
  EXPECT_EQ(second.For(0).value(), s);  // shared: the pool's cap is 1
  ASSERT_OK(first.EnterLogical(0, s));
  EXPECT_EQ(switches_, 1u);
  EXPECT_EQ(scopes_[s.value], 1u);
  ASSERT_OK(first.EnterLogical(0, s));
  ASSERT_OK(first.Enter(s));
  EXPECT_EQ(switches_, 1u);
  ASSERT_OK(second.EnterLogical(0, s));
  EXPECT_EQ(switches_, 2u);
  EXPECT_EQ(scopes_[s.value], 2u);
  ASSERT_OK(first.EnterLogical(0, s));
  EXPECT_EQ(switches_, 3u);
  first.Release();
  second.Release();
}

TEST_F(JobStreamsTest, FencesFireOnEveryStreamUsed) {
  Init(/*max_streams=*/4);
  JobStreams streams(3, Shared(), {0, 1}, &tracer_);
  ASSERT_OK(streams.For(0));
  ASSERT_OK(streams.For(1));
  absl::Notification fired[2];
  int next = 0;
  ASSERT_OK(streams.EnqueueFences([&](StreamHandle) -> HostCallback {
    absl::Notification* n = &fired[next++];
    return [n](absl::Status) { n->Notify(); };
  }));
  EXPECT_EQ(streams.fences_pending(), 2);
  EXPECT_FALSE(streams.unfenced());
  for (absl::Notification& n : fired) n.WaitForNotification();
  streams.FenceFired();
  streams.FenceFired();
  EXPECT_EQ(streams.fences_pending(), 0);
  streams.LeaveScopes();
  streams.Release();
}

// Refuses host callbacks.
class NoCallbacksBackend : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::Status AddHostCallback(StreamHandle, HostCallback) override {
    return absl::UnavailableError("no callbacks here");
  }
};

TEST_F(JobStreamsTest, AStreamThatCannotTakeItsFenceLeavesTheJobUnfenced) {
  Init(/*max_streams=*/4);
  NoCallbacksBackend refusing(backend_.get());
  JobStreams::Shared shared = Shared();
  shared.backend = &refusing;
  JobStreams streams(3, shared, {0}, &tracer_);
  const StreamHandle s = streams.For(0).value();
  EXPECT_THAT(
      streams.EnqueueFences(
          [](StreamHandle) -> HostCallback { return [](absl::Status) {}; }),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no callbacks here")));
  EXPECT_TRUE(streams.unfenced());
  EXPECT_TRUE(streams.failed(s));
  EXPECT_EQ(streams.fences_pending(), 0);
  streams.Release();
  EXPECT_EQ(pools_[0]->total(), 0);  // retired, not reused
}

TEST_F(JobStreamsTest, FenceOffHoldsTheStreamsFromOtherJobsUntilRelease) {
  Init(/*max_streams=*/1);
  JobStreams streams(3, Shared(), {0}, &tracer_);
  ASSERT_OK(streams.For(0));
  streams.FenceOff();
  EXPECT_EQ(pools_[0]->fenced(), 1);
  JobStreams other(4, Shared(), {0}, &tracer_);
  EXPECT_THAT(other.For(0), StatusIs(absl::StatusCode::kUnavailable));
  streams.Release();
  EXPECT_EQ(pools_[0]->fenced(), 0);
  EXPECT_OK(other.For(0));
  other.Release();
}

}  // namespace
}  // namespace weft::runtime
