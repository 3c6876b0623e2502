// The flags of `weftctl submit` and `weftctl plan` that choose how weftd
// schedules a graph (--policy, --stream_mode, --memory_order and the rest),
// and their parsing into a weft.v1.ScheduleOptions. Submit also takes
// --launch_mode and --control_mode, which the same parsing reads when
// given. The values are checked here, so that a bad one is a usage error
// before anything is sent to the daemon.
#ifndef WEFT_CLIENT_WEFTCTL_SCHEDULE_FLAGS_H_
#define WEFT_CLIENT_WEFTCTL_SCHEDULE_FLAGS_H_

#include "absl/status/statusor.h"
#include "client/cli_args.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {

// The flags of submit and plan that fill ScheduleOptions.
inline constexpr const char* kScheduleFlags[] = {
    "policy",         "stream_mode",          "max_streams_per_device",
    "data_threshold", "max_nodes_per_stream", "restrict_to_parent_devices",
    "memory_order"};

// ScheduleOptions from the flags given; unset fields where a flag is not.
// INVALID_ARGUMENT naming the flag for a value out of range or not among the
// choices.
absl::StatusOr<weft::v1::ScheduleOptions> ScheduleOptionsFromFlags(
    const CliArgs& args);

}  // namespace weft::client

#endif  // WEFT_CLIENT_WEFTCTL_SCHEDULE_FLAGS_H_
