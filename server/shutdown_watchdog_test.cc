#include "server/shutdown_watchdog.h"

#include <signal.h>
#include <unistd.h>

#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::server {
namespace {

using ::testing::HasSubstr;

class ShutdownWatchdogTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // As weftd does: the signals go to whoever waits for them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
  }

  ShutdownWatchdog::ExitFn Record() {
    return [this](const std::string& why) {
      absl::MutexLock lock(&mu_);
      why_ = why;
      fired_.Notify();
    };
  }

  absl::Mutex mu_;
  std::string why_ ABSL_GUARDED_BY(mu_);
  absl::Notification fired_;
};

TEST_F(ShutdownWatchdogTest, EndsTheProcessAtTheDeadline) {
  ShutdownWatchdog watchdog(absl::Now() + absl::Milliseconds(50), Record());
  ASSERT_TRUE(fired_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::MutexLock lock(&mu_);
  EXPECT_THAT(why_, HasSubstr("drain timeout"));
}

TEST_F(ShutdownWatchdogTest, EndsTheProcessOnASecondSignal) {
  ShutdownWatchdog watchdog(absl::InfiniteFuture(), Record());
  kill(getpid(), SIGINT);
  ASSERT_TRUE(fired_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(why_, "received a second SIGINT");
}

TEST_F(ShutdownWatchdogTest, DisarmedBeforeTheDeadlineDoesNothing) {
  {
    ShutdownWatchdog watchdog(absl::Now() + absl::Milliseconds(300), Record());
    watchdog.Disarm();
  }
  absl::SleepFor(absl::Milliseconds(400));
  EXPECT_FALSE(fired_.HasBeenNotified());
}

}  // namespace
}  // namespace weft::server
