#include "runtime/sim/sim_stream.h"

#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;

// A work item lasting `us` of virtual time.
SimStream::Work Lasting(double us) {
  return [us](SimStream::Timing& t) {
    t.end_us = t.ready_us + us;
    return absl::OkStatus();
  };
}

SimStream::Work Failing(absl::Status status) {
  return [status](SimStream::Timing&) { return status; };
}

class SimStreamTest : public ::testing::Test {
 protected:
  SimClock unpaced_{0};
};

TEST_F(SimStreamTest, RunsItemsInOrder) {
  SimStream stream("s", &unpaced_);
  absl::Mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) {
    if (i % 2 == 0) {
      stream.Enqueue([&, i](SimStream::Timing&) {
        absl::MutexLock lock(&mu);
        order.push_back(i);
        return absl::OkStatus();
      });
    } else {
      stream.EnqueueCallback([&, i](absl::Status) {
        absl::MutexLock lock(&mu);
        order.push_back(i);
      });
    }
  }
  EXPECT_EQ(stream.enqueued(), 50u);
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(stream.completed(), 50u);
  EXPECT_TRUE(stream.Idle());
  absl::MutexLock lock(&mu);
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST_F(SimStreamTest, VirtualTimeAddsUpAlongTheStream) {
  SimStream stream("s", &unpaced_);
  stream.Enqueue(Lasting(10));
  std::shared_ptr<SimStream::Mark> after_first = stream.Record();
  stream.Enqueue(Lasting(25));
  std::shared_ptr<SimStream::Mark> after_second = stream.Record();
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(stream.MarkTime(*after_first), 10);
  EXPECT_EQ(stream.MarkTime(*after_second), 35);
  EXPECT_EQ(stream.last_end_us(), 35);
  // A mark of an idle stream completes at once, at its time.
  std::shared_ptr<SimStream::Mark> idle = stream.Record();
  EXPECT_EQ(stream.MarkTime(*idle), 35);
}

TEST_F(SimStreamTest, WaitMovesTimeUpToTheMark) {
  auto a = std::make_shared<SimStream>("a", &unpaced_);
  SimStream b("b", &unpaced_);
  a->Enqueue(Lasting(100));
  std::shared_ptr<SimStream::Mark> mark = a->Record();
  b.Enqueue(Lasting(30));
  b.EnqueueWait(a, mark);
  b.Enqueue(Lasting(5));
  std::shared_ptr<SimStream::Mark> end = b.Record();
  ASSERT_TRUE(b.Synchronize().ok());
  EXPECT_EQ(b.MarkTime(*end), 105);
  // Waiting on a mark that is earlier than the stream's time changes
  // nothing.
  b.EnqueueWait(a, mark);
  std::shared_ptr<SimStream::Mark> again = b.Record();
  ASSERT_TRUE(b.Synchronize().ok());
  EXPECT_EQ(b.MarkTime(*again), 105);
}

TEST_F(SimStreamTest, MarkIsPendingUntilItsWorkCompletes) {
  SimStream stream("s", &unpaced_);
  absl::Notification release;
  stream.Enqueue([&](SimStream::Timing&) {
    release.WaitForNotification();
    return absl::OkStatus();
  });
  std::shared_ptr<SimStream::Mark> mark = stream.Record();
  EXPECT_FALSE(stream.MarkTime(*mark).has_value());
  release.Notify();
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(stream.MarkTime(*mark).has_value());
}

TEST_F(SimStreamTest, FirstErrorSkipsLaterWorkOfItsScopeAndReachesCallbacks) {
  SimStream stream("device 0 stream 7", &unpaced_);
  bool later_ran = false;
  std::vector<absl::Status> seen;
  absl::Notification done;
  stream.EnqueueCallback([&](absl::Status s) { seen.push_back(s); });
  stream.Enqueue(Failing(absl::InternalError("first")));
  stream.Enqueue(Failing(absl::DataLossError("second")));
  stream.Enqueue([&](SimStream::Timing&) {
    later_ran = true;
    return absl::OkStatus();
  });
  stream.EnqueueCallback([&](absl::Status s) {
    seen.push_back(s);
    done.Notify();
  });
  done.WaitForNotification();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].ok());
  EXPECT_EQ(seen[1].code(), absl::StatusCode::kInternal);
  EXPECT_EQ(seen[1].message(), "first");
  EXPECT_FALSE(later_ran);
  EXPECT_EQ(stream.Synchronize().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(stream.completed(), 5u);
}

TEST_F(SimStreamTest, ErrorsStayInTheirScope) {
  SimStream stream("s", &unpaced_);
  bool a_later_ran = false;
  bool b_ran = false;
  absl::Status a_seen, b_seen;
  stream.SetScope(1);
  stream.Enqueue(Failing(absl::InternalError("job one broke")));
  stream.SetScope(2);
  stream.Enqueue([&](SimStream::Timing&) {
    b_ran = true;
    return absl::OkStatus();
  });
  stream.EnqueueCallback([&](absl::Status s) { b_seen = s; });
  stream.SetScope(1);
  stream.Enqueue([&](SimStream::Timing&) {
    a_later_ran = true;
    return absl::OkStatus();
  });
  stream.EnqueueCallback([&](absl::Status s) { a_seen = s; });
  EXPECT_EQ(stream.Synchronize().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(b_ran);
  EXPECT_TRUE(b_seen.ok()) << b_seen;
  EXPECT_FALSE(a_later_ran);
  EXPECT_EQ(a_seen.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(a_seen.message(), HasSubstr("job one broke"));
  stream.SetScope(2);
  EXPECT_TRUE(stream.Synchronize().ok());
}

TEST_F(SimStreamTest, FailureFlowsAlongWaitsWithinItsScope) {
  auto a = std::make_shared<SimStream>("a", &unpaced_);
  SimStream b("b", &unpaced_);
  a->SetScope(1);
  a->Enqueue(Failing(absl::InternalError("upstream broke")));
  std::shared_ptr<SimStream::Mark> mark = a->Record();
  bool dependent_ran = false, other_ran = false;
  b.SetScope(1);
  b.EnqueueWait(a, mark);
  b.Enqueue([&](SimStream::Timing&) {
    dependent_ran = true;
    return absl::OkStatus();
  });
  b.SetScope(2);
  b.EnqueueWait(a, mark);  // another scope waiting: not its failure
  b.Enqueue([&](SimStream::Timing&) {
    other_ran = true;
    return absl::OkStatus();
  });
  EXPECT_TRUE(b.Synchronize().ok());  // scope 2
  EXPECT_FALSE(dependent_ran);
  EXPECT_TRUE(other_ran);
  b.SetScope(1);
  EXPECT_THAT(b.Synchronize().message(), HasSubstr("upstream broke"));
}

TEST_F(SimStreamTest, LostDeviceFailsEveryScope) {
  SimDeviceHealth health;
  SimStream stream("s", &unpaced_, &health);
  stream.Enqueue(Lasting(1));
  ASSERT_TRUE(stream.Synchronize().ok());
  health.Lose(absl::UnavailableError("device 0 was lost: test"));
  health.Lose(absl::InternalError("ignored: the first loss sticks"));
  bool ran = false;
  absl::Status seen;
  stream.SetScope(9);
  stream.Enqueue([&](SimStream::Timing&) {
    ran = true;
    return absl::OkStatus();
  });
  stream.EnqueueCallback([&](absl::Status s) { seen = s; });
  absl::Status sync = stream.Synchronize();
  EXPECT_FALSE(ran);
  EXPECT_EQ(seen.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(sync.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(sync.message(), HasSubstr("was lost: test"));
}

TEST_F(SimStreamTest, GateHoldsLaterWorkUntilOpened) {
  SimStream stream("s", &unpaced_);
  auto gate = std::make_shared<SimStream::Gate>();
  stream.Enqueue(Lasting(10));
  stream.EnqueueGate(gate);
  bool after_ran = false;
  const uint64_t after = stream.Enqueue([&](SimStream::Timing& t) {
    after_ran = true;
    t.end_us = t.ready_us + 1;
    return absl::OkStatus();
  });
  std::shared_ptr<SimStream::Mark> mark = stream.Record();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(stream.IsComplete(after));
  EXPECT_FALSE(after_ran);
  ASSERT_TRUE(stream.OpenGate(*gate, absl::OkStatus(), 40).ok());
  EXPECT_EQ(stream.OpenGate(*gate, absl::OkStatus(), 1).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(after_ran);
  EXPECT_EQ(stream.MarkTime(*mark), 51);  // 10 + 40 of host work + 1
}

TEST_F(SimStreamTest, GateOpenedWithAnErrorFailsItsScope) {
  SimStream stream("s", &unpaced_);
  auto gate = std::make_shared<SimStream::Gate>();
  stream.EnqueueGate(gate);
  absl::Status seen;
  stream.EnqueueCallback([&](absl::Status s) { seen = s; });
  ASSERT_TRUE(
      stream.OpenGate(*gate, absl::AbortedError("host op failed"), 0).ok());
  EXPECT_EQ(stream.Synchronize().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(seen.message(), HasSubstr("host op failed"));
}

TEST_F(SimStreamTest, HeldItemsWaitForRelease) {
  SimStream stream("s", &unpaced_);
  EXPECT_TRUE(stream.Hold(7));
  EXPECT_FALSE(stream.Hold(7));  // held by this holder already
  absl::Notification ran;
  const uint64_t seq = stream.Enqueue([&](SimStream::Timing&) {
    ran.Notify();
    return absl::OkStatus();
  });
  EXPECT_FALSE(ran.WaitForNotificationWithTimeout(absl::Milliseconds(30)));
  EXPECT_FALSE(stream.IsComplete(seq));
  stream.Release();
  EXPECT_TRUE(stream.AwaitComplete(seq));
  EXPECT_TRUE(ran.HasBeenNotified());
}

TEST_F(SimStreamTest, LongHeldRunsAreReleasedEarly) {
  SimStream stream("s", &unpaced_);
  stream.Hold(1);
  uint64_t seq = 0;
  for (int i = 0; i < 200; ++i) seq = stream.Enqueue(Lasting(1));
  // Most of the run started without a Release.
  EXPECT_TRUE(stream.AwaitComplete(seq - 64));
  stream.Release();
  EXPECT_TRUE(stream.AwaitComplete(seq));
}

TEST_F(SimStreamTest, AwaitCompleteBlocksUntilTheItemRan) {
  SimStream stream("s", &unpaced_);
  absl::Notification release;
  stream.Enqueue([&](SimStream::Timing&) {
    release.WaitForNotification();
    return absl::OkStatus();
  });
  const uint64_t seq = stream.Enqueue(Lasting(0));
  EXPECT_FALSE(stream.IsComplete(seq));
  absl::Notification waited;
  std::thread waiter([&] {
    EXPECT_TRUE(stream.AwaitComplete(seq));
    waited.Notify();
  });
  EXPECT_FALSE(waited.WaitForNotificationWithTimeout(absl::Milliseconds(30)));
  release.Notify();
  waited.WaitForNotification();
  waiter.join();
  EXPECT_TRUE(stream.IsComplete(seq));
}

TEST_F(SimStreamTest, PacedClockTakesAtLeastTheVirtualTime) {
  SimClock paced(1.0);
  SimStream stream("s", &paced);
  const absl::Time start = absl::Now();
  stream.Enqueue(Lasting(5000));  // 5 ms
  ASSERT_TRUE(stream.Synchronize().ok());
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(5));
  EXPECT_LT(took, absl::Milliseconds(500));
}

TEST_F(SimStreamTest, ShutdownDropsPendingWorkAndWakesWaiters) {
  SimClock paced(1.0);
  auto stream = std::make_unique<SimStream>("s", &paced);
  absl::Notification started;
  stream->Enqueue([&](SimStream::Timing& t) {
    started.Notify();
    t.end_us = t.ready_us + 30e6;  // 30 s, cut short by the shutdown
    return absl::OkStatus();
  });
  bool callback_ran = false;
  const uint64_t seq =
      stream->EnqueueCallback([&](absl::Status) { callback_ran = true; });
  auto gate = std::make_shared<SimStream::Gate>();
  stream->EnqueueGate(gate);
  started.WaitForNotification();
  absl::Notification woke;
  bool completed = true;
  std::thread waiter([&] {
    completed = stream->AwaitComplete(seq);
    woke.Notify();
  });
  const absl::Time start = absl::Now();
  stream->Shutdown();
  woke.WaitForNotification();
  waiter.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(completed);
  EXPECT_FALSE(callback_ran);
  absl::Status s = stream->Synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(s.message(), HasSubstr("shut down"));
}

}  // namespace
}  // namespace weft::runtime
