// The one conversion from absl::Status to grpc::Status.
//
// Every RPC handler answers through ToGrpcStatus so that codes and messages
// reach clients unchanged: absl and gRPC share the canonical code numbering,
// and the message is passed through verbatim. Payloads of the status (e.g.
// a RetryInfo from common/retry_info.h) become the details of a
// google.rpc.Status sent as the call's binary error details (the
// `grpc-status-details-bin` trailer), each an Any under the payload's type URL.
#ifndef WEFT_SERVER_GRPC_STATUS_H_
#define WEFT_SERVER_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace weft::server {

// Thread-safe (pure function).
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace weft::server

#endif  // WEFT_SERVER_GRPC_STATUS_H_
