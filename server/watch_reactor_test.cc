#include "server/watch_reactor.h"

#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace weft::server {
namespace {

// The reactors are covered end to end by scheduler_service_test (WatchJob);
// here the waker alone.

TEST(WatchWakerTest, RunsPostsInOrderOnItsOwnThread) {
  absl::Mutex mu;
  std::vector<int> ran;
  std::vector<std::thread::id> threads;
  {
    WatchWaker waker;
    for (int i = 0; i < 100; ++i) {
      waker.Post([&, i] {
        absl::MutexLock lock(&mu);
        ran.push_back(i);
        threads.push_back(std::this_thread::get_id());
      });
    }
  }  // runs what is queued, then stops
  ASSERT_EQ(ran.size(), 100u);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(ran[i], i);
    EXPECT_NE(threads[i], std::this_thread::get_id());
    EXPECT_EQ(threads[i], threads[0]);
  }
}

TEST(WatchWakerTest, PostNeverWaitsForTheWorkItPosts) {
  absl::Notification release;
  absl::Notification second_ran;
  WatchWaker waker;
  waker.Post([&] { release.WaitForNotification(); });
  waker.Post([&] { second_ran.Notify(); });  // queued behind the first
  EXPECT_FALSE(second_ran.HasBeenNotified());
  release.Notify();
  second_ran.WaitForNotification();
}

}  // namespace
}  // namespace weft::server
