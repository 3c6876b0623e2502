// What every weftctl command works with: the parsed command line, whether
// the output is JSON, the --timeout the user gave and the connected client
// (CommandContext); and the ways a command ends that all commands share:
// a usage error (exit status 2), an error from the daemon or the job (exit
// status 1, printed as "weftctl: CODE: message"), and output written to
// --out or stdout. weftctl.cc builds the context and dispatches to the
// commands of weftctl_jobs.h, weftctl_plan.h, weftctl_daemon.h and
// weftctl_read.h.
#ifndef WEFT_CLIENT_WEFTCTL_COMMAND_H_
#define WEFT_CLIENT_WEFTCTL_COMMAND_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/cli_args.h"
#include "client/client.h"

namespace weft::client {

// Not owned: lives for the one command run. Not thread-safe.
struct CommandContext {
  const CliArgs& args;
  bool json = false;  // --json
  // --timeout when given: the deadline of each call and of watching.
  std::optional<absl::Duration> explicit_timeout;
  Client* client = nullptr;

  // The i-th positional argument after the command; the dispatcher has
  // checked how many there are.
  const std::string& Arg(int i) const { return args.positional()[i]; }
};

// A command of weftctl; returns the exit status.
using CommandHandler = int (*)(const CommandContext& context);

// Prints "weftctl: <message>" and a pointer to --help on stderr; returns 2.
int ReportUsage(const std::string& message);
// Prints "weftctl: <CODE>: <message>" (with any retry hint) on stderr;
// returns 1.
int ReportError(const absl::Status& status);
// Writes `out` to --out when given (replacing the file), else to stdout.
// Returns the exit status.
int WriteOutput(const CliArgs& args, const std::string& out);

}  // namespace weft::client

#endif  // WEFT_CLIENT_WEFTCTL_COMMAND_H_
