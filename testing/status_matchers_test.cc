#include "testing/status_matchers.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatusMatchersTest, IsOkMatchesOkStatusesOnly) {
  EXPECT_THAT(absl::OkStatus(), IsOk());
  EXPECT_THAT(absl::StatusOr<int>(3), IsOk());
  EXPECT_THAT(absl::InternalError("x"), Not(IsOk()));
  EXPECT_THAT(absl::StatusOr<int>(absl::NotFoundError("x")), Not(IsOk()));
  EXPECT_OK(absl::OkStatus());
}

TEST(StatusMatchersTest, StatusIsChecksCodeAndMessage) {
  const absl::Status s = absl::InvalidArgumentError("graph.nodes: empty");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("graph.nodes")));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kNotFound)));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr("buffers"))));
  const absl::StatusOr<std::string> so = absl::NotFoundError("job 'x'");
  EXPECT_THAT(so, StatusIs(absl::StatusCode::kNotFound, "job 'x'"));
  EXPECT_THAT(absl::OkStatus(), StatusIs(absl::StatusCode::kOk));
}

TEST(StatusMatchersTest, ExplainsAMismatch) {
  ::testing::Matcher<const absl::Status&> m =
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("job"));
  ::testing::StringMatchResultListener listener;
  EXPECT_FALSE(m.MatchAndExplain(absl::InternalError("boom"), &listener));
  EXPECT_THAT(listener.str(), HasSubstr("INTERNAL"));
  std::string described = ::testing::DescribeMatcher<const absl::Status&>(m);
  EXPECT_THAT(described, HasSubstr("NOT_FOUND"));
}

}  // namespace
}  // namespace weft::testing
