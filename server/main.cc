// weftd: the Weft daemon. Flags only; everything else lives in Daemon.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/daemon.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "TCP address for the gRPC API (host:port; port 0 picks a free "
          "one); empty disables TCP.");
ABSL_FLAG(std::string, unix_socket, "/tmp/weftd.sock",
          "Unix socket path for the gRPC API; empty disables it.");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "host:port of the Prometheus /metrics endpoint; empty disables it.");
ABSL_FLAG(std::string, backend, "auto",
          "Device backend: auto (CUDA when a GPU is visible, else sim), sim "
          "or cuda.");
ABSL_FLAG(int32_t, sim_devices, 2, "Number of simulated GPUs.");
ABSL_FLAG(uint64_t, sim_memory_bytes, uint64_t{17179869184},
          "Memory per simulated GPU in bytes (default 16 GiB).");
ABSL_FLAG(bool, cuda_device_launch_cases, false,
          "CUDA: run case..of nodes decided on the device by device graph "
          "launch (a kernel launches the chosen branch) instead of SWITCH "
          "conditional nodes; nested control then runs on the host");
ABSL_FLAG(bool, cuda_device_launch_loops, false,
          "CUDA: run loops decided on the device by tail launch (the body "
          "relaunches itself from the device) instead of WHILE conditional "
          "nodes; nested control then runs on the host");
ABSL_FLAG(double, sim_bandwidth_gbps, 25,
          "Simulated copy bandwidth in GB/s, host<->device and peer.");
ABSL_FLAG(std::string, topology, "",
          "Copy bandwidths of the machine, a CSV file in GrCUDA's format: a "
          "header line, then rows `From,To,GB/s` with -1 for the host. The "
          "planner models them for every job and plan, and the simulated "
          "backend copies at them. A file that cannot be read or parsed "
          "stops weftd (exit 1, naming the file and line). Empty: every copy "
          "at --sim_bandwidth_gbps with the simulator, the planner's default "
          "otherwise.");
ABSL_FLAG(int32_t, max_message_bytes, 64 << 20,
          "Largest gRPC message received or sent, in bytes (large graphs "
          "must fit).");
ABSL_FLAG(int32_t, grpc_max_threads, 64,
          "Threads of gRPC's resource quota. Every method runs on gRPC's "
          "callback API: a call holds no thread while it waits (CancelJob's "
          "wait for a job to drain, WatchJob, ReadBuffer, GetJobTrace).");
ABSL_FLAG(int64_t, grpc_memory_bytes, 0,
          "Memory gRPC may take for its connections and messages (its "
          "resource quota). 0: a quarter of the machine's memory, at least "
          "8 * --max_message_bytes.");
ABSL_FLAG(int32_t, max_concurrent_streams, 1024,
          "Calls one client connection may have open at once (the HTTP/2 "
          "MAX_CONCURRENT_STREAMS setting); a client's further calls wait "
          "in its transport until one ends.");
ABSL_FLAG(int32_t, max_watchers, 4096,
          "WatchJob streams open at once, over all clients; one more is "
          "answered RESOURCE_EXHAUSTED with a retry hint "
          "(grpc-retry-pushback-ms, google.rpc.RetryInfo) of 1 s.");
ABSL_FLAG(int32_t, plan_cache_entries, 256,
          "Plans kept for graphs submitted again with the same options, "
          "which are then neither built nor planned again (graphs of at "
          "most 4096 nodes, 65536 nodes in all; not with STREAM_AWARE or "
          "user kernels); 0: none.");
ABSL_FLAG(int32_t, max_streams_per_device, 0,
          "Planner default soft cap on streams per device (a request's "
          "options.max_streams_per_device overrides it); 0: as many as a "
          "device runs kernels at once (32).");
ABSL_FLAG(int64_t, memory_pool_max_cached_bytes, -1,
          "Bytes of freed device memory kept cached per device for reuse by "
          "later jobs (a job whose buffer sizes were seen before allocates "
          "nothing). -1: no cap, the cache is released when a device runs "
          "out of memory; 0: no caching, every job allocates and frees.");
ABSL_FLAG(bool, arena_placement, true,
          "Place each job's buffers at the offsets of its memory plan, in "
          "one arena per device taken from the memory pool once per job, so "
          "that buffers whose lifetimes do not overlap share device memory; "
          "false allocates every buffer by itself for the whole job.");
ABSL_FLAG(bool, warm_up, true,
          "Before serving, run one small job over every device (an upload, "
          "two short kernels per device, copies between devices, a "
          "download), so that the first client's job does not pay for "
          "creating streams, events and memory blocks, or on CUDA for "
          "loading the built-in kernels. Its work shows in the device "
          "counters.");
ABSL_FLAG(std::string, launch_mode, "auto",
          "How jobs whose options say LAUNCH_AUTO issue their device work: "
          "auto (CUDA graphs on GPUs, built once per graph shape and "
          "relaunched; node by node on simulated GPUs), streams (node by "
          "node on pooled streams) or graphs (device graphs wherever the job "
          "fits: no HOST nodes, no user kernels).");
ABSL_FLAG(int32_t, max_queued_jobs, 1024,
          "Admission queue bound; a submission beyond it gets "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(int32_t, max_queued_jobs_per_tenant, 0,
          "Queued jobs one tenant (weft-tenant metadata) may have; beyond it "
          "its submissions get RESOURCE_EXHAUSTED. 0: no bound beyond "
          "--max_queued_jobs.");
ABSL_FLAG(int32_t, max_running_jobs, 64,
          "Jobs running on the devices at once. A queued job also waits "
          "until its buffers fit in the devices' memory beside those of the "
          "running jobs.");
ABSL_FLAG(int32_t, max_running_jobs_per_tenant, 0,
          "Jobs of one tenant running at once; its further jobs wait even "
          "while slots are free. 0: --max_running_jobs - 1 (at least 1), so "
          "a slot is always left to the other tenants.");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(30),
          "On SIGTERM/SIGINT, how long running jobs may take to finish "
          "before they are cancelled.");
ABSL_FLAG(absl::Duration, drain_grace, absl::Seconds(5),
          "After --drain_timeout, how long cancelled work may take to stop; "
          "then weftd exits (status 1) whatever still runs. A second "
          "SIGTERM/SIGINT exits at once (status 1).");
ABSL_FLAG(int64_t, retain_output_bytes, 0,
          "Bytes of output buffers finished jobs may hold together; beyond "
          "it the oldest jobs' outputs are released first (the jobs stay "
          "visible). 0: an eighth of the host's memory.");
ABSL_FLAG(int64_t, retain_trace_bytes, 0,
          "Bytes of traces finished jobs may hold together (about); beyond "
          "it the oldest jobs' traces are released first (the jobs stay "
          "visible). 0: a sixteenth of the host's memory.");
ABSL_FLAG(int64_t, max_planning_nodes, 0,
          "Nodes planned at once over all PlanGraph and SubmitGraph calls; "
          "a call beyond it gets RESOURCE_EXHAUSTED with a retry hint. 0: "
          "the graph node limit (2,000,000).");
ABSL_FLAG(int64_t, max_node_cost_seconds, 600,
          "The largest cost.estimated_us one node may declare, in seconds "
          "(simulated devices run a node that long).");
ABSL_FLAG(int32_t, retain_jobs, 1000,
          "Finished jobs kept, with their output buffers, for get/watch/read.");
ABSL_FLAG(int64_t, retain_seconds, 0,
          "Seconds a finished job and its output buffers are kept at most "
          "(whichever of this and --retain_jobs releases it first); 0 keeps "
          "them until --retain_jobs pushes them out.");
ABSL_FLAG(bool, trace_jobs, true,
          "Record a trace of every job (where and when each kernel and copy "
          "ran, and the event waits between streams), kept with the job for "
          "'weftctl trace JOB'. Costs a few events per node while the job "
          "runs and the trace's memory while the job is retained.");
ABSL_FLAG(int64_t, trace_max_nodes, 200000,
          "Jobs with more nodes than this are not traced (their traces would "
          "cost too much memory).");
ABSL_FLAG(int64_t, trace_max_spans, int64_t{1} << 19,
          "Spans one job's trace records at most: a loop of many iterations "
          "records its first ones, and the trace counts the rest "
          "(otherData.spansDropped).");
ABSL_FLAG(int64_t, max_job_events, 65536,
          "Node events (started, finished, failed, loop iterations, branches) "
          "each running job keeps for 'weftctl watch': the most recent this "
          "many; a watch that falls further behind is told how many it "
          "missed. Bounds a job's memory however many nodes or iterations it "
          "runs.");
ABSL_FLAG(int64_t, finished_job_events, 256,
          "Node events a finished job keeps for a watch begun after it "
          "ended: its last this many (0: none).");

namespace {

constexpr char kUsage[] =
    "the Weft GPU graph-scheduling daemon.\n\n"
    "Serves weft.v1.Scheduler over gRPC (TCP and a unix socket), with the\n"
    "grpc.health.v1 health service and server reflection, and Prometheus\n"
    "metrics over HTTP. SIGTERM or SIGINT drains running jobs and exits 0.\n\n"
    "Usage: weftd [--flag=value ...]";

bool IsHelpFlag(absl::string_view arg) {
  for (absl::string_view help : {"--help", "-help", "--helpfull", "-helpfull",
                                 "--helpshort", "-helpshort", "-h"}) {
    if (arg == help) return true;
  }
  return false;
}

// The usage text and the flags defined in this file, sorted by name.
std::string HelpText() {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::EndsWith(flag->Filename(), "server/main.cc")) {
      flags.push_back(flag);
    }
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::string text = absl::StrCat("weftd: ", kUsage, "\n\nFlags:\n");
  for (const absl::CommandLineFlag* flag : flags) {
    absl::StrAppend(&text, "  --", flag->Name(), "=", flag->DefaultValue(),
                    "\n      ", flag->Help(), "\n");
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists, so that every thread inherits the mask.
  weft::server::Daemon::BlockTerminationSignals();
  // absl::Mutex's lock-order graph is a debugging aid (the tests keep it);
  // in the daemon it costs several percent of the CPU on the submit path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::SetProgramUsageMessage(kUsage);
  // absl's own --help exits 1; asking for help is not an error.
  for (int i = 1; i < argc && std::string(argv[i]) != "--"; ++i) {
    if (IsHelpFlag(argv[i])) {
      std::cout << HelpText() << std::flush;
      return 0;
    }
  }
  // --help lists the flags of this file (absl's default looks for a file
  // named after the program).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "server/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::cerr << "weftd: unexpected argument '" << rest[1]
              << "' (weftd takes only flags; see --help)" << std::endl;
    return 2;
  }

  weft::server::Daemon::Options options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.unix_socket = absl::GetFlag(FLAGS_unix_socket);
  options.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  options.backend.kind = absl::GetFlag(FLAGS_backend);
  options.backend.sim_devices = absl::GetFlag(FLAGS_sim_devices);
  options.backend.sim_memory_bytes = absl::GetFlag(FLAGS_sim_memory_bytes);
  options.backend.sim_bandwidth_gbps = absl::GetFlag(FLAGS_sim_bandwidth_gbps);
  options.backend.topology_file = absl::GetFlag(FLAGS_topology);
  options.backend.cuda_device_launch_cases =
      absl::GetFlag(FLAGS_cuda_device_launch_cases);
  options.backend.cuda_device_launch_loops =
      absl::GetFlag(FLAGS_cuda_device_launch_loops);
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.max_streams_per_device = absl::GetFlag(FLAGS_max_streams_per_device);
  options.grpc_max_threads = absl::GetFlag(FLAGS_grpc_max_threads);
  options.grpc_memory_bytes = absl::GetFlag(FLAGS_grpc_memory_bytes);
  options.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  options.max_watchers = absl::GetFlag(FLAGS_max_watchers);
  options.plan_cache_entries = absl::GetFlag(FLAGS_plan_cache_entries);
  options.max_queued_jobs = absl::GetFlag(FLAGS_max_queued_jobs);
  options.memory_pool_max_cached_bytes =
      absl::GetFlag(FLAGS_memory_pool_max_cached_bytes);
  options.launch_mode = absl::GetFlag(FLAGS_launch_mode);
  options.arena_placement = absl::GetFlag(FLAGS_arena_placement);
  options.warm_up = absl::GetFlag(FLAGS_warm_up);
  options.max_running_jobs = absl::GetFlag(FLAGS_max_running_jobs);
  options.max_running_jobs_per_tenant =
      absl::GetFlag(FLAGS_max_running_jobs_per_tenant);
  options.drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  options.drain_grace = absl::GetFlag(FLAGS_drain_grace);
  options.retain_output_bytes = absl::GetFlag(FLAGS_retain_output_bytes);
  options.retain_trace_bytes = absl::GetFlag(FLAGS_retain_trace_bytes);
  options.max_node_cost =
      absl::Seconds(absl::GetFlag(FLAGS_max_node_cost_seconds));
  options.max_planning_nodes = absl::GetFlag(FLAGS_max_planning_nodes);
  options.retain_jobs = absl::GetFlag(FLAGS_retain_jobs);
  options.max_queued_jobs_per_tenant =
      absl::GetFlag(FLAGS_max_queued_jobs_per_tenant);
  options.trace_jobs = absl::GetFlag(FLAGS_trace_jobs);
  options.trace_max_nodes = absl::GetFlag(FLAGS_trace_max_nodes);
  options.trace_max_spans = absl::GetFlag(FLAGS_trace_max_spans);
  options.max_job_events = absl::GetFlag(FLAGS_max_job_events);
  options.finished_job_events = absl::GetFlag(FLAGS_finished_job_events);
  const int64_t retain_seconds = absl::GetFlag(FLAGS_retain_seconds);
  if (retain_seconds < 0) {
    std::cerr << "weftd: --retain_seconds must not be negative" << std::endl;
    return 2;
  }
  if (retain_seconds > 0) options.retain_for = absl::Seconds(retain_seconds);
  options.log = &std::cerr;

  auto daemon = weft::server::Daemon::BuildAndStart(options);
  if (!daemon.ok()) {
    std::cerr << "weftd: " << daemon.status() << std::endl;
    return 1;
  }
  (*daemon)->WaitForTermination();
  daemon->reset();
  return 0;
}
