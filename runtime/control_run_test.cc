#include "runtime/control_run.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using scheduler::ControlSpec;
using scheduler::DType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

TEST(ConditionHoldsTest, ReadsElementZeroOfEveryDtype) {
  char data[8] = {};
  EXPECT_FALSE(ConditionHolds(DType::kBytes, data));
  EXPECT_FALSE(ConditionHolds(DType::kFloat64, data));
  const float half = 0.5f;
  std::memcpy(data, &half, sizeof(half));
  EXPECT_TRUE(ConditionHolds(DType::kFloat32, data));
  const int64_t big = int64_t{1} << 40;  // zero in its low 32 bits
  std::memcpy(data, &big, sizeof(big));
  EXPECT_TRUE(ConditionHolds(DType::kInt64, data));
  EXPECT_FALSE(ConditionHolds(DType::kInt32, data));
  EXPECT_EQ(SelectorValue(DType::kInt64, data), big);
  const int32_t minus = -3;
  std::memcpy(data, &minus, sizeof(minus));
  EXPECT_EQ(SelectorValue(DType::kInt32, data), -3);
}

// A fake job around a run: bodies "run" when the test says so, and each
// body run may change the condition.
class ControlRunTest : public ::testing::Test {
 protected:
  void Make(ControlSpec::Kind kind, uint32_t max_iterations, int bodies) {
    auto control = std::make_shared<ControlSpec>();
    control->kind = kind;
    control->condition = 0;
    control->max_iterations = max_iterations;
    for (int b = 0; b < bodies; ++b) control->bodies.push_back(nullptr);
    node_.name = "n";
    node_.control = control;
    ControlRun::Hooks hooks;
    hooks.start_body = [this](int body) -> absl::StatusOr<uint64_t> {
      started_.push_back(body);
      return static_cast<uint64_t>(100 + started_.size());
    };
    hooks.cancel_body = [this](uint64_t job, absl::Status) {
      cancelled_.push_back(job);
    };
    hooks.condition = [this] { return reinterpret_cast<const char*>(&value_); };
    hooks.report = [this](ControlEventKind kind, int64_t value,
                          const std::string&) { reports_.push_back(value); };
    hooks.finished = [this](absl::Status status) {
      ++finished_;
      status_ = status;
    };
    run_ = std::make_unique<ControlRun>(node_, DType::kInt32, hooks);
  }

  scheduler::NodeSpec node_;
  std::unique_ptr<ControlRun> run_;
  int32_t value_ = 0;
  std::vector<int> started_;
  std::vector<uint64_t> cancelled_;
  std::vector<int64_t> reports_;
  int finished_ = 0;
  absl::Status status_ = absl::UnknownError("not finished");
};

TEST_F(ControlRunTest, LoopIteratesWhileTheConditionHolds) {
  Make(ControlSpec::Kind::kWhile, 10, 1);
  value_ = 1;
  run_->Start();
  run_->OnBodyDone(absl::OkStatus());
  run_->OnBodyDone(absl::OkStatus());
  EXPECT_EQ(finished_, 0);
  value_ = 0;
  run_->OnBodyDone(absl::OkStatus());
  EXPECT_EQ(finished_, 1);
  EXPECT_OK(status_);
  EXPECT_THAT(reports_, ElementsAre(1, 2, 3));
  EXPECT_EQ(run_->iterations(), 3);
}

TEST_F(ControlRunTest, LoopFailsBeyondMaxIterations) {
  Make(ControlSpec::Kind::kWhile, 2, 1);
  value_ = 1;
  run_->Start();
  run_->OnBodyDone(absl::OkStatus());
  run_->OnBodyDone(absl::OkStatus());
  EXPECT_THAT(status_, StatusIs(absl::StatusCode::kFailedPrecondition,
                                HasSubstr("loop 'n' would exceed "
                                          "max_iterations 2")));
  EXPECT_EQ(started_.size(), 2u);
}

TEST_F(ControlRunTest, BodyFailureNamesTheIteration) {
  Make(ControlSpec::Kind::kWhile, 5, 1);
  value_ = 1;
  run_->Start();
  run_->OnBodyDone(absl::InternalError("boom"));
  EXPECT_THAT(status_, StatusIs(absl::StatusCode::kInternal,
                                HasSubstr("loop 'n' iteration 1: boom")));
}

TEST_F(ControlRunTest, StopCancelsTheBodyAndEndsWithTheReason) {
  Make(ControlSpec::Kind::kWhile, 5, 1);
  value_ = 1;
  run_->Start();
  run_->Stop(absl::DeadlineExceededError("deadline"));
  EXPECT_THAT(cancelled_, ElementsAre(101u));
  EXPECT_EQ(finished_, 0);
  run_->OnBodyDone(absl::DeadlineExceededError("deadline"));
  EXPECT_EQ(finished_, 1);
  EXPECT_THAT(status_, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(started_.size(), 1u);
}

TEST_F(ControlRunTest, StopAfterASuccessfulBodyStartsNoMore) {
  Make(ControlSpec::Kind::kWhile, 5, 1);
  value_ = 1;
  run_->Start();
  run_->Stop(absl::CancelledError("cancelled"));
  run_->OnBodyDone(absl::OkStatus());
  EXPECT_THAT(status_, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(started_.size(), 1u);
}

TEST_F(ControlRunTest, RelayedIterationsCountAsTheRunsOwn) {
  Make(ControlSpec::Kind::kWhile, 10, 1);
  value_ = 1;
  run_->Start();
  // Iterations 2..5 begun outside the run, with a progress report between.
  run_->Progress(3);
  run_->OnBodyDone(absl::OkStatus(), 4);
  EXPECT_EQ(run_->iterations(), 6);  // 5 relayed up to, then the 6th
  EXPECT_THAT(reports_, ElementsAre(1, 3, 5, 6));
  // The bound counts the relayed iterations: 4 more reach it.
  run_->OnBodyDone(absl::OkStatus(), 4);
  EXPECT_THAT(status_, StatusIs(absl::StatusCode::kFailedPrecondition,
                                HasSubstr("after 10 iterations")));
  EXPECT_EQ(started_.size(), 2u);
}

TEST_F(ControlRunTest, AnIterationIsReportedOnce) {
  Make(ControlSpec::Kind::kWhile, 10, 1);
  value_ = 1;
  run_->Start();
  // The relay's latest (5) is also the count it ends with.
  run_->Progress(5);
  run_->Progress(4);  // older than what was reported: nothing
  value_ = 0;
  run_->OnBodyDone(absl::OkStatus(), 4);
  EXPECT_EQ(run_->iterations(), 5);
  EXPECT_THAT(reports_, ElementsAre(1, 5));
  EXPECT_TRUE(status_.ok()) << status_;
}

TEST_F(ControlRunTest, StopInterruptsTheRelay) {
  Make(ControlSpec::Kind::kWhile, 10, 1);
  ControlRun::Hooks hooks;
  int interrupts = 0;
  hooks.start_body = [this](int body) -> absl::StatusOr<uint64_t> {
    started_.push_back(body);
    return uint64_t{0};  // nothing to cancel: the relay stops instead
  };
  hooks.cancel_body = [this](uint64_t job, absl::Status) {
    cancelled_.push_back(job);
  };
  hooks.interrupt = [&interrupts] { ++interrupts; };
  hooks.condition = [this] { return reinterpret_cast<const char*>(&value_); };
  hooks.report = [this](ControlEventKind, int64_t value, const std::string&) {
    reports_.push_back(value);
  };
  hooks.finished = [this](absl::Status status) {
    ++finished_;
    status_ = status;
  };
  run_ = std::make_unique<ControlRun>(node_, DType::kInt32, hooks);
  value_ = 1;
  run_->Start();
  run_->Stop(absl::CancelledError("cancelled"));
  EXPECT_EQ(interrupts, 1);
  EXPECT_TRUE(cancelled_.empty());
  // The relay hands back after two more iterations.
  run_->OnBodyDone(absl::OkStatus(), 2);
  EXPECT_THAT(status_, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(run_->iterations(), 3);
  EXPECT_EQ(started_.size(), 1u);
}

TEST_F(ControlRunTest, CaseRunsOneBranchOrNone) {
  Make(ControlSpec::Kind::kCase, 0, 3);
  value_ = 2;
  run_->Start();
  EXPECT_THAT(started_, ElementsAre(2));
  run_->OnBodyDone(absl::OkStatus());
  EXPECT_OK(status_);

  Make(ControlSpec::Kind::kCase, 0, 3);
  started_.clear();
  reports_.clear();
  value_ = 3;
  run_->Start();
  EXPECT_TRUE(started_.empty());
  EXPECT_THAT(reports_, ElementsAre(-1));
  EXPECT_OK(status_);
}

}  // namespace
}  // namespace weft::runtime
