// The weftd daemon: every component wired together.
//
// BuildAndStart creates, in order, the device backend (backend_factory.h),
// the metrics registry, a CountingBackend over the backend (copy bytes),
// the executor (warmed up by one small job over every device, unless
// Options::warm_up is off), the job manager and the Scheduler service,
// then serves it
// over gRPC on a TCP address and/or a unix socket (with the standard health
// service, Check and Watch, and server reflection) and exposes /metrics over
// HTTP. Stop drains:
//
//   health NOT_SERVING (every service; Watch streams see the change) ->
//   submissions answer UNAVAILABLE -> queued jobs are cancelled -> running
//   jobs get drain_timeout to finish, then are cancelled (logged by id;
//   watchers see them CANCELLED with the reason) -> the gRPC server and the
//   metrics endpoint shut down.
//
// The gRPC API keeps answering during the drain (Get, Watch, ReadBuffer),
// so clients can follow their jobs to the end.
//
// gRPC runs within a resource quota: at most grpc_max_threads threads and
// grpc_memory_bytes of buffers; every method is on the callback API, so no
// call holds a thread while it waits. Each
// connection carries at most max_concurrent_streams calls at once (the
// HTTP/2 setting; a client's further calls wait for a free stream), and at
// most max_watchers WatchJob streams are open in all (SchedulerService).
//
// Components are destroyed in the reverse order of creation by the
// destructor. main.cc only turns flags into Options.
#ifndef WEFT_SERVER_DAEMON_H_
#define WEFT_SERVER_DAEMON_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "runtime/backend.h"
#include "runtime/executor.h"
#include "server/backend_factory.h"
#include "server/job_manager.h"
#include "server/metrics.h"
#include "server/scheduler_service.h"
#include "server/shutdown_watchdog.h"

namespace weft::server {

// Thread-safe.
class Daemon {
 public:
  struct Options {
    std::string listen = "127.0.0.1:50051";         // "" disables; port 0 picks
    std::string unix_socket = "/tmp/weftd.sock";    // "" disables
    std::string metrics_listen = "127.0.0.1:9464";  // "" disables
    BackendOptions backend;
    int max_message_bytes = 64 << 20;
    // Threads gRPC may run unary calls on (grpc::ResourceQuota).
    int grpc_max_threads = 64;
    // Memory gRPC may hold in buffers (grpc::ResourceQuota); 0: a quarter
    // of the machine's memory, at least 8 * max_message_bytes.
    int64_t grpc_memory_bytes = 0;
    // Concurrent calls (HTTP/2 streams) per client connection.
    int max_concurrent_streams = 1024;
    // WatchJob streams open at once, over all connections.
    int max_watchers = 4096;
    // Plans kept for graphs submitted again (plan_cache.h); 0: none.
    int plan_cache_entries = 256;
    // 0: as many as a device runs kernels at once.
    int max_streams_per_device = 0;
    // Bytes of freed device memory each device's pool keeps for reuse
    // (runtime/memory_pool.h). -1: no cap (the cache is released when a
    // device runs out of memory); 0: no caching.
    int64_t memory_pool_max_cached_bytes = -1;
    // How jobs that leave it to the daemon (ScheduleOptions.launch_mode
    // LAUNCH_AUTO) issue their device work: "auto" (device graphs on GPUs,
    // node by node on simulated GPUs), "streams" or "graphs"
    // (runtime::LaunchMode).
    std::string launch_mode = "auto";
    // Place each job's buffers at the offsets of its memory plan, in one
    // arena per device taken from the memory pool, so that buffers whose
    // lifetimes do not overlap share memory; false allocates every buffer
    // by itself for the whole job (runtime::Executor::Options).
    bool arena_placement = true;
    // Run one small job over every device before serving
    // (runtime/warm_up.h), so that the first client's job pays no
    // first-use costs. A failed warm-up is logged; weftd serves anyway.
    bool warm_up = true;
    int max_queued_jobs = 1024;
    // 0: no bound per tenant beyond max_queued_jobs.
    int max_queued_jobs_per_tenant = 0;
    int max_running_jobs = 64;
    // 0: max_running_jobs - 1 (at least 1): one slot is left to others.
    int max_running_jobs_per_tenant = 0;
    absl::Duration drain_timeout = absl::Seconds(30);
    // After a termination signal, the process ends at the latest
    // drain_timeout + drain_grace later (exit status 1), whatever still
    // runs; a second SIGTERM or SIGINT ends it at once (also status 1).
    absl::Duration drain_grace = absl::Seconds(5);
    int retain_jobs = 1000;
    absl::Duration retain_for = absl::InfiniteDuration();
    // Bytes of output buffers finished jobs hold together; the oldest
    // jobs' outputs are released first. 0: an eighth of the host's memory.
    int64_t retain_output_bytes = 0;
    // Bytes of traces finished jobs hold together (0: a sixteenth of the
    // host's memory).
    int64_t retain_trace_bytes = 0;
    // The largest cost.estimated_us one node may declare.
    absl::Duration max_node_cost = absl::Minutes(10);
    // Nodes planned at once over all requests; 0: the graph node limit.
    int64_t max_planning_nodes = 0;
    // Record a trace of every job of at most trace_max_nodes nodes, kept
    // with the job for GetJobTrace.
    bool trace_jobs = true;
    int64_t trace_max_nodes = 200000;
    // Spans one job's trace records at most (loops run many).
    int64_t trace_max_spans = int64_t{1} << 19;
    // Node events each job keeps for WatchJob while it runs, and once it is
    // over and nobody watches it (JobManager::Options).
    int64_t max_job_events = 65536;
    int64_t finished_job_events = 256;
    // Start-up and shutdown lines go here; null keeps quiet. Not owned.
    std::ostream* log = nullptr;
  };

  // Starts serving. Errors name the flag at fault (bad values, addresses
  // that cannot be bound, no gRPC endpoint at all).
  static absl::StatusOr<std::unique_ptr<Daemon>> BuildAndStart(Options options);

  // Stops (if not stopped) and releases everything.
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Blocks SIGTERM and SIGINT in the calling thread and in every thread it
  // starts later, so that WaitForTermination can receive them. Call first
  // thing in main(), before any thread exists.
  static void BlockTerminationSignals();

  // Waits for SIGTERM or SIGINT, then drains and stops (Stop), under a
  // ShutdownWatchdog that ends the process after drain_timeout +
  // drain_grace or on a second signal.
  // REQUIRES: BlockTerminationSignals() was called before threads started.
  void WaitForTermination() ABSL_LOCKS_EXCLUDED(mu_);

  // Drains as described above and stops serving. Idempotent; concurrent
  // callers wait for the first one.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // The bound TCP port (0 when TCP is disabled).
  int tcp_port() const { return tcp_port_; }
  // The bound metrics port (0 when disabled).
  int metrics_port() const { return metrics_port_; }
  // The gRPC target for clients, e.g. "127.0.0.1:50051" or "unix:/path".
  std::string target() const;
  // For tests and embedding; valid until destruction.
  JobManager* job_manager() const { return jobs_.get(); }

 private:
  explicit Daemon(Options options);
  absl::Status Start();
  // Runs the warm-up job (Options::warm_up) and logs how it went.
  void WarmUp(const CreatedBackend& created);
  void Log(absl::string_view line) const;
  // Shuts the /metrics endpoint down without waiting out its poll interval.
  void StopExposer();

  const Options options_;

  // Created by Start, in this order; destroyed in reverse.
  std::unique_ptr<runtime::Backend> backend_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<runtime::Backend> counting_;  // wraps backend_
  std::unique_ptr<runtime::Executor> executor_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<SchedulerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<RefreshingCollectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  // Armed by WaitForTermination; lives until the daemon is destroyed.
  std::unique_ptr<ShutdownWatchdog> watchdog_;
  int tcp_port_ = 0;
  int metrics_port_ = 0;
  std::string tcp_address_;

  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // When the watchdog ends the process; infinite until a signal arms it.
  absl::Time exit_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace weft::server

#endif  // WEFT_SERVER_DAEMON_H_
