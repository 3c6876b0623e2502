// gMock matchers for absl::Status and absl::StatusOr<T>.
//
//   EXPECT_THAT(status, IsOk());
//   EXPECT_THAT(BuildGraph(proto, limits),
//               StatusIs(absl::StatusCode::kInvalidArgument,
//                        HasSubstr("graph.nodes[0].name")));
//   ASSERT_OK(status_or);  // prints the status when it is not OK
//
// StatusIs(code) matches any message; StatusIs(code, m) also matches the
// message (as std::string) with `m`. A StatusOr is matched by its status.
#ifndef WEFT_TESTING_STATUS_MATCHERS_H_
#define WEFT_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::testing {
namespace internal {

inline const absl::Status& StatusOf(const absl::Status& status) {
  return status;
}
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// What StatusIs checks, for any status type.
class StatusCheck {
 public:
  StatusCheck(absl::StatusCode code,
              ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  bool Matches(const absl::Status& status,
               ::testing::MatchResultListener* listener) const {
    if (status.code() != code_) {
      *listener << "whose code is " << absl::StatusCodeToString(status.code());
      return false;
    }
    const std::string message(status.message());
    ::testing::StringMatchResultListener inner;
    if (!message_.MatchAndExplain(message, &inner)) {
      *listener << "whose message \"" << message << "\" does not match";
      if (!inner.str().empty()) *listener << ", " << inner.str();
      return false;
    }
    return true;
  }

  void Describe(std::ostream* os, bool negated) const {
    *os << (negated ? "has a code other than " : "has code ")
        << absl::StatusCodeToString(code_)
        << (negated ? " or a message that " : " and a message that ");
    if (negated) {
      message_.DescribeNegationTo(os);
    } else {
      message_.DescribeTo(os);
    }
  }

 private:
  absl::StatusCode code_;
  ::testing::Matcher<const std::string&> message_;
};

template <typename StatusType>
class StatusIsImpl : public ::testing::MatcherInterface<StatusType> {
 public:
  explicit StatusIsImpl(StatusCheck check) : check_(std::move(check)) {}
  bool MatchAndExplain(
      StatusType value,
      ::testing::MatchResultListener* listener) const override {
    return check_.Matches(StatusOf(value), listener);
  }
  void DescribeTo(std::ostream* os) const override {
    check_.Describe(os, false);
  }
  void DescribeNegationTo(std::ostream* os) const override {
    check_.Describe(os, true);
  }

 private:
  StatusCheck check_;
};

class StatusIsMatcher {
 public:
  explicit StatusIsMatcher(StatusCheck check) : check_(std::move(check)) {}
  template <typename StatusType>
  operator ::testing::Matcher<StatusType>() const {  // NOLINT
    return ::testing::Matcher<StatusType>(
        new StatusIsImpl<const StatusType&>(check_));
  }

 private:
  StatusCheck check_;
};

template <typename StatusType>
class IsOkImpl : public ::testing::MatcherInterface<StatusType> {
 public:
  bool MatchAndExplain(
      StatusType value,
      ::testing::MatchResultListener* listener) const override {
    const absl::Status& status = StatusOf(value);
    if (status.ok()) return true;
    *listener << "which is " << status;
    return false;
  }
  void DescribeTo(std::ostream* os) const override { *os << "is OK"; }
  void DescribeNegationTo(std::ostream* os) const override {
    *os << "is not OK";
  }
};

class IsOkMatcher {
 public:
  template <typename StatusType>
  operator ::testing::Matcher<StatusType>() const {  // NOLINT
    return ::testing::Matcher<StatusType>(new IsOkImpl<const StatusType&>());
  }
};

}  // namespace internal

inline internal::StatusIsMatcher StatusIs(
    absl::StatusCode code, ::testing::Matcher<const std::string&> message) {
  return internal::StatusIsMatcher(
      internal::StatusCheck(code, std::move(message)));
}
inline internal::StatusIsMatcher StatusIs(absl::StatusCode code) {
  return StatusIs(code, ::testing::_);
}
inline internal::IsOkMatcher IsOk() { return internal::IsOkMatcher(); }

}  // namespace weft::testing

#define EXPECT_OK(expr) EXPECT_THAT((expr), ::weft::testing::IsOk())
#define ASSERT_OK(expr) ASSERT_THAT((expr), ::weft::testing::IsOk())

#endif  // WEFT_TESTING_STATUS_MATCHERS_H_
