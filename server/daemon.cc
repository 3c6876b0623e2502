#include "server/daemon.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "scheduler/status_macros.h"
#include "server/devices.h"

namespace weft::server {
namespace {

constexpr char kServiceName[] = "weft.v1.Scheduler";

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
    return absl::InvalidArgumentError(absl::StrCat(
        "--unix_socket=", socket_flag, ": path longer than ",
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
    return absl::UnavailableError(absl::StrCat(
        "--unix_socket=", socket_flag,
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

absl::Status CheckOptions(const Daemon::Options& o) {
  if (o.listen.empty() && o.unix_socket.empty()) {
    return absl::InvalidArgumentError(
        "--listen and --unix_socket are both empty: nothing to serve on");
  }
  if (o.max_message_bytes < 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_message_bytes must be at least 1024, got ",
        o.max_message_bytes));
  }
  if (o.max_streams_per_device < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_streams_per_device must be at least 1, got ",
        o.max_streams_per_device));
  }
  if (o.max_queued_jobs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_queued_jobs must be at least 1, got ", o.max_queued_jobs));
  }
  if (o.max_running_jobs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_running_jobs must be at least 1, got ", o.max_running_jobs));
  }
  if (o.retain_jobs < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--retain_jobs must not be negative, got ", o.retain_jobs));
  }
  if (o.drain_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--drain_timeout must not be negative");
  }
  return absl::OkStatus();
}

}  // namespace

Daemon::Daemon(Options options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::BuildAndStart(
    Options options) {
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

absl::Status Daemon::Start() {
  WEFT_ASSIGN_OR_RETURN(CreatedBackend created,
                        CreateBackend(options_.backend));
  backend_ = std::move(created.backend);

  runtime::Executor::Options executor_options;
  executor_options.backend = backend_.get();
  executor_options.max_streams_per_device =
      std::max(32, options_.max_streams_per_device);
  WEFT_ASSIGN_OR_RETURN(executor_,
                        runtime::Executor::Create(executor_options));

  registry_ = std::make_shared<prometheus::Registry>();
  metrics_ = std::make_unique<Metrics>(registry_.get());

  JobManager::Options job_options;
  job_options.executor = executor_.get();
  job_options.metrics = metrics_.get();
  job_options.max_queued_jobs = options_.max_queued_jobs;
  job_options.max_running_jobs = options_.max_running_jobs;
  job_options.retain_jobs = options_.retain_jobs;
  WEFT_ASSIGN_OR_RETURN(jobs_, JobManager::Create(std::move(job_options)));

  SchedulerService::Options service_options;
  service_options.jobs = jobs_.get();
  service_options.backend = backend_.get();
  service_options.executor = executor_.get();
  service_options.default_max_streams_per_device =
      options_.max_streams_per_device;
  service_options.max_chunk_bytes = static_cast<uint32_t>(
      std::max(1024, std::min(4 << 20, options_.max_message_bytes / 2)));
  service_options.default_chunk_bytes =
      std::min<uint32_t>(1 << 20, service_options.max_chunk_bytes);
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
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve gRPC on --listen=", options_.listen,
        " --unix_socket=", options_.unix_socket,
        " (address in use or not bindable?)"));
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
          ToDeviceSamples(DescribeDevices(*backend_, *executor_)));
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
  Stop();
}

void Daemon::Stop() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  stopped_ = true;
  if (server_ == nullptr) return;  // never started

  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health != nullptr) health->SetServingStatus(false);
  jobs_->StopAccepting();
  const int queued = jobs_->CancelQueued("weftd is shutting down");
  const int64_t running = jobs_->running();
  Log(absl::StrFormat(
      "draining: %d running jobs get up to %s; %d queued jobs cancelled",
      running, absl::FormatDuration(options_.drain_timeout), queued));
  if (!jobs_->WaitIdle(absl::Now() + options_.drain_timeout)) {
    const int cancelled = jobs_->CancelRunning(
        "weftd is shutting down: the drain timeout expired");
    Log(absl::StrFormat("drain timeout expired: cancelling %d jobs",
                        cancelled));
    // The executor reports a cancelled run once its work in flight drained.
    jobs_->WaitIdle(absl::InfiniteFuture());
  }
  // Lets watchers receive the final state, then ends whatever is left.
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::seconds(2));
  exposer_.reset();
  if (!options_.unix_socket.empty()) {
    unlink(UnixPath(options_.unix_socket).c_str());
  }
  Log("stopped");
}

Daemon::~Daemon() {
  Stop();
  exposer_.reset();
  collectable_.reset();
  server_.reset();
  service_.reset();
  jobs_.reset();
  metrics_.reset();
  registry_.reset();
  executor_.reset();
  backend_.reset();
}

}  // namespace weft::server
