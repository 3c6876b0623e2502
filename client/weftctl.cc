// weftctl: the command-line client of weftd.
//
// Exit status: 0 on success (for submit --watch and watch: only when the
// job SUCCEEDED), 1 when the daemon or the job reports an error (printed as
// "weftctl: CODE: message"), 2 for usage errors.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/cli_args.h"
#include "client/client.h"
#include "client/format.h"
#include "client/graph_file.h"
#include "client/plan_render.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {
namespace {

constexpr char kUsage[] =
    R"(weftctl: command-line client for weftd, the Weft GPU graph scheduler.

Usage: weftctl [global flags] COMMAND [arguments] [flags]

Commands:
  submit FILE      Submit a graph (.json: proto3 JSON; .textproto, .txtpb,
                   .pbtxt: text format). Prints "job <id> <STATE>".
                   Module files named by sourceFile/ptxFile are read
                   relative to FILE and sent inline.
                     --watch                     then watch it; exit 0 only
                                                 if it SUCCEEDED
                     --priority=N                higher runs first
                     --request_id=ID             idempotency key: a repeat
                                                 returns the original job
                     --policy=lookahead_finish_time|min_finish_time|
                              round_robin|stream_aware|min_transfer_size|
                              minmin_transfer_time|minmax_transfer_time
                                                 device policy; by default
                                                 lookahead_finish_time: each
                                                 node where it and what
                                                 follows it finish first
                     --stream_mode=multi|single
                     --max_streams_per_device=N
                     --data_threshold=F          fraction of a node's
                                                 argument bytes a device must
                                                 hold to be preferred by the
                                                 transfer policies, in [0, 1]
                                                 (default 0.1)
                     --restrict_to_parent_devices
                                                 keep a node on a
                                                 predecessor's device when
                                                 that is no worse
                     --max_nodes_per_stream=N    split longer streams (at
                                                 least 3)
                     --memory_order=auto|submitted|memory_aware
                                                 issue order: the graph's
                                                 (auto, submitted) or one
                                                 that keeps fewer bytes live
                     --launch_mode=auto|streams|graphs
                                                 issue device work node by
                                                 node (streams) or as
                                                 cached device graphs
                                                 (graphs); auto: graphs on
                                                 GPUs, streams on simulated
                                                 ones
                     --control_mode=auto|host|device
                                                 where loops and case..of
                                                 read their conditions
                     --progress=auto|bar|lines   (with --watch)
  get JOB          Show a job.
  watch JOB        Follow a job; exit 0 only if it SUCCEEDED. On a terminal:
                   a progress bar (nodes done/total, elapsed); otherwise one
                   line per node event and state change.
                     --progress=auto|bar|lines   force the bar or the lines
  cancel JOB       Cancel a queued or running job; prints its state after.
  list             List jobs as a table.
                     --state=queued|running|succeeded|failed|cancelled|all
                     --limit=N                   only the N most recent
  plan FILE        Plan a graph without running it. The table has one line
                   per node in issue order: device, stream, dependencies,
                   event waits and signal, estimated start and end, and why
                   this device and this stream; then the streams and the
                   totals (makespan, critical path, lower bound, events);
                   then, when weftd planned memory (graphs of up to 20,000
                   nodes, or --memory_order=memory_aware), one line per
                   device: arena, peak live bytes, lower bound, budget,
                   spilled bytes, orderings added.
                     --policy=...  --stream_mode=...  --max_streams_per_device=N
                     --data_threshold=F  --restrict_to_parent_devices
                     --max_nodes_per_stream=N  --memory_order=...
                                                 as for submit
                     --format=table|json|trace|dot|svg
                                 json: the Plan as proto3 JSON (as --json);
                                 trace: Chrome/Perfetto trace-event JSON, a
                                 process per GPU and a thread per stream,
                                 arrows for waits between streams, and a
                                 "live bytes" counter per GPU (open in
                                 ui.perfetto.dev or chrome://tracing);
                                 dot: Graphviz, a cluster per GPU, dashed
                                 edges between streams;
                                 svg: a picture (open in a browser): a lane
                                 per stream with a bar per node (hover for
                                 its name and times), and per GPU a chart of
                                 live bytes with its arena and budget
                     --simulate                  table: add each node's
                                                 duration and each stream's
                                                 busy time and utilisation.
                                                 weftd simulates every plan,
                                                 so the estimated times are
                                                 in every format regardless
                     --out=FILE                  write to FILE, not stdout
  devices          List the devices with memory and stream load.
  read JOB BUFFER  Print an output buffer of a SUCCEEDED job, one element per
                   line (float32/float64 as %.9g, integers in decimal, bytes
                   as two hex digits).
                     --raw                       the bytes as they are
                     --out=FILE                  write to FILE, not stdout
                     --chunk_bytes=N             transfer chunk size
  trace JOB        Write the trace of a finished job (SUCCEEDED, FAILED or
                   CANCELLED) as Chrome/Perfetto trace-event JSON: a process
                   per device, a thread per device stream and copy engine,
                   kernel and copy spans, and arrows for the event waits
                   between streams. Open it in ui.perfetto.dev or
                   chrome://tracing. weftd traces every job unless run with
                   --trace_jobs=false, or the job has more nodes than its
                   --trace_max_nodes.
                     --out=FILE                  write to FILE, not stdout
  health           Ask the grpc.health.v1 service; exit 0 only if SERVING.
                     --service=NAME              default: the whole server

Global flags (anywhere on the line):
  --addr=ADDR      daemon address, host:port or unix:/path
                   (default 127.0.0.1:50051)
  --json           machine-readable output: one proto3 JSON object per line
  --timeout=DUR    deadline of each call (default 30s); watching has no
                   deadline unless --timeout is given
  --tenant=NAME    submit on behalf of this tenant (sent as metadata)
  --help           this text
)";

std::vector<FlagSpec> AllFlags() {
  return {
      {"addr"},
      {"json", false},
      {"timeout"},
      {"tenant"},
      {"help", false},
      {"watch", false},
      {"priority"},
      {"request_id"},
      {"policy"},
      {"stream_mode"},
      {"max_streams_per_device"},
      {"data_threshold"},
      {"restrict_to_parent_devices", false},
      {"max_nodes_per_stream"},
      {"launch_mode"},
      {"control_mode"},
      {"state"},
      {"limit"},
      {"raw", false},
      {"out"},
      {"chunk_bytes"},
      {"service"},
      {"progress"},
      {"format"},
      {"simulate", false},
      {"memory_order"},
  };
}

// The flags of submit and plan that fill ScheduleOptions.
constexpr const char* kScheduleFlags[] = {
    "policy",         "stream_mode",          "max_streams_per_device",
    "data_threshold", "max_nodes_per_stream", "restrict_to_parent_devices",
    "memory_order"};

int ReportUsage(const std::string& message) {
  std::cerr << "weftctl: " << message << "\n"
            << "Run 'weftctl --help' for usage." << std::endl;
  return 2;
}

int ReportError(const absl::Status& status) {
  std::cerr << "weftctl: " << StatusText(status, RetryDelayOf(status))
            << std::endl;
  return 1;
}

// Columns of the terminal on stdout; 80 when unknown.
int TerminalWidth() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  return 80;
}

// A progress bar redrawn in place on a terminal: on every update and, for
// the elapsed time, a few times a second in between. Thread-safe.
class ProgressBar {
 public:
  ProgressBar() : ticker_([this] { Tick(); }) {}
  ~ProgressBar() { Finish(); }

  void Update(const weft::v1::Job& job) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    job_ = job;
    DrawLocked();
  }

  // Shows `note` after the bar (the latest loop iteration).
  void Note(std::string note) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    note_ = std::move(note);
    DrawLocked();
  }

  // Prints `line` above the bar.
  void Print(const std::string& line) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::cout << "\r\x1b[K" << line << "\n";
    DrawLocked();
  }

  // Leaves the last state of the bar on its own line.
  void Finish() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (done_) return;
      done_ = true;
      DrawLocked();
      std::cout << "\n" << std::flush;
    }
    ticker_.join();
  }

 private:
  void DrawLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!job_) return;
    const int width = TerminalWidth() - 1;
    std::string line = ProgressLine(*job_, JobElapsed(*job_, absl::Now()),
                                    note_.empty() ? width : width / 2);
    const int room = width - static_cast<int>(line.size()) - 2;
    if (!note_.empty() && room > 0) {
      absl::StrAppend(&line, "  ", note_.substr(0, room));
    }
    std::cout << "\r\x1b[K" << line << std::flush;
  }

  void Tick() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    while (!done_) {
      mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Milliseconds(200));
      if (!done_) DrawLocked();
    }
  }

  absl::Mutex mu_;
  std::optional<weft::v1::Job> job_ ABSL_GUARDED_BY(mu_);
  std::string note_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread ticker_;
};

class Weftctl {
 public:
  explicit Weftctl(CliArgs args) : args_(std::move(args)) {}

  int Run() {
    const std::string& command = args_.command();
    if (command == "help" || args_.Bool("help")) {
      std::cout << kUsage;
      return 0;
    }
    if (command.empty()) {
      std::cerr << kUsage;
      return 2;
    }
    json_ = args_.Bool("json");
    absl::flat_hash_set<std::string> allowed = {"addr", "json", "timeout",
                                                "tenant", "help"};
    int (Weftctl::*handler)() = nullptr;
    int positional = 0;
    if (command == "submit") {
      allowed.insert({"watch", "priority", "request_id", "progress",
                      "launch_mode", "control_mode"});
      allowed.insert(std::begin(kScheduleFlags), std::end(kScheduleFlags));
      handler = &Weftctl::Submit;
      positional = 1;
    } else if (command == "get") {
      handler = &Weftctl::Get;
      positional = 1;
    } else if (command == "watch") {
      allowed.insert({"progress"});
      handler = &Weftctl::WatchCommand;
      positional = 1;
    } else if (command == "cancel") {
      handler = &Weftctl::Cancel;
      positional = 1;
    } else if (command == "list") {
      allowed.insert({"state", "limit"});
      handler = &Weftctl::List;
    } else if (command == "plan") {
      allowed.insert({"format", "simulate", "out"});
      allowed.insert(std::begin(kScheduleFlags), std::end(kScheduleFlags));
      handler = &Weftctl::Plan;
      positional = 1;
    } else if (command == "devices") {
      handler = &Weftctl::Devices;
    } else if (command == "read") {
      allowed.insert({"raw", "out", "chunk_bytes"});
      handler = &Weftctl::Read;
      positional = 2;
    } else if (command == "trace") {
      allowed.insert({"out"});
      handler = &Weftctl::Trace;
      positional = 1;
    } else if (command == "health") {
      allowed.insert({"service"});
      handler = &Weftctl::Health;
    } else {
      return ReportUsage(absl::StrCat("unknown command '", command, "'"));
    }
    absl::Status flags_ok = args_.CheckAllowed(allowed, command);
    if (!flags_ok.ok()) return ReportUsage(std::string(flags_ok.message()));
    if (static_cast<int>(args_.positional().size()) != positional) {
      return ReportUsage(absl::StrCat("'", command, "' takes ", positional,
                                      " argument", positional == 1 ? "" : "s",
                                      ", got ", args_.positional().size()));
    }
    absl::StatusOr<std::optional<absl::Duration>> timeout =
        args_.Duration("timeout");
    if (!timeout.ok())
      return ReportUsage(std::string(timeout.status().message()));
    explicit_timeout_ = *timeout;
    Client::Options options;
    if (explicit_timeout_) options.timeout = *explicit_timeout_;
    options.tenant = args_.String("tenant").value_or("");
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(
        args_.String("addr").value_or("127.0.0.1:50051"), options);
    if (!client.ok()) return ReportError(client.status());
    client_ = *std::move(client);
    return (this->*handler)();
  }

 private:
  const std::string& Arg(int i) const { return args_.positional()[i]; }

  absl::StatusOr<weft::v1::ScheduleOptions> ScheduleOptionsFromFlags() const {
    weft::v1::ScheduleOptions options;
    if (std::optional<std::string> policy = args_.String("policy")) {
      weft::v1::DevicePolicy value;
      if (!weft::v1::DevicePolicy_Parse(absl::AsciiStrToUpper(*policy),
                                        &value)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--policy: unknown policy '", *policy,
            "' (round_robin, stream_aware, min_transfer_size, "
            "minmin_transfer_time, minmax_transfer_time, min_finish_time)"));
      }
      options.set_device_policy(value);
    }
    if (std::optional<std::string> mode = args_.String("launch_mode")) {
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
    if (std::optional<std::string> mode = args_.String("control_mode")) {
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
    if (std::optional<std::string> mode = args_.String("stream_mode")) {
      weft::v1::StreamMode value;
      if (!weft::v1::StreamMode_Parse(absl::AsciiStrToUpper(*mode), &value)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--stream_mode: '", *mode, "' is not multi or single"));
      }
      options.set_stream_mode(value);
    }
    absl::StatusOr<std::optional<int>> max_streams =
        args_.Int("max_streams_per_device");
    if (!max_streams.ok()) return max_streams.status();
    if (*max_streams) {
      if (**max_streams < 0) {
        return absl::InvalidArgumentError(
            "--max_streams_per_device must not be negative");
      }
      options.set_max_streams_per_device(**max_streams);
    }
    absl::StatusOr<std::optional<double>> threshold =
        args_.Double("data_threshold");
    if (!threshold.ok()) return threshold.status();
    if (*threshold) {
      if (!(**threshold >= 0 && **threshold <= 1)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--data_threshold must be in [0, 1], got ", **threshold));
      }
      options.set_data_threshold(**threshold);
    }
    if (std::optional<std::string> order = args_.String("memory_order")) {
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
        args_.Bool("restrict_to_parent_devices"));
    absl::StatusOr<std::optional<int>> max_nodes =
        args_.Int("max_nodes_per_stream");
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

  // Whether watching draws a progress bar (--progress=auto: when stdout
  // is a terminal and the output is not JSON).
  absl::StatusOr<bool> UseProgressBar() const {
    const std::string mode = args_.String("progress").value_or("auto");
    if (mode == "bar") return true;
    if (mode == "lines") return false;
    if (mode != "auto") {
      return absl::InvalidArgumentError(
          absl::StrCat("--progress: '", mode, "' is not auto, bar or lines"));
    }
    return !json_ && isatty(STDOUT_FILENO) == 1;
  }

  // Prints the job's stream until it ends; the exit status follows the
  // outcome.
  int WatchJob(const std::string& id) {
    absl::StatusOr<bool> bar = UseProgressBar();
    if (!bar.ok()) return ReportUsage(std::string(bar.status().message()));
    if (*bar && !json_) return WatchWithBar(id);
    bool first = true;
    weft::v1::JobState last = weft::v1::JOB_STATE_UNSPECIFIED;
    auto on_message = [&](const weft::v1::WatchJobResponse& message) {
      if (json_) {
        std::cout << ToJson(message) << std::endl;
        return true;
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
    const absl::Time deadline = explicit_timeout_
                                    ? absl::Now() + *explicit_timeout_
                                    : absl::InfiniteFuture();
    absl::StatusOr<weft::v1::Job> job =
        client_->Watch(id, on_message, deadline);
    if (!job.ok()) return ReportError(job.status());
    return Outcome(*job);
  }

  int WatchWithBar(const std::string& id) {
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
      const absl::Time deadline = explicit_timeout_
                                      ? absl::Now() + *explicit_timeout_
                                      : absl::InfiniteFuture();
      job = client_->Watch(id, on_message, deadline);
    }
    if (!job.ok()) return ReportError(job.status());
    std::cout << JobLine(*job) << std::endl;
    return Outcome(*job);
  }

  static int Outcome(const weft::v1::Job& job) {
    switch (job.state()) {
      case weft::v1::SUCCEEDED:
        return 0;
      case weft::v1::FAILED:
      case weft::v1::CANCELLED: {
        absl::StatusCode code =
            static_cast<absl::StatusCode>(job.error().code());
        if (code == absl::StatusCode::kOk) {
          code = job.state() == weft::v1::CANCELLED
                     ? absl::StatusCode::kCancelled
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

  int Submit() {
    absl::StatusOr<weft::v1::ScheduleOptions> options =
        ScheduleOptionsFromFlags();
    if (!options.ok())
      return ReportUsage(std::string(options.status().message()));
    absl::StatusOr<std::optional<int>> priority = args_.Int("priority");
    if (!priority.ok())
      return ReportUsage(std::string(priority.status().message()));
    absl::StatusOr<weft::v1::Graph> graph = LoadGraphFile(Arg(0));
    if (!graph.ok()) return ReportError(graph.status());

    weft::v1::SubmitGraphRequest request;
    *request.mutable_graph() = *std::move(graph);
    *request.mutable_options() = *options;
    request.set_priority(priority->value_or(0));
    request.set_request_id(args_.String("request_id").value_or(""));
    absl::StatusOr<weft::v1::Job> job = client_->Submit(request);
    if (!job.ok()) return ReportError(job.status());
    std::cout << (json_ ? ToJson(*job) : JobLine(*job)) << std::endl;
    if (!args_.Bool("watch")) return 0;
    return WatchJob(job->id());
  }

  int Get() {
    absl::StatusOr<weft::v1::Job> job = client_->Get(Arg(0));
    if (!job.ok()) return ReportError(job.status());
    if (json_) {
      std::cout << ToJson(*job) << std::endl;
    } else {
      std::cout << JobDetails(*job) << std::flush;
    }
    return 0;
  }

  int WatchCommand() { return WatchJob(Arg(0)); }

  int Cancel() {
    absl::StatusOr<weft::v1::Job> job = client_->Cancel(Arg(0));
    if (!job.ok()) return ReportError(job.status());
    std::cout << (json_ ? ToJson(*job) : JobLine(*job)) << std::endl;
    return 0;
  }

  int List() {
    weft::v1::JobState state = weft::v1::JOB_STATE_UNSPECIFIED;
    if (std::optional<std::string> name = args_.String("state")) {
      std::string upper = absl::AsciiStrToUpper(*name);
      if (upper == "CANCELED") upper = "CANCELLED";
      if (upper != "ALL" && (!weft::v1::JobState_Parse(upper, &state) ||
                             state == weft::v1::JOB_STATE_UNSPECIFIED)) {
        return ReportUsage(absl::StrCat(
            "--state: '", *name,
            "' is not queued, running, succeeded, failed, cancelled or all"));
      }
    }
    absl::StatusOr<std::optional<int>> limit = args_.Int("limit");
    if (!limit.ok()) return ReportUsage(std::string(limit.status().message()));
    if (limit->value_or(0) < 0)
      return ReportUsage("--limit must not be negative");
    absl::StatusOr<std::vector<weft::v1::Job>> jobs =
        client_->List(state, limit->value_or(0));
    if (!jobs.ok()) return ReportError(jobs.status());
    if (json_) {
      weft::v1::ListJobsResponse response;
      for (const weft::v1::Job& job : *jobs) *response.add_jobs() = job;
      std::cout << ToJson(response) << std::endl;
    } else {
      std::cout << JobsTable(*jobs) << std::flush;
    }
    return 0;
  }

  int Plan() {
    absl::StatusOr<weft::v1::ScheduleOptions> options =
        ScheduleOptionsFromFlags();
    if (!options.ok())
      return ReportUsage(std::string(options.status().message()));
    PlanFormat format = json_ ? PlanFormat::kJson : PlanFormat::kTable;
    if (std::optional<std::string> name = args_.String("format")) {
      absl::StatusOr<PlanFormat> parsed = ParsePlanFormat(*name);
      if (!parsed.ok())
        return ReportUsage(std::string(parsed.status().message()));
      if (json_ && *parsed != PlanFormat::kJson) {
        return ReportUsage(
            absl::StrCat("--json conflicts with --format=", *name));
      }
      format = *parsed;
    }
    PlanRenderOptions render;
    render.simulate = args_.Bool("simulate");
    absl::StatusOr<weft::v1::Graph> graph = LoadGraphFile(Arg(0));
    if (!graph.ok()) return ReportError(graph.status());
    absl::StatusOr<weft::v1::Plan> plan = client_->Plan(*graph, *options);
    if (!plan.ok()) return ReportError(plan.status());
    render.graph = &*graph;
    return WriteOutput(RenderPlan(*plan, format, render));
  }

  // Writes `out` to --out when given (replacing the file), else to stdout.
  int WriteOutput(const std::string& out) {
    if (std::optional<std::string> path = args_.String("out")) {
      std::ofstream file(*path, std::ios::binary | std::ios::trunc);
      if (file) file.write(out.data(), out.size());
      if (!file) {
        return ReportError(absl::PermissionDeniedError(
            absl::StrCat("cannot write ", *path, ": ", std::strerror(errno))));
      }
      return 0;
    }
    std::cout.write(out.data(), out.size());
    std::cout.flush();
    return std::cout ? 0 : 1;
  }

  int Devices() {
    absl::StatusOr<std::vector<weft::v1::Device>> devices = client_->Devices();
    if (!devices.ok()) return ReportError(devices.status());
    if (json_) {
      weft::v1::ListDevicesResponse response;
      for (const weft::v1::Device& d : *devices) *response.add_devices() = d;
      std::cout << ToJson(response) << std::endl;
    } else {
      std::cout << DevicesTable(*devices) << std::flush;
    }
    return 0;
  }

  int Read() {
    absl::StatusOr<std::optional<int>> chunk = args_.Int("chunk_bytes");
    if (!chunk.ok()) return ReportUsage(std::string(chunk.status().message()));
    if (chunk->value_or(0) < 0) {
      return ReportUsage("--chunk_bytes must not be negative");
    }
    absl::StatusOr<BufferData> buffer =
        client_->ReadBuffer(Arg(0), Arg(1), chunk->value_or(0));
    if (!buffer.ok()) return ReportError(buffer.status());

    std::string out;
    if (args_.Bool("raw")) {
      out = std::move(buffer->data);
    } else {
      const size_t size = ElementSize(buffer->dtype);
      const size_t whole = buffer->data.size() - buffer->data.size() % size;
      if (whole != buffer->data.size()) {
        std::cerr << "weftctl: warning: " << buffer->data.size() - whole
                  << " trailing bytes do not form a whole "
                  << weft::v1::DType_Name(buffer->dtype)
                  << " element; use --raw to see them" << std::endl;
      }
      absl::string_view data(buffer->data.data(), whole);
      if (json_) {
        absl::StatusOr<std::string> text =
            ElementsJson(Arg(0), Arg(1), data, buffer->dtype);
        if (!text.ok()) return ReportError(text.status());
        out = *text + "\n";
      } else {
        absl::StatusOr<std::vector<std::string>> lines =
            FormatElements(data, buffer->dtype);
        if (!lines.ok()) return ReportError(lines.status());
        for (const std::string& line : *lines)
          absl::StrAppend(&out, line, "\n");
      }
    }
    return WriteOutput(out);
  }

  int Trace() {
    absl::StatusOr<std::string> trace = client_->Trace(Arg(0));
    if (!trace.ok()) return ReportError(trace.status());
    return WriteOutput(*trace);
  }

  int Health() {
    const std::string service = args_.String("service").value_or("");
    absl::StatusOr<std::string> status = client_->Health(service);
    if (!status.ok()) return ReportError(status.status());
    if (json_) {
      std::cout << "{\"status\":\"" << *status << "\"}" << std::endl;
    } else {
      std::cout << *status << std::endl;
    }
    return *status == "SERVING" ? 0 : 1;
  }

  const CliArgs args_;
  bool json_ = false;
  std::optional<absl::Duration> explicit_timeout_;
  std::unique_ptr<Client> client_;
};

}  // namespace
}  // namespace weft::client

int main(int argc, char** argv) {
  std::vector<std::string> argv_strings(argv, argv + argc);
  absl::StatusOr<weft::client::CliArgs> args =
      weft::client::CliArgs::Parse(argv_strings, weft::client::AllFlags());
  if (!args.ok()) {
    return weft::client::ReportUsage(std::string(args.status().message()));
  }
  return weft::client::Weftctl(*std::move(args)).Run();
}
