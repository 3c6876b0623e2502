#include "runtime/sim/sim_stream.h"

#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SimStreamTest, RunsItemsInOrder) {
  SimStream stream("s");
  absl::Mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) {
    if (i % 2 == 0) {
      stream.Enqueue([&, i] {
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

TEST(SimStreamTest, FirstErrorSkipsLaterWorkAndReachesCallbacks) {
  SimStream stream("device 0 stream 7");
  bool later_ran = false;
  std::vector<absl::Status> seen;
  absl::Notification done;
  stream.EnqueueCallback([&](absl::Status s) { seen.push_back(s); });
  stream.Enqueue([] { return absl::InternalError("first"); });
  stream.Enqueue([] { return absl::DataLossError("second"); });
  stream.Enqueue([&] {
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

TEST(SimStreamTest, AwaitCompleteBlocksUntilTheItemRan) {
  SimStream stream("s");
  absl::Notification release;
  stream.Enqueue([&] {
    release.WaitForNotification();
    return absl::OkStatus();
  });
  const uint64_t seq = stream.Enqueue([] { return absl::OkStatus(); });
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

TEST(SimStreamTest, OccupyTakesAtLeastTheDuration) {
  SimStream stream("s");
  absl::Duration took;
  stream.Enqueue([&] {
    const absl::Time start = absl::Now();
    stream.Occupy(absl::Milliseconds(5));
    took = absl::Now() - start;
    return absl::OkStatus();
  });
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_GE(took, absl::Milliseconds(5));
  EXPECT_LT(took, absl::Milliseconds(500));
}

TEST(SimStreamTest, ShutdownDropsPendingWorkAndWakesWaiters) {
  auto stream = std::make_unique<SimStream>("s");
  absl::Notification started;
  stream->Enqueue([&] {
    started.Notify();
    stream->Occupy(absl::Seconds(30));  // cut short by the shutdown
    return absl::OkStatus();
  });
  bool callback_ran = false;
  const uint64_t seq =
      stream->EnqueueCallback([&](absl::Status) { callback_ran = true; });
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
