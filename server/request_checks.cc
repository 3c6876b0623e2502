#include "server/request_checks.h"

#include "absl/strings/ascii.h"
#include "common/retry_info.h"
#include "server/grpc_status.h"

namespace weft::server {

// Job ids are weftd's own ("j-" and 16 hex digits); anything much longer
// is refused without being echoed.
constexpr size_t kMaxJobIdBytes = 128;

absl::Status CheckJobId(absl::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError("job_id: empty");
  if (id.size() > kMaxJobIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job_id: ", id.size(), " bytes exceed the limit of ", kMaxJobIdBytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TenantOf(const grpc::ServerContextBase& context,
                                     int max_bytes) {
  auto it = context.client_metadata().find(kTenantMetadataKey);
  if (it == context.client_metadata().end()) return std::string();
  std::string tenant(it->second.data(), it->second.size());
  if (static_cast<int>(tenant.size()) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        kTenantMetadataKey, " metadata: longer than ", max_bytes, " bytes"));
  }
  for (char c : tenant) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') {
      return absl::InvalidArgumentError(absl::StrCat(
          kTenantMetadataKey, " metadata: '", tenant,
          "' has characters other than letters, digits, '-', '_' and '.'"));
    }
  }
  return tenant;
}

grpc::Status Rejected(grpc::ServerContextBase* context,
                      const absl::Status& status) {
  if (std::optional<absl::Duration> delay = RetryDelayOf(status)) {
    context->AddTrailingMetadata(
        "grpc-retry-pushback-ms",
        absl::StrCat(absl::ToInt64Milliseconds(*delay)));
  }
  return ToGrpcStatus(status);
}

absl::Status PlanTooLarge(int64_t nodes, int64_t bytes, bool estimate,
                          int64_t limit) {
  return absl::InvalidArgumentError(absl::StrCat(
      "graph.nodes: the plan of ", nodes, " nodes takes ",
      estimate ? "at least " : "", bytes,
      " bytes, more than the largest answer weftd sends (", limit,
      " bytes, --max_message_bytes); submit the graph as a job, which "
      "returns no plan, or plan a part of it"));
}

absl::Time DeadlineOf(const grpc::ServerContextBase& context) {
  return absl::FromChrono(context.deadline());
}

int64_t CountNodes(
    const google::protobuf::RepeatedPtrField<weft::v1::Node>& nodes) {
  int64_t n = nodes.size();
  for (const weft::v1::Node& node : nodes) {
    if (node.has_while_loop()) n += CountNodes(node.while_loop().body());
    if (node.has_case_of()) {
      for (const weft::v1::Branch& branch : node.case_of().branches()) {
        n += CountNodes(branch.nodes());
      }
    }
  }
  return n;
}

absl::Status CheckControlMode(const scheduler::Graph& graph,
                              const weft::v1::ScheduleOptions& options,
                              const runtime::Backend* backend) {
  if (options.control_mode() != weft::v1::CONTROL_DEVICE ||
      !graph.has_control() ||
      (backend != nullptr && backend->supports_device_loops())) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      "options.control_mode: CONTROL_DEVICE needs devices that evaluate "
      "conditions themselves; this daemon's devices evaluate them on the "
      "host (CONTROL_AUTO or CONTROL_HOST)");
}

runtime::ControlMode ControlModeOf(const weft::v1::ScheduleOptions& options) {
  switch (options.control_mode()) {
    case weft::v1::CONTROL_HOST:
      return runtime::ControlMode::kHost;
    case weft::v1::CONTROL_DEVICE:
      return runtime::ControlMode::kDevice;
    default:
      return runtime::ControlMode::kAuto;
  }
}

}  // namespace weft::server
