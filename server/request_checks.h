// What the service checks and answers about a request before it acts:
// its bytes, job id, tenant, deadline and control mode, and the statuses
// of a rejected submission or of a plan too large to send.
#ifndef WEFT_SERVER_REQUEST_CHECKS_H_
#define WEFT_SERVER_REQUEST_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "runtime/backend.h"
#include "runtime/executor.h"
#include "scheduler/graph.h"
#include "weft/v1/weft.pb.h"

namespace weft::server {

// The metadata key that names a call's tenant.
inline constexpr char kTenantMetadataKey[] = "weft-tenant";

// INVALID_ARGUMENT for an empty job id or one much longer than weftd's
// own ("j-" and 16 hex digits), without echoing it.
absl::Status CheckJobId(absl::string_view id);

// The tenant the call's metadata names ("" when none); INVALID_ARGUMENT
// for one longer than `max_bytes` or with characters other than letters,
// digits, '-', '_' and '.'.
absl::StatusOr<std::string> TenantOf(const grpc::ServerContextBase& context,
                                     int max_bytes);

// The status of a rejected submission, with the retry hint also as
// `grpc-retry-pushback-ms` for clients using gRPC's built-in retries.
grpc::Status Rejected(grpc::ServerContextBase* context,
                      const absl::Status& status);

// INVALID_ARGUMENT: the plan of `nodes` nodes takes (at least, where
// `estimate`) `bytes`, above the largest answer, `limit`.
absl::Status PlanTooLarge(int64_t nodes, int64_t bytes, bool estimate,
                          int64_t limit);

absl::Time DeadlineOf(const grpc::ServerContextBase& context);

// Nodes of `nodes` and of every body inside them.
int64_t CountNodes(
    const google::protobuf::RepeatedPtrField<weft::v1::Node>& nodes);

// CONTROL_DEVICE needs a backend that runs loops by itself
// (Backend::supports_device_loops): FAILED_PRECONDITION otherwise, for a
// graph with control nodes.
absl::Status CheckControlMode(const scheduler::Graph& graph,
                              const weft::v1::ScheduleOptions& options,
                              const runtime::Backend* backend);
runtime::ControlMode ControlModeOf(const weft::v1::ScheduleOptions& options);

// `bytes` as a `Request`; INVALID_ARGUMENT if they are not one.
template <typename Request>
grpc::Status Parse(const grpc::ByteBuffer& bytes, Request* request) {
  grpc::ByteBuffer copy(bytes);  // shares the slices; parsing consumes it
  if (!grpc::SerializationTraits<Request>::Deserialize(&copy, request).ok()) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("request: not a ", Request::descriptor()->full_name(),
                     " in protobuf's wire format; nothing was done"));
  }
  return grpc::Status::OK;
}

}  // namespace weft::server

#endif  // WEFT_SERVER_REQUEST_CHECKS_H_
