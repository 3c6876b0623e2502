// The weftctl commands about the daemon rather than a job: `devices` lists
// the devices weftd schedules onto with their memory and stream load, and
// `health` asks its grpc.health.v1 service whether it is SERVING (the exit
// status says so too, for scripts and probes).
#ifndef WEFT_CLIENT_WEFTCTL_DAEMON_H_
#define WEFT_CLIENT_WEFTCTL_DAEMON_H_

#include "client/weftctl_command.h"

namespace weft::client {

// weftctl devices
int RunDevices(const CommandContext& context);
// weftctl health [--service=NAME]; exit 0 only if SERVING.
int RunHealth(const CommandContext& context);

}  // namespace weft::client

#endif  // WEFT_CLIENT_WEFTCTL_DAEMON_H_
