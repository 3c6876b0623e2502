// weftctl: the command-line client of weftd.
//
// Exit status: 0 on success (for submit --watch and watch: only when the
// job SUCCEEDED), 1 when the daemon or the job reports an error (printed as
// "weftctl: CODE: message"), 2 for usage errors.
//
// This file parses the command line, checks which flags and how many
// arguments the command takes, connects to the daemon and dispatches; the
// commands live in weftctl_jobs.cc (submit, get, watch, cancel, list),
// weftctl_plan.cc (plan), weftctl_daemon.cc (devices, health) and
// weftctl_read.cc (read, trace); the usage text and the list of flags in
// weftctl_usage.cc.
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/cli_args.h"
#include "client/client.h"
#include "client/weftctl_command.h"
#include "client/weftctl_daemon.h"
#include "client/weftctl_jobs.h"
#include "client/weftctl_plan.h"
#include "client/weftctl_read.h"
#include "client/weftctl_schedule_flags.h"
#include "client/weftctl_usage.h"

namespace weft::client {
namespace {

int Run(const CliArgs& args) {
  const std::string& command = args.command();
  if (command == "help" || args.Bool("help")) {
    std::cout << kWeftctlUsage;
    return 0;
  }
  if (command.empty()) {
    std::cerr << kWeftctlUsage;
    return 2;
  }
  const bool json = args.Bool("json");
  absl::flat_hash_set<std::string> allowed = {"addr", "json", "timeout",
                                              "tenant", "help"};
  CommandHandler handler = nullptr;
  int positional = 0;
  if (command == "submit") {
    allowed.insert({"watch", "priority", "request_id", "progress",
                    "launch_mode", "control_mode"});
    allowed.insert(std::begin(kScheduleFlags), std::end(kScheduleFlags));
    handler = &RunSubmit;
    positional = 1;
  } else if (command == "get") {
    handler = &RunGet;
    positional = 1;
  } else if (command == "watch") {
    allowed.insert({"progress"});
    handler = &RunWatch;
    positional = 1;
  } else if (command == "cancel") {
    handler = &RunCancel;
    positional = 1;
  } else if (command == "list") {
    allowed.insert({"state", "limit"});
    handler = &RunList;
  } else if (command == "plan") {
    allowed.insert({"format", "simulate", "out"});
    allowed.insert(std::begin(kScheduleFlags), std::end(kScheduleFlags));
    handler = &RunPlan;
    positional = 1;
  } else if (command == "devices") {
    handler = &RunDevices;
  } else if (command == "read") {
    allowed.insert({"raw", "out", "chunk_bytes"});
    handler = &RunRead;
    positional = 2;
  } else if (command == "trace") {
    allowed.insert({"out"});
    handler = &RunTrace;
    positional = 1;
  } else if (command == "health") {
    allowed.insert({"service"});
    handler = &RunHealth;
  } else {
    return ReportUsage(absl::StrCat("unknown command '", command, "'"));
  }
  absl::Status flags_ok = args.CheckAllowed(allowed, command);
  if (!flags_ok.ok()) return ReportUsage(std::string(flags_ok.message()));
  if (static_cast<int>(args.positional().size()) != positional) {
    return ReportUsage(absl::StrCat("'", command, "' takes ", positional,
                                    " argument", positional == 1 ? "" : "s",
                                    ", got ", args.positional().size()));
  }
  absl::StatusOr<std::optional<absl::Duration>> timeout =
      args.Duration("timeout");
  if (!timeout.ok())
    return ReportUsage(std::string(timeout.status().message()));
  const std::optional<absl::Duration> explicit_timeout = *timeout;
  Client::Options options;
  if (explicit_timeout) options.timeout = *explicit_timeout;
  options.tenant = args.String("tenant").value_or("");
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(args.String("addr").value_or("127.0.0.1:50051"), options);
  if (!client.ok()) return ReportError(client.status());
  const CommandContext context{args, json, explicit_timeout, client->get()};
  return handler(context);
}

}  // namespace
}  // namespace weft::client

int main(int argc, char** argv) {
  std::vector<std::string> argv_strings(argv, argv + argc);
  absl::StatusOr<weft::client::CliArgs> args =
      weft::client::CliArgs::Parse(argv_strings, weft::client::WeftctlFlags());
  if (!args.ok()) {
    return weft::client::ReportUsage(std::string(args.status().message()));
  }
  return weft::client::Run(*args);
}
