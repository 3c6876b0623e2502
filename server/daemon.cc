#include "server/daemon.h"

#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "runtime/warm_up.h"
#include "scheduler/status_macros.h"
#include "server/counting_backend.h"
#include "server/devices.h"

namespace weft::server {
namespace {

constexpr char kServiceName[] = "weft.v1.Scheduler";

// Physical memory of the host (at least 1 GiB when it cannot be read).
int64_t HostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{1} << 30;
  return static_cast<int64_t>(pages) * page_size;
}

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

std::string UnixTarget(const std::string& path) {
  return absl::StartsWith(path, "unix:") ? path : absl::StrCat("unix:", path);
}

std::string UnixPath(const std::string& socket) {
  if (absl::StartsWith(socket, "unix://")) return socket.substr(7);
  if (absl::StartsWith(socket, "unix:")) return socket.substr(5);
  return socket;
}

// gRPC replaces an existing socket file when it binds; refuse instead when
// some process still answers on it.
absl::Status CheckSocketUnused(const std::string& socket_flag) {
  const std::string path = UnixPath(socket_flag);
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--unix_socket=", socket_flag, ": path longer than ",
                     sizeof(addr.sun_path) - 1, " bytes"));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return absl::OkStatus();
  const bool in_use =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  if (in_use) {
    return absl::UnavailableError(
        absl::StrCat("--unix_socket=", socket_flag,
                     ": another process is serving on this socket"));
  }
  return absl::OkStatus();
}

// "host:port" with the port replaced.
std::string WithPort(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  const std::string host =
      colon == std::string::npos ? address : address.substr(0, colon);
  return absl::StrCat(host, ":", port);
}

// Opens and at once closes a TCP connection to `port` on the host of
// `listen` (wildcard hosts mean loopback). Best effort.
void Knock(const std::string& listen, int port) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), absl::StrCat(port).c_str(), &hints, &found) !=
      0) {
    return;
  }
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const bool connected = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
    if (connected) break;
  }
  freeaddrinfo(found);
}

absl::StatusOr<runtime::LaunchMode> ParseLaunchMode(absl::string_view mode) {
  if (mode == "auto") return runtime::LaunchMode::kAuto;
  if (mode == "streams") return runtime::LaunchMode::kStreams;
  if (mode == "graphs") return runtime::LaunchMode::kDeviceGraphs;
  return absl::InvalidArgumentError(absl::StrCat(
      "--launch_mode must be auto, streams or graphs, got \"", mode, "\""));
}

absl::Status CheckOptions(const Daemon::Options& o) {
  if (o.listen.empty() && o.unix_socket.empty()) {
    return absl::InvalidArgumentError(
        "--listen and --unix_socket are both empty: nothing to serve on");
  }
  if (o.max_message_bytes < 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_message_bytes must be at least 1024, got ",
                     o.max_message_bytes));
  }
  if (o.grpc_max_threads < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grpc_max_threads must be at least 2, got ", o.grpc_max_threads));
  }
  if (o.grpc_memory_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--grpc_memory_bytes must be 0 (automatic) or more, got ",
                     o.grpc_memory_bytes));
  }
  if (o.max_concurrent_streams < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_concurrent_streams must be at least 1, got ",
                     o.max_concurrent_streams));
  }
  if (o.max_watchers < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_watchers must be at least 1, got ", o.max_watchers));
  }
  if (o.plan_cache_entries < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--plan_cache_entries must not be negative, got ",
                     o.plan_cache_entries));
  }
  if (o.max_streams_per_device < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_streams_per_device must be 0 (the device's concurrent "
        "kernels) or more, got ",
        o.max_streams_per_device));
  }
  if (o.memory_pool_max_cached_bytes < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory_pool_max_cached_bytes must be -1 (no cap) or more, got ",
        o.memory_pool_max_cached_bytes));
  }
  if (!ParseLaunchMode(o.launch_mode).ok()) {
    return ParseLaunchMode(o.launch_mode).status();
  }
  if (o.max_queued_jobs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_queued_jobs must be at least 1, got ", o.max_queued_jobs));
  }
  if (o.max_running_jobs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_running_jobs must be at least 1, got ", o.max_running_jobs));
  }
  if (o.max_running_jobs_per_tenant < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_running_jobs_per_tenant must not be negative, got ",
                     o.max_running_jobs_per_tenant));
  }
  if (o.retain_jobs < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--retain_jobs must not be negative, got ", o.retain_jobs));
  }
  if (o.max_queued_jobs_per_tenant < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_queued_jobs_per_tenant must not be negative, got ",
                     o.max_queued_jobs_per_tenant));
  }
  if (o.trace_max_nodes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--trace_max_nodes must not be negative, got ", o.trace_max_nodes));
  }
  if (o.trace_max_spans < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--trace_max_spans must be at least 1, got ", o.trace_max_spans));
  }
  if (o.max_job_events < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_job_events must be at least 1, got ", o.max_job_events));
  }
  if (o.finished_job_events < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--finished_job_events must not be negative, got ",
                     o.finished_job_events));
  }
  if (o.retain_for <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--retain_seconds must be positive");
  }
  if (o.drain_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--drain_timeout must not be negative");
  }
  if (o.drain_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--drain_grace must not be negative");
  }
  if (o.retain_trace_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--retain_trace_bytes must not be negative, got ",
                     o.retain_trace_bytes));
  }
  if (o.retain_output_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--retain_output_bytes must not be negative, got ",
                     o.retain_output_bytes));
  }
  if (o.max_planning_nodes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_planning_nodes must not be negative, got ",
                     o.max_planning_nodes));
  }
  if (o.max_node_cost <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--max_node_cost_seconds must be positive");
  }
  return absl::OkStatus();
}

// The gRPC memory quota for `o.grpc_memory_bytes` (0: automatic).
int64_t GrpcMemoryBytes(const Daemon::Options& o) {
  if (o.grpc_memory_bytes > 0) return o.grpc_memory_bytes;
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGE_SIZE);
  const int64_t quarter = pages > 0 && page_bytes > 0
                              ? static_cast<int64_t>(pages) * page_bytes / 4
                              : int64_t{1} << 30;
  return std::max<int64_t>(quarter, int64_t{8} * o.max_message_bytes);
}

}  // namespace

Daemon::Daemon(Options options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::BuildAndStart(Options options) {
  WEFT_RETURN_IF_ERROR(CheckOptions(options));
  std::unique_ptr<Daemon> daemon(new Daemon(std::move(options)));
  WEFT_RETURN_IF_ERROR(daemon->Start());
  return daemon;
}

void Daemon::Log(absl::string_view line) const {
  if (options_.log != nullptr) *options_.log << "weftd: " << line << std::endl;
}

std::string Daemon::target() const {
  if (!tcp_address_.empty()) return tcp_address_;
  return UnixTarget(options_.unix_socket);
}

void Daemon::WarmUp(const CreatedBackend& created) {
  runtime::WarmUpOptions warm_up;
  warm_up.planner.topology = created.topology;
  if (created.max_concurrent_kernels > 0) {
    warm_up.planner.max_concurrent_kernels = created.max_concurrent_kernels;
  }
  warm_up.planner.plan_memory = options_.arena_placement;
  warm_up.trace = options_.trace_jobs;
  const absl::Time start = absl::Now();
  const absl::Status status = runtime::WarmUp(*executor_, warm_up);
  const absl::Duration took = absl::Now() - start;
  const std::string ms =
      absl::StrFormat("%.1f ms", absl::ToDoubleMilliseconds(took));
  if (status.ok()) {
    Log(absl::StrCat("warmed up ", backend_->device_count(), " device(s) in ",
                     ms));
  } else {
    Log(absl::StrCat("warm-up failed after ", ms, ": ", status.ToString(),
                     "; serving anyway"));
  }
}

absl::Status Daemon::Start() {
  WEFT_ASSIGN_OR_RETURN(CreatedBackend created,
                        CreateBackend(options_.backend));
  backend_ = std::move(created.backend);

  registry_ = std::make_shared<prometheus::Registry>();
  Metrics::Options metrics_options;
  for (int d = 0; d < backend_->device_count(); ++d) {
    metrics_options.device_uuids.push_back(backend_->device_info(d).uuid);
  }
  metrics_ = std::make_unique<Metrics>(registry_.get(), metrics_options);
  counting_ = std::make_unique<CountingBackend>(backend_.get(), metrics_.get());

  runtime::Executor::Options executor_options;
  executor_options.backend = counting_.get();
  // Room for two jobs' plans beside each other, each with its upload
  // stream.
  executor_options.max_streams_per_device =
      std::max(64, 2 * options_.max_streams_per_device + 2);
  if (options_.memory_pool_max_cached_bytes >= 0) {
    executor_options.memory_pool_max_cached_bytes =
        static_cast<uint64_t>(options_.memory_pool_max_cached_bytes);
  }
  WEFT_ASSIGN_OR_RETURN(executor_options.launch_mode,
                        ParseLaunchMode(options_.launch_mode));
  executor_options.place_buffers = options_.arena_placement;
  executor_options.trace_max_spans = options_.trace_max_spans;
  WEFT_ASSIGN_OR_RETURN(executor_, runtime::Executor::Create(executor_options));
  if (options_.warm_up) WarmUp(created);

  JobManager::Options job_options;
  job_options.executor = executor_.get();
  job_options.metrics = metrics_.get();
  job_options.max_queued_jobs = options_.max_queued_jobs;
  job_options.max_queued_per_tenant = options_.max_queued_jobs_per_tenant;
  job_options.max_running_jobs = options_.max_running_jobs;
  job_options.max_running_per_tenant = options_.max_running_jobs_per_tenant;
  for (int d = 0; d < backend_->device_count(); ++d) {
    job_options.device_memory_bytes.push_back(static_cast<int64_t>(
        runtime::UsableMemoryBytes(backend_->device_info(d))));
  }
  job_options.retain_jobs = options_.retain_jobs;
  job_options.retain_for = options_.retain_for;
  job_options.retain_output_bytes = options_.retain_output_bytes > 0
                                        ? options_.retain_output_bytes
                                        : HostMemoryBytes() / 8;
  job_options.retain_trace_bytes = options_.retain_trace_bytes > 0
                                       ? options_.retain_trace_bytes
                                       : HostMemoryBytes() / 16;
  job_options.trace_jobs = options_.trace_jobs;
  job_options.trace_max_nodes = options_.trace_max_nodes;
  job_options.max_job_events = options_.max_job_events;
  job_options.finished_job_events = options_.finished_job_events;
  job_options.plan_memory = options_.arena_placement;
  WEFT_ASSIGN_OR_RETURN(jobs_, JobManager::Create(std::move(job_options)));

  SchedulerService::Options service_options;
  service_options.jobs = jobs_.get();
  service_options.metrics = metrics_.get();
  service_options.limits.max_node_cost_us =
      absl::ToDoubleMicroseconds(options_.max_node_cost);
  service_options.backend = backend_.get();
  service_options.executor = executor_.get();
  // By default as many streams as a device runs kernels at once, so that
  // streams never serialize what the device could run side by side.
  service_options.default_max_streams_per_device =
      options_.max_streams_per_device > 0 ? options_.max_streams_per_device
      : created.max_concurrent_kernels > 0
          ? created.max_concurrent_kernels
          : scheduler::PlannerOptions().max_concurrent_kernels;
  service_options.topology = created.topology;
  service_options.max_concurrent_kernels = created.max_concurrent_kernels;
  service_options.fit_memory = options_.arena_placement;
  service_options.max_chunk_bytes = static_cast<uint32_t>(
      std::max(1024, std::min(4 << 20, options_.max_message_bytes / 2)));
  service_options.default_chunk_bytes =
      std::min<uint32_t>(1 << 20, service_options.max_chunk_bytes);
  service_options.max_watchers = options_.max_watchers;
  service_options.plan_cache.max_entries = options_.plan_cache_entries;
  service_options.max_response_bytes = options_.max_message_bytes;
  service_options.max_planning_nodes = options_.max_planning_nodes;
  service_ = std::make_unique<SchedulerService>(std::move(service_options));

  // Both are process-wide switches of gRPC; they must precede the builder.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  if (!options_.unix_socket.empty()) {
    WEFT_RETURN_IF_ERROR(CheckSocketUnused(options_.unix_socket));
  }
  grpc::ServerBuilder builder;
  if (!options_.listen.empty()) {
    builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(),
                             &tcp_port_);
  }
  if (!options_.unix_socket.empty()) {
    builder.AddListeningPort(UnixTarget(options_.unix_socket),
                             grpc::InsecureServerCredentials());
  }
  // Two daemons on one port would silently split the traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_message_bytes);
  // Every method is on the callback API: no call holds a thread of the
  // quota while it waits.
  grpc::ResourceQuota quota("weftd");
  quota.SetMaxThreads(options_.grpc_max_threads);
  quota.Resize(static_cast<size_t>(GrpcMemoryBytes(options_)));
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             options_.max_concurrent_streams);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve gRPC on --listen=", options_.listen, " --unix_socket=",
        options_.unix_socket, " (address in use or not bindable?)"));
  }
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    health->SetServingStatus(kServiceName, true);
  }
  if (!options_.listen.empty()) {
    tcp_address_ = WithPort(options_.listen, tcp_port_);
    Log(absl::StrCat("serving ", kServiceName, " on ", tcp_address_));
  }
  if (!options_.unix_socket.empty()) {
    Log(absl::StrCat("serving ", kServiceName, " on ",
                     UnixTarget(options_.unix_socket)));
  }

  if (!options_.metrics_listen.empty()) {
    collectable_ = std::make_shared<RefreshingCollectable>(registry_, [this] {
      metrics_->SetDevices(
          SampleDevices(*backend_, *executor_, jobs_->ReservedBytes()));
    });
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(options_.metrics_listen);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(
          "cannot serve metrics on --metrics_listen=", options_.metrics_listen,
          ": ", e.what()));
    }
    exposer_->RegisterCollectable(collectable_);
    std::vector<int> ports = exposer_->GetListeningPorts();
    metrics_port_ = ports.empty() ? 0 : ports.front();
    Log(absl::StrCat("metrics on http://",
                     WithPort(options_.metrics_listen, metrics_port_),
                     "/metrics"));
  }
  Log(created.description);
  if (!options_.backend.topology_file.empty()) {
    Log(absl::StrCat("copy bandwidths from ", options_.backend.topology_file));
  }
  Log("ready");
  return absl::OkStatus();
}

void Daemon::BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void Daemon::WaitForTermination() {
  sigset_t set = TerminationSignals();
  int signal = 0;
  while (sigwait(&set, &signal) != 0) {
  }
  Log(absl::StrCat("received ", signal == SIGINT ? "SIGINT" : "SIGTERM",
                   ", shutting down"));
  const absl::Time exit_deadline =
      absl::Now() + options_.drain_timeout + options_.drain_grace;
  {
    absl::MutexLock lock(&mu_);
    exit_deadline_ = exit_deadline;
  }
  watchdog_ = std::make_unique<ShutdownWatchdog>(
      exit_deadline, [this](const std::string& why) {
        Log(absl::StrCat(why, ": exiting now, ", jobs_->running(),
                         " jobs unfinished"));
        std::_Exit(1);
      });
  Stop();
}

void Daemon::Stop() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  stopped_ = true;
  if (server_ == nullptr) return;  // never started

  // Refuse new jobs before saying so: a client that sees NOT_SERVING and
  // submits anyway must be refused, never admitted into the drain.
  jobs_->StopAccepting();
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(false);
  const int queued = jobs_->CancelQueued("weftd is shutting down");
  const int64_t running = jobs_->running();
  Log(absl::StrFormat(
      "draining: %d running jobs get up to %s; %d queued jobs cancelled",
      running, absl::FormatDuration(options_.drain_timeout), queued));
  const absl::Time drain_start = absl::Now();
  if (jobs_->WaitIdle(drain_start + options_.drain_timeout)) {
    if (running > 0) {
      Log(absl::StrCat("drained in ",
                       absl::FormatDuration(absl::Trunc(
                           absl::Now() - drain_start, absl::Milliseconds(1)))));
    }
  } else {
    const std::vector<std::string> cancelled = jobs_->CancelRunning(
        "weftd is shutting down: the drain timeout expired");
    Log(absl::StrFormat("drain timeout expired: cancelling %d jobs: %s",
                        cancelled.size(), absl::StrJoin(cancelled, " ")));
    // The executor reports a cancelled run once its work in flight drained.
    jobs_->WaitIdle(absl::InfiniteFuture());
    for (const std::string& id : cancelled) {
      absl::StatusOr<JobInfo> job = jobs_->Get(id);
      if (job.ok()) {
        Log(absl::StrCat("job ", id, " ", JobStateName(job->state), " (",
                         job->nodes_done, "/", job->nodes_total,
                         " nodes done)"));
      }
    }
  }
  // Lets watchers receive the final state, then ends whatever is left
  // (health watches, for one, never end by themselves): a second at most,
  // and never past the watchdog's deadline.
  absl::Time calls_end = absl::Now() + absl::Seconds(1);
  if (exit_deadline_ != absl::InfiniteFuture()) {
    calls_end = std::min(calls_end, exit_deadline_ - absl::Milliseconds(250));
  }
  server_->Shutdown(absl::ToChronoTime(calls_end));
  StopExposer();
  if (!options_.unix_socket.empty()) {
    unlink(UnixPath(options_.unix_socket).c_str());
  }
  Log("stopped");
}

void Daemon::StopExposer() {
  if (exposer_ == nullptr) return;
  // civetweb's listener notices the stop request only when its poll returns,
  // which it does on a connection or after its poll interval (about a
  // second). Knock until it has gone.
  std::atomic<bool> stopped{false};
  std::thread knocker;
  if (metrics_port_ > 0) {
    knocker = std::thread([this, &stopped] {
      while (!stopped.load()) {
        Knock(options_.metrics_listen, metrics_port_);
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
  }
  exposer_.reset();
  stopped.store(true);
  if (knocker.joinable()) knocker.join();
}

Daemon::~Daemon() {
  Stop();
  StopExposer();
  collectable_.reset();
  server_.reset();
  service_.reset();
  jobs_.reset();
  executor_.reset();
  counting_.reset();
  metrics_.reset();
  registry_.reset();
  backend_.reset();
  watchdog_.reset();
}

}  // namespace weft::server
