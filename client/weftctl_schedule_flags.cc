#include "client/weftctl_schedule_flags.h"

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace weft::client {

absl::StatusOr<weft::v1::ScheduleOptions> ScheduleOptionsFromFlags(
    const CliArgs& args) {
  weft::v1::ScheduleOptions options;
  if (std::optional<std::string> policy = args.String("policy")) {
    weft::v1::DevicePolicy value;
    if (!weft::v1::DevicePolicy_Parse(absl::AsciiStrToUpper(*policy), &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--policy: unknown policy '", *policy,
          "' (round_robin, stream_aware, min_transfer_size, "
          "minmin_transfer_time, minmax_transfer_time, min_finish_time)"));
    }
    options.set_device_policy(value);
  }
  if (std::optional<std::string> mode = args.String("launch_mode")) {
    const std::string m = absl::AsciiStrToLower(*mode);
    if (m == "auto") {
      options.set_launch_mode(weft::v1::LAUNCH_AUTO);
    } else if (m == "streams") {
      options.set_launch_mode(weft::v1::LAUNCH_STREAMS);
    } else if (m == "graphs") {
      options.set_launch_mode(weft::v1::LAUNCH_DEVICE_GRAPHS);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--launch_mode: '", *mode, "' is not auto, streams or graphs"));
    }
  }
  if (std::optional<std::string> mode = args.String("control_mode")) {
    const std::string m = absl::AsciiStrToLower(*mode);
    if (m == "auto") {
      options.set_control_mode(weft::v1::CONTROL_AUTO);
    } else if (m == "host") {
      options.set_control_mode(weft::v1::CONTROL_HOST);
    } else if (m == "device") {
      options.set_control_mode(weft::v1::CONTROL_DEVICE);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--control_mode: '", *mode, "' is not auto, host or device"));
    }
  }
  if (std::optional<std::string> mode = args.String("stream_mode")) {
    weft::v1::StreamMode value;
    if (!weft::v1::StreamMode_Parse(absl::AsciiStrToUpper(*mode), &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--stream_mode: '", *mode, "' is not multi or single"));
    }
    options.set_stream_mode(value);
  }
  absl::StatusOr<std::optional<int>> max_streams =
      args.Int("max_streams_per_device");
  if (!max_streams.ok()) return max_streams.status();
  if (*max_streams) {
    if (**max_streams < 0) {
      return absl::InvalidArgumentError(
          "--max_streams_per_device must not be negative");
    }
    options.set_max_streams_per_device(**max_streams);
  }
  absl::StatusOr<std::optional<double>> threshold =
      args.Double("data_threshold");
  if (!threshold.ok()) return threshold.status();
  if (*threshold) {
    if (!(**threshold >= 0 && **threshold <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--data_threshold must be in [0, 1], got ", **threshold));
    }
    options.set_data_threshold(**threshold);
  }
  if (std::optional<std::string> order = args.String("memory_order")) {
    const std::string o = absl::AsciiStrToLower(*order);
    if (o == "auto") {
      options.set_memory_order(weft::v1::MEMORY_ORDER_AUTO);
    } else if (o == "submitted") {
      options.set_memory_order(weft::v1::MEMORY_ORDER_SUBMITTED);
    } else if (o == "memory_aware") {
      options.set_memory_order(weft::v1::MEMORY_ORDER_MEMORY_AWARE);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--memory_order: '", *order,
                       "' is not auto, submitted or memory_aware"));
    }
  }
  options.set_restrict_to_parent_devices(
      args.Bool("restrict_to_parent_devices"));
  absl::StatusOr<std::optional<int>> max_nodes =
      args.Int("max_nodes_per_stream");
  if (!max_nodes.ok()) return max_nodes.status();
  if (*max_nodes) {
    if (**max_nodes < 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max_nodes_per_stream must be at least 3, got ", **max_nodes));
    }
    options.set_max_nodes_per_stream(**max_nodes);
  }
  return options;
}

}  // namespace weft::client
