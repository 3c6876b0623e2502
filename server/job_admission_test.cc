#include "server/job_admission.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/retry_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/job_queue.h"
#include "testing/status_matchers.h"

namespace weft::server {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::IsOk;
using ::weft::testing::StatusIs;

AdmissionControl::Limits Limits(int max_queued, int per_tenant = 0) {
  AdmissionControl::Limits limits;
  limits.max_queued_jobs = max_queued;
  limits.max_queued_per_tenant = per_tenant;
  limits.min_retry_delay = absl::Milliseconds(10);
  limits.max_retry_delay = absl::Seconds(30);
  return limits;
}

TEST(AdmissionControlTest, AdmitsUntilTheQueueIsFull) {
  AdmissionControl admission(Limits(2));
  JobQueue queue;
  EXPECT_THAT(admission.Check("t", queue, 0), IsOk());
  queue.Push({"a", "t", 0, 1});
  EXPECT_THAT(admission.Check("t", queue, 0), IsOk());
  queue.Push({"b", "u", 0, 2});
  const absl::Status full = admission.Check("v", queue, 3);
  EXPECT_THAT(full, StatusIs(absl::StatusCode::kResourceExhausted,
                             HasSubstr("2 jobs queued, 3 running")));
  EXPECT_TRUE(RetryDelayOf(full).has_value());
}

TEST(AdmissionControlTest, BoundsEachTenantsQueuedJobs) {
  AdmissionControl admission(Limits(10, /*per_tenant=*/1));
  JobQueue queue;
  queue.Push({"a", "t", 0, 1});
  EXPECT_THAT(admission.Check("t", queue, 0),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("tenant 't' has 1 jobs queued")));
  EXPECT_THAT(admission.Check("u", queue, 0), IsOk());
}

TEST(AdmissionControlTest, StopAcceptingRefusesEverything) {
  AdmissionControl admission(Limits(10));
  admission.StopAccepting();
  EXPECT_THAT(admission.Check("t", JobQueue(), 0),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST(AdmissionControlTest, RetryDelayFollowsRunTimesWithinBounds) {
  AdmissionControl admission(Limits(10));
  EXPECT_EQ(admission.RetryDelay(1, 4), absl::Milliseconds(100));
  admission.RecordRunTime(absl::Milliseconds(400));
  EXPECT_EQ(admission.RetryDelay(1, 4), absl::Milliseconds(100));
  EXPECT_EQ(admission.RetryDelay(3, 4), absl::Milliseconds(300));
  EXPECT_EQ(admission.RetryDelay(1, 0), absl::Milliseconds(400));
  admission.RecordRunTime(absl::Milliseconds(1200));  // (7 * 400 + 1200) / 8
  EXPECT_EQ(admission.RetryDelay(1, 1), absl::Milliseconds(500));
  EXPECT_EQ(admission.RetryDelay(1000, 1), absl::Seconds(30));
  admission.RecordRunTime(absl::Microseconds(1));
  EXPECT_GE(admission.RetryDelay(1, 1000), absl::Milliseconds(10));
}

}  // namespace
}  // namespace weft::server
