#include "runtime/sim/sim_stream.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::Eq;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

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
  EXPECT_THAT(seen[1], StatusIs(absl::StatusCode::kInternal, Eq("first")));
  EXPECT_FALSE(later_ran);
  EXPECT_THAT(stream.Synchronize(), StatusIs(absl::StatusCode::kInternal));
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
  EXPECT_THAT(stream.Synchronize(), StatusIs(absl::StatusCode::kInternal));
  EXPECT_TRUE(b_ran);
  EXPECT_TRUE(b_seen.ok()) << b_seen;
  EXPECT_FALSE(a_later_ran);
  EXPECT_THAT(a_seen, StatusIs(absl::StatusCode::kInternal,
                               HasSubstr("job one broke")));
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
  EXPECT_THAT(seen, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(sync, StatusIs(absl::StatusCode::kUnavailable,
                             HasSubstr("was lost: test")));
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
  EXPECT_THAT(stream.OpenGate(*gate, absl::OkStatus(), 1),
              StatusIs(absl::StatusCode::kFailedPrecondition));
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
  EXPECT_THAT(stream.Synchronize(), StatusIs(absl::StatusCode::kAborted));
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

TEST_F(SimStreamTest, HeldItemsKeepEnqueueOrderAcrossThreads) {
  SimStream stream("s", &unpaced_);
  absl::Mutex mu;
  std::vector<int> order;
  auto note = [&](int i) {
    return [&, i](SimStream::Timing&) {
      absl::MutexLock lock(&mu);
      order.push_back(i);
      return absl::OkStatus();
    };
  };
  ASSERT_TRUE(stream.Hold(3));
  EXPECT_EQ(stream.Enqueue(note(1)), 1u);
  // Another thread's item, enqueued while the holder holds, goes in between.
  std::thread other([&] { EXPECT_EQ(stream.Enqueue(note(2)), 2u); });
  other.join();
  EXPECT_EQ(stream.Enqueue(note(3)), 3u);
  EXPECT_EQ(stream.enqueued(), 3u);
  EXPECT_FALSE(stream.Idle());
  stream.Release();
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(stream.Idle());
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST_F(SimStreamTest, MarkRecordedWhileHeldCompletesWithTheHeldItems) {
  SimStream stream("s", &unpaced_);
  stream.Enqueue(Lasting(2));
  ASSERT_TRUE(stream.Synchronize().ok());
  ASSERT_TRUE(stream.Hold(5));
  stream.Enqueue(Lasting(3));
  std::shared_ptr<SimStream::Mark> mark = stream.Record();
  EXPECT_EQ(mark->seq(), 2u);
  const uint64_t after = stream.Enqueue(Lasting(4));
  EXPECT_FALSE(stream.MarkTime(*mark).has_value());
  EXPECT_FALSE(stream.IsComplete(2));
  stream.Release();
  ASSERT_TRUE(stream.AwaitComplete(after));
  ASSERT_TRUE(stream.MarkTime(*mark).has_value());
  EXPECT_DOUBLE_EQ(*stream.MarkTime(*mark), 5);
  // A mark recorded with nothing held and nothing pending is done at once.
  std::shared_ptr<SimStream::Mark> idle = stream.Record();
  ASSERT_TRUE(stream.MarkTime(*idle).has_value());
  EXPECT_DOUBLE_EQ(*stream.MarkTime(*idle), 9);
}

TEST_F(SimStreamTest, StopDropsHeldItems) {
  SimStream stream("s", &unpaced_);
  ASSERT_TRUE(stream.Hold(9));
  bool ran = false;
  const uint64_t seq =
      stream.EnqueueCallback([&](absl::Status) { ran = true; });
  std::shared_ptr<SimStream::Mark> mark = stream.Record();
  stream.Stop();
  stream.Release();
  EXPECT_FALSE(stream.AwaitComplete(seq));
  // Enqueued after the stop: dropped too, its number never completes.
  const uint64_t late = stream.Enqueue(Lasting(1));
  EXPECT_EQ(late, seq + 1);
  EXPECT_FALSE(stream.AwaitComplete(late));
  EXPECT_FALSE(stream.MarkTime(*mark).has_value());
  EXPECT_FALSE(ran);
  EXPECT_THAT(stream.Synchronize(), StatusIs(absl::StatusCode::kAborted));
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

// Host time spent running an item (here 100 ms) is not virtual time: the
// next item is ready when the first ends in the model, and both were
// enqueued at (about) the clock's start.
TEST_F(SimStreamTest, PacedItemsAreReadyFromTheirEnqueueNotTheirRun) {
  SimClock paced(1.0);
  SimStream stream("s", &paced);
  const double enqueued = paced.NowUs();
  stream.Enqueue([](SimStream::Timing& t) {
    absl::SleepFor(absl::Milliseconds(100));  // the host's work
    t.end_us = t.ready_us + 1000;
    return absl::OkStatus();
  });
  stream.Enqueue(Lasting(1000));
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_GE(stream.last_end_us(), enqueued + 2000);
  EXPECT_LT(stream.last_end_us(), enqueued + 2000 + 50000);
  // Work enqueued later starts no earlier than it was enqueued.
  absl::SleepFor(absl::Milliseconds(5));
  const double later = paced.NowUs();
  stream.Enqueue(Lasting(10));
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_GE(stream.last_end_us(), later + 10);
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
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kAborted, HasSubstr("shut down")));
}

// A stream waiting on a mark holds no thread: with one worker (and none
// added on stalls), the stream it waits for still runs.
TEST_F(SimStreamTest, WaitParksTheStreamInsteadOfItsWorker) {
  SimWorkerPool pool(1, absl::InfiniteDuration());
  auto a = std::make_shared<SimStream>("a", &unpaced_, nullptr, &pool);
  SimStream b("b", &unpaced_, nullptr, &pool);
  ASSERT_TRUE(a->Hold(1));
  a->Enqueue(Lasting(30));
  std::shared_ptr<SimStream::Mark> mark = a->Record();
  b.EnqueueWait(a, mark);
  b.Enqueue(Lasting(5));
  std::shared_ptr<SimStream::Mark> end = b.Record();
  // The one worker takes c after b parked on its wait.
  SimStream c("c", &unpaced_, nullptr, &pool);
  absl::Notification b_parked;
  c.EnqueueCallback([&](absl::Status) { b_parked.Notify(); });
  b_parked.WaitForNotification();
  EXPECT_FALSE(b.IsComplete(1));
  a->Release();
  ASSERT_TRUE(b.Synchronize().ok());
  EXPECT_EQ(b.MarkTime(*end), 35);
  EXPECT_EQ(pool.threads(), 1);
  b.Shutdown();
  a->Shutdown();
}

TEST_F(SimStreamTest, ClosedGateParksOnlyItsStream) {
  SimWorkerPool pool(1, absl::InfiniteDuration());
  SimStream gated("gated", &unpaced_, nullptr, &pool);
  SimStream other("other", &unpaced_, nullptr, &pool);
  auto gate = std::make_shared<SimStream::Gate>();
  gated.EnqueueGate(gate);
  const uint64_t after = gated.Enqueue(Lasting(1));
  other.Enqueue(Lasting(7));
  ASSERT_TRUE(other.Synchronize().ok());
  EXPECT_FALSE(gated.IsComplete(after));
  ASSERT_TRUE(gated.OpenGate(*gate, absl::OkStatus(), 10).ok());
  ASSERT_TRUE(gated.Synchronize().ok());
  EXPECT_EQ(gated.last_end_us(), 11);
  EXPECT_EQ(pool.threads(), 1);
}

// Work that parks runs again once woken, and completes then.
TEST_F(SimStreamTest, ParkedWorkRunsAgainWhenWoken) {
  SimWorkerPool pool(1, absl::InfiniteDuration());
  SimStream stream("s", &unpaced_, nullptr, &pool);
  absl::Mutex mu;
  std::shared_ptr<SimStream::Waker> waker;
  bool may_finish = false;
  int runs = 0;
  stream.Enqueue([&](SimStream::Timing& t) {
    absl::MutexLock lock(&mu);
    ++runs;
    if (!may_finish) {
      waker = t.Park();
      return absl::OkStatus();
    }
    t.end_us = t.ready_us + 3;
    return absl::OkStatus();
  });
  const uint64_t last = stream.Enqueue(Lasting(1));
  absl::Notification parked;
  SimStream other("other", &unpaced_, nullptr, &pool);
  // The pool's one worker gets to `other` only after `stream` parked.
  other.EnqueueCallback([&](absl::Status) { parked.Notify(); });
  parked.WaitForNotification();
  EXPECT_FALSE(stream.IsComplete(1));
  std::shared_ptr<SimStream::Waker> to_wake;
  {
    absl::MutexLock lock(&mu);
    may_finish = true;
    to_wake = waker;
  }
  ASSERT_NE(to_wake, nullptr);
  to_wake->Wake();
  ASSERT_TRUE(stream.AwaitComplete(last));
  EXPECT_EQ(stream.last_end_us(), 4);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(runs, 2);
}

// A callback that synchronizes another stream of the same pool blocks its
// worker; the pool adds one at once (stalls are not even watched here) so
// that the other stream runs.
TEST_F(SimStreamTest, CallbackSynchronizingAnotherStreamDoesNotDeadlock) {
  SimWorkerPool pool(1, absl::InfiniteDuration());
  SimStream a("a", &unpaced_, nullptr, &pool);
  SimStream b("b", &unpaced_, nullptr, &pool);
  ASSERT_TRUE(b.Hold(1));
  b.Enqueue(Lasting(2));
  absl::Status synced = absl::UnknownError("not called");
  a.EnqueueCallback([&](absl::Status) {
    EXPECT_TRUE(a.OnWorkerThread());
    EXPECT_FALSE(b.OnWorkerThread());
    b.Release();
    synced = b.Synchronize();
  });
  ASSERT_TRUE(a.Synchronize().ok());
  EXPECT_TRUE(synced.ok()) << synced;
  EXPECT_GE(pool.threads(), 2);
}

// Blocks a worker in a callback of `a` until a callback of `b` runs, and
// waits for both streams: with one worker to start with, only a worker the
// pool adds can run b's.
void BlockOnAnotherStream(SimStream& a, SimStream& b) {
  absl::Notification from_b;
  a.EnqueueCallback([&](absl::Status) { from_b.WaitForNotification(); });
  b.EnqueueCallback([&](absl::Status) { from_b.Notify(); });
  ASSERT_TRUE(a.Synchronize().ok());
  ASSERT_TRUE(b.Synchronize().ok());
}

// Host code that blocks without the pool knowing (here a callback waiting
// for another stream's callback) stalls the queue; the pool adds a worker.
TEST_F(SimStreamTest, BlockedWorkersAreReplacedAfterAStall) {
  SimWorkerPool pool(1);
  SimStream a("a", &unpaced_, nullptr, &pool);
  SimStream b("b", &unpaced_, nullptr, &pool);
  BlockOnAnotherStream(a, b);
  EXPECT_GE(pool.threads(), 2);
}

// Two streams queued at once for the one idle worker: it takes one, which
// blocks, and the other is left waiting; the pool notices the stall (also
// when the monitor was asleep, as it is while the pool is idle). Repeated:
// whether both are queued before the worker wakes is up to the host.
TEST_F(SimStreamTest, StreamQueuedBehindABlockedWorkerGetsAnother) {
  for (int round = 0; round < 20; ++round) {
    SimWorkerPool pool(1);
    SimStream a("a", &unpaced_, nullptr, &pool);
    SimStream b("b", &unpaced_, nullptr, &pool);
    a.Enqueue(Lasting(0));
    ASSERT_TRUE(a.Synchronize().ok());  // the pool is idle again
    BlockOnAnotherStream(a, b);
    EXPECT_GE(pool.threads(), 2);
  }
}

// Sixty-four streams in a ring of waits, on two workers: every wait is
// met, the virtual times add up, and the pool keeps its size.
TEST_F(SimStreamTest, ManyStreamsRunOnFewWorkers) {
  constexpr int kStreams = 64;
  constexpr int kRounds = 20;
  SimWorkerPool pool(2, absl::InfiniteDuration());
  std::vector<std::shared_ptr<SimStream>> streams;
  for (int i = 0; i < kStreams; ++i) {
    streams.push_back(std::make_shared<SimStream>("s" + std::to_string(i),
                                                  &unpaced_, nullptr, &pool));
  }
  // Round r: stream i waits for stream i-1's work of round r, then works
  // 1 us. Stream 0 waits for the last stream's previous round.
  std::vector<std::shared_ptr<SimStream::Mark>> last(kStreams);
  for (int r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kStreams; ++i) {
      const int from = (i + kStreams - 1) % kStreams;
      if (last[from] != nullptr)
        streams[i]->EnqueueWait(streams[from], last[from]);
      streams[i]->Enqueue(Lasting(1));
      last[i] = streams[i]->Record();
    }
  }
  for (auto& stream : streams) ASSERT_TRUE(stream->Synchronize().ok());
  // The ring makes one chain of kStreams * kRounds items.
  EXPECT_EQ(streams[kStreams - 1]->last_end_us(), kStreams * kRounds);
  EXPECT_EQ(pool.threads(), 2);
  for (auto& stream : streams) stream->Shutdown();
}

// On a paced clock a worker does not sleep through an item's virtual
// time: other streams run meanwhile.
TEST_F(SimStreamTest, PacingDoesNotHoldTheWorker) {
  SimClock paced(1.0);
  SimWorkerPool pool(1, absl::InfiniteDuration());
  SimStream slow("slow", &paced, nullptr, &pool);
  SimStream quick("quick", &paced, nullptr, &pool);
  const uint64_t seq = slow.Enqueue(Lasting(10e6));  // 10 s
  quick.Enqueue(Lasting(0));
  const absl::Time start = absl::Now();
  ASSERT_TRUE(quick.Synchronize().ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(slow.IsComplete(seq));
  EXPECT_EQ(pool.threads(), 1);
  slow.Shutdown();
}

// A gate's host work starts when the stream reaches the gate: on a paced
// clock, host work that took as long as the host kept the gate closed ends
// when the gate opens, not that long after it.
TEST_F(SimStreamTest, PacedGateCountsHostWorkFromWhenTheStreamReachedIt) {
  SimClock paced(1.0);
  SimStream stream("s", &paced);
  absl::Notification reached;
  stream.EnqueueCallback([&](absl::Status) { reached.Notify(); });
  auto gate = std::make_shared<SimStream::Gate>();
  stream.EnqueueGate(gate);
  reached.WaitForNotification();
  constexpr double kBusyUs = 200e3;
  // Real time passes while the host works (this is the host's work, not
  // ordering: the stream is parked on the gate either way).
  absl::SleepFor(absl::Microseconds(kBusyUs));
  const double opened_at = paced.NowUs();
  ASSERT_TRUE(stream.OpenGate(*gate, absl::OkStatus(), kBusyUs).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_GE(stream.last_end_us(), kBusyUs);
  EXPECT_LT(stream.last_end_us(), opened_at + kBusyUs / 2);
}

// A worker blocked in host code while a paced stream's deadline passes:
// the stream is due to run, so the pool adds a worker for it.
TEST_F(SimStreamTest, BlockedWorkerIsReplacedForADuePacedStream) {
  SimClock paced(1.0);
  SimWorkerPool pool(1);
  SimStream due("due", &paced, nullptr, &pool);
  SimStream blocked("blocked", &paced, nullptr, &pool);
  absl::Notification from_due;
  due.Enqueue(Lasting(100e3));  // parks on its deadline, 100 ms from now
  due.EnqueueCallback([&](absl::Status) { from_due.Notify(); });
  bool saw_due = false;
  blocked.EnqueueCallback([&](absl::Status) {
    saw_due = from_due.WaitForNotificationWithTimeout(absl::Seconds(3));
  });
  ASSERT_TRUE(blocked.Synchronize().ok());
  EXPECT_TRUE(saw_due);
  ASSERT_TRUE(due.Synchronize().ok());
  EXPECT_GE(pool.threads(), 2);
}

TEST_F(SimStreamTest, StopDropsAParkedItem) {
  SimWorkerPool pool(1, absl::InfiniteDuration());
  auto target = std::make_shared<SimStream>("t", &unpaced_, nullptr, &pool);
  SimStream waiter("w", &unpaced_, nullptr, &pool);
  ASSERT_TRUE(target->Hold(1));
  target->Enqueue(Lasting(1));
  waiter.EnqueueWait(target, target->Record());
  bool callback_ran = false;
  waiter.EnqueueCallback([&](absl::Status) { callback_ran = true; });
  waiter.Shutdown();
  absl::Status s = waiter.Synchronize();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kAborted, HasSubstr("shut down")));
  EXPECT_FALSE(callback_ran);
  target->Release();
  EXPECT_TRUE(target->Synchronize().ok());
  target->Shutdown();
}

TEST_F(SimStreamTest, WaitOnAStoppedStreamFailsTheWaitersScope) {
  SimWorkerPool pool(1, absl::InfiniteDuration());
  auto target = std::make_shared<SimStream>("t", &unpaced_, nullptr, &pool);
  SimStream waiter("w", &unpaced_, nullptr, &pool);
  ASSERT_TRUE(target->Hold(1));
  target->Enqueue(Lasting(1));
  waiter.EnqueueWait(target, target->Record());
  absl::Status told;
  waiter.EnqueueCallback([&](absl::Status s) { told = s; });
  target->Shutdown();
  absl::Status s = waiter.Synchronize();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kAborted,
                          HasSubstr("t stopped before the awaited work")));
  EXPECT_EQ(told, s);
}

// A paced item lasting `us` whose interruption is recorded in `*at_us`.
SimStream::Work LastingInterruptibly(double us, double* at_us) {
  return [us, at_us](SimStream::Timing& t) {
    t.end_us = t.ready_us + us;
    t.OnInterrupt([at_us](double at) { *at_us = at; });
    return absl::OkStatus();
  };
}

TEST_F(SimStreamTest, InterruptingAbortStopsAPacingItemAtOnce) {
  SimClock paced(1.0);
  SimStream stream("s", &paced);
  double interrupted_at = -1;
  stream.SetScope(1);
  stream.Enqueue(LastingInterruptibly(20e6, &interrupted_at));  // 20 s
  absl::Status seen;
  absl::Notification done;
  stream.EnqueueCallback([&](absl::Status s) {
    seen = s;
    done.Notify();
  });
  stream.SetScope(2);
  stream.Enqueue(Lasting(1000));
  // Let the item run and start pacing.
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time aborted = absl::Now();
  stream.AbortScope(1, absl::CancelledError("job cancelled"),
                    /*interrupt=*/true);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(2)));
  EXPECT_LT(absl::Now() - aborted, absl::Seconds(2));
  EXPECT_THAT(seen, StatusIs(absl::StatusCode::kCancelled));
  // Stopped when aborted, and the hook was told when.
  EXPECT_GT(interrupted_at, 0);
  EXPECT_LT(interrupted_at, 2e6);
  // The next scope's item follows at once, from the interruption on.
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_LT(stream.last_end_us(), 3e6);
  EXPECT_GE(stream.last_end_us(), interrupted_at + 1000);
}

TEST_F(SimStreamTest, ItemRunningWhenInterruptedDoesNotPace) {
  SimClock paced(1.0);
  SimStream stream("s", &paced);
  double interrupted_at = -1;
  absl::Notification running, aborted;
  stream.SetScope(1);
  stream.Enqueue([&](SimStream::Timing& t) {
    t.end_us = t.ready_us + 20e6;  // 20 s
    t.OnInterrupt([&](double at) { interrupted_at = at; });
    running.Notify();
    aborted.WaitForNotification();
    return absl::OkStatus();
  });
  running.WaitForNotification();
  const absl::Time start = absl::Now();
  stream.AbortScope(1, absl::CancelledError("job cancelled"),
                    /*interrupt=*/true);
  aborted.Notify();
  EXPECT_THAT(stream.Synchronize(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_GT(interrupted_at, 0);
  EXPECT_LT(interrupted_at, 2e6);
  // Forgotten, the scope runs and paces again.
  stream.ForgetScope(1);
  stream.Enqueue(Lasting(20000));
  const absl::Time again = absl::Now();
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_GE(absl::Now() - again, absl::Milliseconds(20));
}

TEST_F(SimStreamTest, AbortWithoutInterruptLetsTheItemFinish) {
  SimClock paced(1.0);
  SimStream stream("s", &paced);
  double interrupted_at = -1;
  stream.SetScope(1);
  const absl::Time start = absl::Now();
  stream.Enqueue(LastingInterruptibly(300000, &interrupted_at));  // 300 ms
  absl::SleepFor(absl::Milliseconds(50));
  stream.AbortScope(1, absl::CancelledError("job cancelled"));
  EXPECT_THAT(stream.Synchronize(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_EQ(interrupted_at, -1);
}

}  // namespace
}  // namespace weft::runtime
