#include "common/retry_info.h"

#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "absl/types/optional.h"
#include "google/rpc/retry_info.pb.h"

namespace weft {

absl::Status WithRetryDelay(absl::Status status, absl::Duration delay) {
  if (status.ok()) return status;
  if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
  google::rpc::RetryInfo info;
  const int64_t nanos = absl::ToInt64Nanoseconds(delay);
  info.mutable_retry_delay()->set_seconds(nanos / 1'000'000'000);
  info.mutable_retry_delay()->set_nanos(
      static_cast<int32_t>(nanos % 1'000'000'000));
  status.SetPayload(kRetryInfoTypeUrl, absl::Cord(info.SerializeAsString()));
  return status;
}

std::optional<absl::Duration> RetryDelayOf(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kRetryInfoTypeUrl);
  if (!payload) return std::nullopt;
  google::rpc::RetryInfo info;
  if (!info.ParseFromString(std::string(*payload))) return std::nullopt;
  return absl::Seconds(info.retry_delay().seconds()) +
         absl::Nanoseconds(info.retry_delay().nanos());
}

}  // namespace weft
