#include "server/call_workers.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace weft::server {
namespace {

TEST(CallWorkersTest, RunsEveryPieceOfWorkOnItsOwnThreads) {
  absl::Mutex mu;
  std::set<std::thread::id> threads;
  std::atomic<int> done{0};
  {
    CallWorkers workers(2);
    for (int i = 0; i < 100; ++i) {
      workers.Run([&] {
        {
          absl::MutexLock lock(&mu);
          threads.insert(std::this_thread::get_id());
        }
        done.fetch_add(1);
      });
    }
  }  // the destructor runs what is queued
  EXPECT_EQ(done.load(), 100);
  EXPECT_LE(threads.size(), 2u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
}

TEST(CallWorkersTest, ABlockedWorkerDoesNotStopTheOthers) {
  CallWorkers workers(2);
  absl::Notification release, second_ran;
  workers.Run([&] { release.WaitForNotification(); });
  workers.Run([&] { second_ran.Notify(); });
  EXPECT_TRUE(second_ran.WaitForNotificationWithTimeout(absl::Seconds(30)));
  release.Notify();
}

TEST(CallWorkersTest, CountsWorkNotYetStarted) {
  absl::Notification release;
  CallWorkers workers(1);
  absl::Notification started;
  workers.Run([&] {
    started.Notify();
    release.WaitForNotification();
  });
  started.WaitForNotification();
  workers.Run([] {});
  workers.Run([] {});
  EXPECT_EQ(workers.queued(), 2u);
  release.Notify();
}

}  // namespace
}  // namespace weft::server
