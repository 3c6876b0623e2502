#include "server/planning_limiter.h"

#include <optional>
#include <utility>

#include "common/retry_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::server {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

TEST(PlanningLimiterTest, LeasesHoldUnitsUntilDestroyed) {
  PlanningLimiter limiter(100);
  {
    absl::StatusOr<PlanningLimiter::Lease> a = limiter.TryAcquire(60);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(limiter.in_use(), 60);
    absl::StatusOr<PlanningLimiter::Lease> b = limiter.TryAcquire(50);
    ASSERT_THAT(b.status(), StatusIs(absl::StatusCode::kResourceExhausted,
                                     HasSubstr("--max_planning_nodes=100")));
    EXPECT_TRUE(RetryDelayOf(b.status()).has_value());
    absl::StatusOr<PlanningLimiter::Lease> c = limiter.TryAcquire(40);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(limiter.in_use(), 100);
    PlanningLimiter::Lease moved = *std::move(c);
    EXPECT_EQ(limiter.in_use(), 100);
  }
  EXPECT_EQ(limiter.in_use(), 0);
}

TEST(PlanningLimiterTest, EmptyGraphsTakeOneUnit) {
  PlanningLimiter limiter(1);
  absl::StatusOr<PlanningLimiter::Lease> a = limiter.TryAcquire(0);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(limiter.in_use(), 1);
  EXPECT_FALSE(limiter.TryAcquire(0).ok());
}

TEST(PlanningLimiterTest, MoreThanTheCapacityIsInvalid) {
  PlanningLimiter limiter(10);
  absl::StatusOr<PlanningLimiter::Lease> a = limiter.TryAcquire(11);
  ASSERT_THAT(a.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("graph.nodes")));
  EXPECT_EQ(limiter.in_use(), 0);
}

}  // namespace
}  // namespace weft::server
