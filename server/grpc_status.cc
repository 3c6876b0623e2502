#include "server/grpc_status.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "google/rpc/status.pb.h"

namespace weft::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode both follow google.rpc.Code.
  const auto code = static_cast<grpc::StatusCode>(status.code());
  std::string message(status.message());
  google::rpc::Status details;
  status.ForEachPayload(
      [&details](absl::string_view type_url, const absl::Cord& payload) {
        google::protobuf::Any* any = details.add_details();
        any->set_type_url(std::string(type_url));
        any->set_value(std::string(payload));
      });
  if (details.details_size() == 0) return grpc::Status(code, message);
  details.set_code(static_cast<int32_t>(status.code()));
  details.set_message(message);
  return grpc::Status(code, std::move(message), details.SerializeAsString());
}

}  // namespace weft::server
