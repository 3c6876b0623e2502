#include "server/grpc_status.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
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

}  // namespace
}  // namespace weft::server
