#include "client/weftctl_jobs.h"

#include <unistd.h>

#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/format.h"
#include "client/graph_file.h"
#include "client/weftctl_progress.h"
#include "client/weftctl_schedule_flags.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {
namespace {

// Whether watching draws a progress bar (--progress=auto: when stdout
// is a terminal and the output is not JSON).
absl::StatusOr<bool> UseProgressBar(const CommandContext& context) {
  const std::string mode = context.args.String("progress").value_or("auto");
  if (mode == "bar") return true;
  if (mode == "lines") return false;
  if (mode != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--progress: '", mode, "' is not auto, bar or lines"));
  }
  return !context.json && isatty(STDOUT_FILENO) == 1;
}

// The end of watching: --timeout from now when given, else never.
absl::Time WatchDeadline(const CommandContext& context) {
  return context.explicit_timeout ? absl::Now() + *context.explicit_timeout
                                  : absl::InfiniteFuture();
}

// The exit status for how a watched job ended, reporting its error.
int Outcome(const weft::v1::Job& job) {
  switch (job.state()) {
    case weft::v1::SUCCEEDED:
      return 0;
    case weft::v1::FAILED:
    case weft::v1::CANCELLED: {
      absl::StatusCode code = static_cast<absl::StatusCode>(job.error().code());
      if (code == absl::StatusCode::kOk) {
        code = job.state() == weft::v1::CANCELLED ? absl::StatusCode::kCancelled
                                                  : absl::StatusCode::kUnknown;
      }
      std::string message = absl::StrCat("job ", job.id(), " ",
                                         weft::v1::JobState_Name(job.state()),
                                         ": ", job.error().message());
      if (!job.error().node().empty()) {
        absl::StrAppend(&message, " (node ", job.error().node(), ")");
      }
      return ReportError(absl::Status(code, message));
    }
    default:
      return ReportError(absl::UnknownError(
          absl::StrCat("the watch of job ", job.id(), " ended while it was ",
                       weft::v1::JobState_Name(job.state()))));
  }
}

int WatchWithBar(const CommandContext& context, const std::string& id) {
  absl::StatusOr<weft::v1::Job> job;
  {
    ProgressBar bar;
    auto on_message = [&bar](const weft::v1::WatchJobResponse& message) {
      for (const weft::v1::NodeEvent& event : message.node_events()) {
        // Only failures and chosen branches are worth a line of their
        // own; the latest loop iteration shows beside the bar.
        if (event.kind() == weft::v1::NODE_FAILED ||
            event.kind() == weft::v1::NODE_BRANCH) {
          bar.Print(NodeEventLine(event));
        } else if (event.kind() == weft::v1::NODE_ITERATION) {
          bar.Note(NodeEventLine(event));
        }
      }
      bar.Update(message.job());
      return true;
    };
    const absl::Time deadline = WatchDeadline(context);
    job = context.client->Watch(id, on_message, deadline);
  }
  if (!job.ok()) return ReportError(job.status());
  std::cout << JobLine(*job) << std::endl;
  return Outcome(*job);
}

// Prints the job's stream until it ends; the exit status follows the
// outcome.
int WatchJob(const CommandContext& context, const std::string& id) {
  absl::StatusOr<bool> bar = UseProgressBar(context);
  if (!bar.ok()) return ReportUsage(std::string(bar.status().message()));
  const bool json = context.json;
  if (*bar && !json) return WatchWithBar(context, id);
  bool first = true;
  weft::v1::JobState last = weft::v1::JOB_STATE_UNSPECIFIED;
  auto on_message = [&](const weft::v1::WatchJobResponse& message) {
    if (json) {
      std::cout << ToJson(message) << std::endl;
      return true;
    }
    if (message.events_dropped() > 0) {
      std::cout << "(" << message.events_dropped()
                << " earlier node events were not kept)\n";
    }
    for (const weft::v1::NodeEvent& event : message.node_events()) {
      std::cout << NodeEventLine(event) << "\n";
    }
    const weft::v1::Job& job = message.job();
    if (first || job.state() != last) {
      std::cout << JobLine(job) << "  " << job.nodes_done() << "/"
                << job.nodes_total() << " nodes\n";
    }
    std::cout.flush();
    first = false;
    last = job.state();
    return true;
  };
  const absl::Time deadline = WatchDeadline(context);
  absl::StatusOr<weft::v1::Job> job =
      context.client->Watch(id, on_message, deadline);
  if (!job.ok()) return ReportError(job.status());
  return Outcome(*job);
}

}  // namespace

int RunSubmit(const CommandContext& context) {
  const CliArgs& args = context.args;
  absl::StatusOr<weft::v1::ScheduleOptions> options =
      ScheduleOptionsFromFlags(args);
  if (!options.ok())
    return ReportUsage(std::string(options.status().message()));
  absl::StatusOr<std::optional<int>> priority = args.Int("priority");
  if (!priority.ok())
    return ReportUsage(std::string(priority.status().message()));
  absl::StatusOr<weft::v1::Graph> graph = LoadGraphFile(context.Arg(0));
  if (!graph.ok()) return ReportError(graph.status());

  weft::v1::SubmitGraphRequest request;
  *request.mutable_graph() = *std::move(graph);
  *request.mutable_options() = *options;
  request.set_priority(priority->value_or(0));
  request.set_request_id(args.String("request_id").value_or(""));
  absl::StatusOr<weft::v1::Job> job = context.client->Submit(request);
  if (!job.ok()) return ReportError(job.status());
  std::cout << (context.json ? ToJson(*job) : JobLine(*job)) << std::endl;
  if (!args.Bool("watch")) return 0;
  return WatchJob(context, job->id());
}

int RunGet(const CommandContext& context) {
  absl::StatusOr<weft::v1::Job> job = context.client->Get(context.Arg(0));
  if (!job.ok()) return ReportError(job.status());
  if (context.json) {
    std::cout << ToJson(*job) << std::endl;
  } else {
    std::cout << JobDetails(*job) << std::flush;
  }
  return 0;
}

int RunWatch(const CommandContext& context) {
  return WatchJob(context, context.Arg(0));
}

int RunCancel(const CommandContext& context) {
  absl::StatusOr<weft::v1::Job> job = context.client->Cancel(context.Arg(0));
  if (!job.ok()) return ReportError(job.status());
  std::cout << (context.json ? ToJson(*job) : JobLine(*job)) << std::endl;
  return 0;
}

int RunList(const CommandContext& context) {
  weft::v1::JobState state = weft::v1::JOB_STATE_UNSPECIFIED;
  if (std::optional<std::string> name = context.args.String("state")) {
    std::string upper = absl::AsciiStrToUpper(*name);
    if (upper == "CANCELED") upper = "CANCELLED";
    if (upper != "ALL" && (!weft::v1::JobState_Parse(upper, &state) ||
                           state == weft::v1::JOB_STATE_UNSPECIFIED)) {
      return ReportUsage(absl::StrCat(
          "--state: '", *name,
          "' is not queued, running, succeeded, failed, cancelled or all"));
    }
  }
  absl::StatusOr<std::optional<int>> limit = context.args.Int("limit");
  if (!limit.ok()) return ReportUsage(std::string(limit.status().message()));
  if (limit->value_or(0) < 0)
    return ReportUsage("--limit must not be negative");
  absl::StatusOr<std::vector<weft::v1::Job>> jobs =
      context.client->List(state, limit->value_or(0));
  if (!jobs.ok()) return ReportError(jobs.status());
  if (context.json) {
    weft::v1::ListJobsResponse response;
    for (const weft::v1::Job& job : *jobs) *response.add_jobs() = job;
    std::cout << ToJson(response) << std::endl;
  } else {
    std::cout << JobsTable(*jobs) << std::flush;
  }
  return 0;
}

}  // namespace weft::client
