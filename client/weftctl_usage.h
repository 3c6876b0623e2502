// The command line weftctl understands: the text of `weftctl --help`, which
// documents every command and flag, and the list of those flags for
// CliArgs::Parse (a flag that takes a value or a switch). Which flags apply
// to which command is decided where weftctl.cc dispatches; keep the three in
// step when adding a flag.
#ifndef WEFT_CLIENT_WEFTCTL_USAGE_H_
#define WEFT_CLIENT_WEFTCTL_USAGE_H_

#include <vector>

#include "client/cli_args.h"

namespace weft::client {

// Printed on stdout by --help and `weftctl help`, on stderr when no command
// is given.
extern const char kWeftctlUsage[];

// Every flag known to any command.
std::vector<FlagSpec> WeftctlFlags();

}  // namespace weft::client

#endif  // WEFT_CLIENT_WEFTCTL_USAGE_H_
