#include "server/job_state.h"

#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::server {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::IsOk;
using ::weft::testing::StatusIs;

constexpr JobState kAll[] = {JobState::kQueued, JobState::kRunning,
                             JobState::kSucceeded, JobState::kFailed,
                             JobState::kCancelled};

TEST(JobStateTest, OnlyTheLifecycleMovesAreLegal) {
  int legal = 0;
  for (JobState from : kAll) {
    for (JobState to : kAll) {
      const absl::Status s = CheckTransition(from, to);
      if (s.ok()) {
        ++legal;
        EXPECT_FALSE(IsTerminal(from)) << from << " -> " << to;
      } else {
        EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition,
                                HasSubstr(std::string(JobStateName(to)))));
      }
    }
  }
  // QUEUED -> RUNNING | CANCELLED | FAILED; RUNNING -> the three ends.
  EXPECT_EQ(legal, 6);
  EXPECT_THAT(CheckTransition(JobState::kQueued, JobState::kRunning), IsOk());
  EXPECT_FALSE(CheckTransition(JobState::kQueued, JobState::kSucceeded).ok());
}

TEST(JobStateTest, NamesAreTheWireNames) {
  std::ostringstream os;
  os << JobState::kCancelled;
  EXPECT_EQ(os.str(), "CANCELLED");
  EXPECT_EQ(JobStateName(JobState::kQueued), "QUEUED");
  EXPECT_TRUE(IsTerminal(JobState::kFailed));
  EXPECT_FALSE(IsTerminal(JobState::kRunning));
}

}  // namespace
}  // namespace weft::server
