#include "server/grpc_status.h"

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/retry_info.h"
#include "gmock/gmock.h"
#include "google/rpc/retry_info.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"

namespace weft::server {
namespace {

TEST(ToGrpcStatusTest, OkIsOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(ToGrpcStatusTest, KeepsCodeAndMessage) {
  struct Case {
    absl::Status in;
    grpc::StatusCode want;
  };
  const Case cases[] = {
      {absl::InvalidArgumentError("graph.nodes[1].op: unknown op 'foo'"),
       grpc::StatusCode::INVALID_ARGUMENT},
      {absl::NotFoundError("no job j-1"), grpc::StatusCode::NOT_FOUND},
      {absl::FailedPreconditionError("job is RUNNING"),
       grpc::StatusCode::FAILED_PRECONDITION},
      {absl::ResourceExhaustedError("queue full"),
       grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::UnavailableError("draining"), grpc::StatusCode::UNAVAILABLE},
      {absl::UnimplementedError("policy"), grpc::StatusCode::UNIMPLEMENTED},
      {absl::CancelledError("cancelled"), grpc::StatusCode::CANCELLED},
      {absl::DeadlineExceededError("late"),
       grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::InternalError("bug"), grpc::StatusCode::INTERNAL},
  };
  for (const Case& c : cases) {
    grpc::Status out = ToGrpcStatus(c.in);
    EXPECT_EQ(out.error_code(), c.want) << c.in;
    EXPECT_EQ(out.error_message(), std::string(c.in.message()));
  }
}

TEST(ToGrpcStatusTest, NoPayloadMeansNoDetails) {
  grpc::Status out = ToGrpcStatus(absl::ResourceExhaustedError("full"));
  EXPECT_TRUE(out.error_details().empty());
}

TEST(ToGrpcStatusTest, RetryHintBecomesRetryInfoDetail) {
  absl::Status in =
      WithRetryDelay(absl::ResourceExhaustedError("admission queue is full"),
                     absl::Milliseconds(1250));
  grpc::Status out = ToGrpcStatus(in);
  EXPECT_EQ(out.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(out.error_message(), "admission queue is full");

  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(out.error_details()));
  EXPECT_EQ(details.code(), 8);
  EXPECT_EQ(details.message(), "admission queue is full");
  ASSERT_EQ(details.details_size(), 1);
  EXPECT_EQ(details.details(0).type_url(),
            "type.googleapis.com/google.rpc.RetryInfo");
  google::rpc::RetryInfo info;
  ASSERT_TRUE(details.details(0).UnpackTo(&info));
  EXPECT_EQ(info.retry_delay().seconds(), 1);
  EXPECT_EQ(info.retry_delay().nanos(), 250'000'000);
}

TEST(RetryHintTest, RoundTripsAndClampsNegative) {
  absl::Status s =
      WithRetryDelay(absl::UnavailableError("x"), absl::Milliseconds(40));
  EXPECT_EQ(RetryDelayOf(s), absl::Milliseconds(40));
  EXPECT_EQ(RetryDelayOf(
                WithRetryDelay(absl::UnavailableError("x"), absl::Seconds(-3))),
            absl::ZeroDuration());
  EXPECT_EQ(RetryDelayOf(absl::UnavailableError("x")), std::nullopt);
  // OK statuses carry no payloads.
  EXPECT_EQ(RetryDelayOf(WithRetryDelay(absl::OkStatus(), absl::Seconds(1))),
            std::nullopt);
}

}  // namespace
}  // namespace weft::server
