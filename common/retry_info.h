// Retry hints carried on absl::Status.
//
// A status may carry a google.rpc.RetryInfo as a payload under its type URL.
// weftd's ToGrpcStatus (server/grpc_status.h) turns every payload into a
// detail of the google.rpc.Status it sends, so clients read the hint from
// the standard `grpc-status-details-bin` trailer, as gRPC's own status
// helpers do; the client's FromGrpcStatus (client/client.h) turns the
// details back into payloads, where RetryDelayOf reads the hint.
#ifndef WEFT_COMMON_RETRY_INFO_H_
#define WEFT_COMMON_RETRY_INFO_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace weft {

// The type URL of google.rpc.RetryInfo details.
inline constexpr char kRetryInfoTypeUrl[] =
    "type.googleapis.com/google.rpc.RetryInfo";

// `status` with a RetryInfo payload asking to wait `delay` (negative delays
// count as zero). Thread-safe (pure function).
absl::Status WithRetryDelay(absl::Status status, absl::Duration delay);

// The delay of a RetryInfo payload, if `status` carries a readable one.
std::optional<absl::Duration> RetryDelayOf(const absl::Status& status);

}  // namespace weft

#endif  // WEFT_COMMON_RETRY_INFO_H_
