#include "runtime/sim/sim_worker_pool.h"

#include <atomic>
#include <functional>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

// Runs `slice` each time a worker runs it.
class FakeStream : public SimRunnable {
 public:
  explicit FakeStream(std::function<void()> slice = {})
      : slice_(std::move(slice)) {}
  void RunSlice() override {
    last_run_ = absl::Now();
    if (slice_) slice_();
    ran_.Notify();
  }
  absl::Notification& ran() { return ran_; }
  absl::Time last_run() const { return last_run_; }

 private:
  std::function<void()> slice_;
  absl::Notification ran_;
  absl::Time last_run_;
};

TEST(SimWorkerPoolTest, RunsEveryScheduledStreamOnItsWorkers) {
  SimWorkerPool pool(2);
  EXPECT_EQ(pool.threads(), 2);
  std::atomic<int> runs{0};
  std::vector<std::unique_ptr<FakeStream>> streams;
  for (int i = 0; i < 50; ++i) {
    streams.push_back(std::make_unique<FakeStream>([&runs] { ++runs; }));
  }
  for (auto& s : streams) pool.Schedule(s.get());
  for (auto& s : streams) s->ran().WaitForNotification();
  EXPECT_EQ(runs.load(), 50);
  EXPECT_EQ(pool.threads(), 2);  // nothing blocked
}

// Schedules a stream `delay` from now on `pool`; whether it ran no earlier
// than that deadline.
bool RanNoEarlier(SimWorkerPool& pool, absl::Duration delay) {
  FakeStream stream;
  const absl::Time at = absl::Now() + delay;
  pool.ScheduleAt(&stream, at);
  stream.ran().WaitForNotification();
  return stream.last_run() >= at;
}

TEST(SimWorkerPoolTest, ScheduleAtRunsNoEarlier) {
  SimWorkerPool pool(1);
  EXPECT_TRUE(RanNoEarlier(pool, absl::Milliseconds(30)));
}

TEST(SimWorkerPoolTest, WorkersWakeBeforeDeadlinesButRunNoEarlier) {
  const absl::Duration spin = absl::Microseconds(50);
  SimWorkerPool pool(2, SimWorkerPool::kDefaultStallTimeout, spin);
  EXPECT_EQ(pool.timer_lead(), spin / 2);
  for (int i = 0; i < 20; ++i) {
    // Woken early, the worker polls until the deadline.
    EXPECT_TRUE(RanNoEarlier(pool, absl::Milliseconds(2))) << i;
  }
  // What the sleeps showed of the host's timer latency, at most the spin.
  EXPECT_GE(pool.timer_lead(), absl::ZeroDuration());
  EXPECT_LE(pool.timer_lead(), spin);

  // Without a spin, workers sleep until the deadline itself.
  SimWorkerPool still(1);
  EXPECT_TRUE(RanNoEarlier(still, absl::Milliseconds(2)));
  EXPECT_EQ(still.timer_lead(), absl::ZeroDuration());
}

TEST(SimWorkerPoolTest, ScheduleNowAndUnscheduleMoveATimer) {
  SimWorkerPool pool(1);
  FakeStream soon;
  FakeStream never;
  pool.ScheduleAt(&soon, absl::Now() + absl::Hours(1));
  pool.ScheduleAt(&never, absl::Now() + absl::Milliseconds(20));
  pool.Unschedule(&never);
  pool.ScheduleNow(&soon);
  EXPECT_TRUE(soon.ran().WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(never.ran().HasBeenNotified());
}

TEST(SimWorkerPoolTest, AWorkerAboutToBlockGetsAReplacementAtOnce) {
  SimWorkerPool pool(1, /*stall_timeout=*/absl::InfiniteDuration());
  absl::Notification release;
  FakeStream blocking([&release] {
    SimWorkerPool::Current()->WorkerMayBlock();
    release.WaitForNotification();
  });
  FakeStream other;
  pool.Schedule(&blocking);
  pool.Schedule(&other);
  EXPECT_TRUE(other.ran().WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(pool.threads(), 2);
  release.Notify();
  blocking.ran().WaitForNotification();
  pool.WaitUntilNotRunning(&blocking);
}

TEST(SimWorkerPoolTest, StalledWorkersAreReplaced) {
  SimWorkerPool pool(1, /*stall_timeout=*/absl::Milliseconds(10));
  absl::Notification release;
  FakeStream blocking([&release] { release.WaitForNotification(); });
  FakeStream other;
  pool.Schedule(&blocking);
  pool.Schedule(&other);
  EXPECT_TRUE(other.ran().WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(pool.threads(), 2);
  release.Notify();
  pool.WaitUntilNotRunning(&blocking);
}

TEST(SimWorkerPoolTest, CurrentIsThePoolOfTheCallingWorker) {
  SimWorkerPool pool(1);
  EXPECT_EQ(SimWorkerPool::Current(), nullptr);
  SimWorkerPool* seen = nullptr;
  FakeStream stream([&seen] { seen = SimWorkerPool::Current(); });
  pool.Schedule(&stream);
  stream.ran().WaitForNotification();
  EXPECT_EQ(seen, &pool);
}

TEST(SimWorkerPoolTest, ASpinningWorkerTakesWhatIsScheduledWhileItSpins) {
  SimWorkerPool pool(1, absl::InfiniteDuration(), /*spin=*/absl::Seconds(60));
  std::vector<std::unique_ptr<FakeStream>> streams;
  for (int i = 0; i < 20; ++i)
    streams.push_back(std::make_unique<FakeStream>());
  // Each after the worker ran the one before and went back to spinning.
  for (auto& s : streams) {
    pool.Schedule(s.get());
    EXPECT_TRUE(s->ran().WaitForNotificationWithTimeout(absl::Seconds(30)));
  }
}

// Work that keeps coming back later than a spin stops the spinning: the
// worker sleeps at once. Work that comes back quickly starts it again.
TEST(SimWorkerPoolTest, WorkersSpinOnlyWhileWorkComesBackWithinASpin) {
  const absl::Duration spin = absl::Milliseconds(1);
  SimWorkerPool pool(1, absl::InfiniteDuration(), spin);
  auto run_after = [&pool](absl::Duration gap) {
    FakeStream stream;
    absl::SleepFor(gap);
    pool.Schedule(&stream);
    stream.ran().WaitForNotification();
  };
  for (int i = 0; i < 24; ++i) run_after(absl::Milliseconds(10));
  const uint64_t spins = pool.spins();
  for (int i = 0; i < 8; ++i) run_after(absl::Milliseconds(10));
  EXPECT_EQ(pool.spins(), spins);
  // Back to back: the moving average falls below the spin again.
  for (int i = 0; i < 64; ++i) run_after(absl::ZeroDuration());
  EXPECT_GT(pool.spins(), spins);
}

TEST(SimWorkerPoolTest, ASpinningWorkerLeavesWorkItCannotTakeToIdleOnes) {
  // One worker spins, the other sleeps; the first stream blocks its
  // worker until the second has run, which only the sleeping one can do.
  SimWorkerPool pool(2, absl::InfiniteDuration(), /*spin=*/absl::Seconds(60));
  FakeStream warm;
  pool.Schedule(&warm);
  warm.ran().WaitForNotification();
  FakeStream second;
  FakeStream first([&second] {
    second.ran().WaitForNotificationWithTimeout(absl::Seconds(30));
  });
  pool.Schedule(&first);
  pool.Schedule(&second);
  EXPECT_TRUE(second.ran().WaitForNotificationWithTimeout(absl::Seconds(30)));
  first.ran().WaitForNotification();
  EXPECT_EQ(pool.threads(), 2);
}

TEST(SimWorkerPoolTest, ATimerEndsASpinAtItsDeadline) {
  SimWorkerPool pool(1, absl::InfiniteDuration(), /*spin=*/absl::Seconds(60));
  FakeStream warm;
  pool.Schedule(&warm);
  warm.ran().WaitForNotification();  // the worker spins from here
  FakeStream timed;
  const absl::Time at = absl::Now() + absl::Milliseconds(20);
  pool.ScheduleAt(&timed, at);
  EXPECT_TRUE(timed.ran().WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_GE(timed.last_run(), at);
}

TEST(SimWorkerPoolTest, DestroyingThePoolEndsASpin) {
  const absl::Time start = absl::Now();
  {
    SimWorkerPool pool(1, absl::InfiniteDuration(),
                       /*spin=*/absl::Seconds(60));
    FakeStream stream;
    pool.Schedule(&stream);
    stream.ran().WaitForNotification();
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace weft::runtime
