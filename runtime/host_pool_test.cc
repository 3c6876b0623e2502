#include "runtime/host_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

TEST(HostPoolTest, RunsEveryTask) {
  std::atomic<int> ran{0};
  {
    HostPool pool(2);
    EXPECT_EQ(pool.threads(), 2);
    for (int i = 0; i < 100; ++i) pool.Submit([&] { ++ran; });
  }  // destruction drains
  EXPECT_EQ(ran.load(), 100);
}

TEST(HostPoolTest, TasksRunConcurrentlyOnPoolThreads) {
  HostPool pool(2);
  absl::Notification a_started, b_started;
  // Each task waits for the other: only two threads running at once can
  // finish both.
  pool.Submit([&] {
    a_started.Notify();
    EXPECT_TRUE(b_started.WaitForNotificationWithTimeout(absl::Seconds(20)));
  });
  pool.Submit([&] {
    b_started.Notify();
    EXPECT_TRUE(a_started.WaitForNotificationWithTimeout(absl::Seconds(20)));
  });
  EXPECT_TRUE(a_started.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_TRUE(b_started.WaitForNotificationWithTimeout(absl::Seconds(20)));
}

TEST(HostPoolTest, ZeroThreadsRunsInline) {
  HostPool pool(0);
  EXPECT_EQ(pool.threads(), 0);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on;
  pool.Submit([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, caller);
  EXPECT_EQ(pool.pending(), 0);
}

TEST(HostPoolTest, PendingCountsQueuedAndRunningTasks) {
  HostPool pool(1);
  absl::Notification release, started;
  pool.Submit([&] {
    started.Notify();
    release.WaitForNotification();
  });
  pool.Submit([] {});
  started.WaitForNotification();
  EXPECT_EQ(pool.pending(), 2);
  release.Notify();
}

}  // namespace
}  // namespace weft::runtime
