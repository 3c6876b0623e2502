// The weft.v1.Scheduler gRPC service.
//
// Handlers are thin: validate the request (GraphBuilder, planner options),
// call the JobManager or the planner, convert the status with ToGrpcStatus.
// No handler runs device work; SubmitGraph does compile and load a graph's
// user modules (Backend::PrepareModules, cached), so that code that does not
// compile is rejected with INVALID_ARGUMENT before a job exists.
//
// Threads: every RPC is on gRPC's callback API; none holds a thread while
// it waits. The unary ones take their requests as bytes (a request that
// does not parse is INVALID_ARGUMENT saying so) and answer on gRPC's
// callback thread that received them, or on the submit workers for large
// requests and large graphs. CancelJob requests the cancellation at once
// and answers a running job when it ends, when cancel_wait passes or when
// its client goes away, from a callback (cancel_reactor.h). The streaming
// RPCs (WatchJob, ReadBuffer, GetJobTrace) hold no thread between
// messages: a stream has at most one write outstanding and issues the next
// one when that write completes.
// A watch is woken by its job and by its client going away or its
// deadline, never by a timer, and writes on one thread of the service's own
// (watch_reactor.h).
// ReadBuffer and GetJobTrace stream their data in chunks of at most
// max_chunk_bytes.
//
// At most max_watchers WatchJob calls are open at once; one more is refused
// with RESOURCE_EXHAUSTED carrying a retry hint (a google.rpc.RetryInfo
// detail and `grpc-retry-pushback-ms` trailing metadata) of
// watcher_retry_delay.
//
// Codes: INVALID_ARGUMENT for bad graphs and options (the message names the
// field, e.g. "graph.nodes[1].op: unknown op 'foo'"), NOT_FOUND for unknown
// job ids and buffers (naming them), FAILED_PRECONDITION for reading a job
// that has not succeeded, cancelling a finished one, and asking for the
// trace of a job that has not finished or was not traced, RESOURCE_EXHAUSTED
// when the admission queue is full or max_watchers watches are open (with a
// google.rpc.RetryInfo detail and the same delay as `grpc-retry-pushback-ms`
// trailing metadata),
// UNAVAILABLE while draining, DEADLINE_EXCEEDED or CANCELLED (no job
// created) when the caller's deadline passes or the caller goes away before
// the job is admitted.
//
// Submissions may carry the tenant in the `weft-tenant` request metadata
// (at most max_tenant_bytes of letters, digits, '-', '_', '.'; absent
// means the anonymous tenant ""); request ids are scoped by tenant, and the
// job manager shares the devices fairly between tenants.
#ifndef WEFT_SERVER_SCHEDULER_SERVICE_H_
#define WEFT_SERVER_SCHEDULER_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "runtime/backend.h"
#include "runtime/executor.h"
#include "scheduler/graph_builder.h"
#include "scheduler/topology.h"
#include "server/call_workers.h"
#include "server/job_manager.h"
#include "server/memory_trimmer.h"
#include "server/metrics.h"
#include "server/plan_cache.h"
#include "server/planning_limiter.h"
#include "server/request_checks.h"
#include "weft/v1/weft.grpc.pb.h"
#include "weft/v1/weft.pb.h"

namespace weft::server {

class CancelReactor;  // cancel_reactor.h
class WatchWaker;     // watch_reactor.h

// Every method on the callback API; the unary ones raw, so that a request
// that does not parse as its message is INVALID_ARGUMENT saying so.
using SchedulerServiceBase =
    weft::v1::Scheduler::WithRawCallbackMethod_SubmitGraph<
        weft::v1::Scheduler::WithRawCallbackMethod_GetJob<
            weft::v1::Scheduler::WithRawCallbackMethod_ListJobs<
                weft::v1::Scheduler::WithRawCallbackMethod_PlanGraph<
                    weft::v1::Scheduler::WithRawCallbackMethod_ListDevices<
                        weft::v1::Scheduler::WithRawCallbackMethod_CancelJob<
                            weft::v1::Scheduler::WithCallbackMethod_WatchJob<
                                weft::v1::Scheduler::
                                    WithCallbackMethod_ReadBuffer<
                                        weft::v1::Scheduler::
                                            WithCallbackMethod_GetJobTrace<
                                                weft::v1::Scheduler::
                                                    Service>>>>>>>>>;

// Thread-safe.
class SchedulerService final : public SchedulerServiceBase {
 public:
  struct Options {
    JobManager* jobs = nullptr;                   // not owned
    const runtime::Backend* backend = nullptr;    // not owned
    const runtime::Executor* executor = nullptr;  // not owned
    // Graph limits; num_devices is taken from the backend.
    scheduler::GraphLimits limits;
    int default_max_streams_per_device = 8;
    // The machine every plan models (PlannerOptions::topology and
    // max_concurrent_kernels); unset / 0: the planner's defaults.
    std::optional<scheduler::Topology> topology;
    int max_concurrent_kernels = 0;
    // Plans fit each device's memory with spills and fills
    // (PlannerOptions::fit_memory), as jobs that place their buffers do.
    bool fit_memory = true;
    uint32_t default_chunk_bytes = 1 << 20;
    uint32_t max_chunk_bytes = 4 << 20;
    // WatchJob calls open at once; beyond it RESOURCE_EXHAUSTED with a
    // retry hint of watcher_retry_delay.
    int max_watchers = 4096;
    absl::Duration watcher_retry_delay = absl::Seconds(1);
    // How long CancelJob waits for a running job to drain before answering
    // (bounded by the call's deadline); it holds no thread meanwhile. A job
    // still RUNNING in the answer has its cancellation under way; watch it
    // to see it end.
    absl::Duration cancel_wait = absl::Seconds(10);
    int max_request_id_bytes = 256;
    int max_tenant_bytes = 64;
    // The largest answer the server sends (its max send message size): a
    // PlanGraph whose plan cannot fit is refused before planning when the
    // graph alone shows it (scheduler/plan_size.h), else after.
    int64_t max_response_bytes = 64 << 20;
    // Nodes planned at once over PlanGraph and SubmitGraph
    // (planning_limiter.h); 0: limits.max_nodes.
    int64_t max_planning_nodes = 0;
    // Threads that plan submitted graphs of more than kInlineSubmitNodes
    // nodes (smaller ones are planned on gRPC's callback thread that
    // received them); 0: the machine's cores, at least 2.
    int submit_threads = 0;
    // Plans kept for graphs submitted again (plan_cache.h).
    PlanCache::Options plan_cache;
    // Not owned. Optional: without it the service counts into a registry
    // of its own that nobody exports.
    Metrics* metrics = nullptr;
  };

  // Graphs of at most this many nodes (bodies of control nodes included)
  // are admitted on the thread that received them: planning them takes
  // well under a millisecond.
  static constexpr int kInlineSubmitNodes = 64;
  // Requests of at most this many bytes are parsed on the thread that
  // received them, larger ones on the submit workers.
  static constexpr size_t kInlineParseBytes = 64 << 10;
  // After requests of at least this many bytes the daemon hands freed
  // memory back to the system (MemoryTrimmer).
  static constexpr size_t kTrimAfterBytes = 16 << 20;

  // All pointers must be set and outlive the service. Starts the thread
  // that resumes woken watches and answers drained cancellations.
  explicit SchedulerService(Options options);
  // REQUIRES: no call is open (the server has shut down).
  ~SchedulerService() override;
  SchedulerService(const SchedulerService&) = delete;
  SchedulerService& operator=(const SchedulerService&) = delete;

  grpc::ServerUnaryReactor* SubmitGraph(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<weft::v1::WatchJobResponse>* WatchJob(
      grpc::CallbackServerContext* context,
      const weft::v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PlanGraph(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<weft::v1::ReadBufferResponse>* ReadBuffer(
      grpc::CallbackServerContext* context,
      const weft::v1::ReadBufferRequest* request) override;
  grpc::ServerWriteReactor<weft::v1::GetJobTraceResponse>* GetJobTrace(
      grpc::CallbackServerContext* context,
      const weft::v1::GetJobTraceRequest* request) override;

  // WatchJob calls open now.
  int watchers() const { return watchers_.load(std::memory_order_relaxed); }
  // Calls handed to the submit workers so far.
  int64_t calls_on_workers() const {
    return on_workers_.load(std::memory_order_relaxed);
  }

 private:
  int num_devices() const { return options_.limits.num_devices; }
  // Parses `request` as a Request (INVALID_ARGUMENT if it does not parse),
  // has `handle(context, parsed, &answer)` answer it and serializes the
  // answer into `response`. Runs on the thread that received the call,
  // or on the submit workers for a request of more than kInlineParseBytes
  // or one that `offload(parsed)` says is long work.
  template <typename Request, typename Response, typename Handle,
            typename Offload>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response, Handle handle,
                                   Offload offload);

  // The methods' work, on parsed requests.
  grpc::Status Submit(grpc::CallbackServerContext* context,
                      const weft::v1::SubmitGraphRequest& request,
                      weft::v1::SubmitGraphResponse* response);
  grpc::Status Get(const weft::v1::GetJobRequest& request,
                   weft::v1::Job* response);
  grpc::Status List(const weft::v1::ListJobsRequest& request,
                    weft::v1::ListJobsResponse* response);
  grpc::Status Plan(grpc::CallbackServerContext* context,
                    const weft::v1::PlanGraphRequest& request,
                    weft::v1::PlanGraphResponse* response);
  grpc::Status Devices(weft::v1::ListDevicesResponse* response);
  // Requests the cancellation and has `reactor` answer: at once, or when a
  // running job has drained (CancelReactor).
  void Cancel(grpc::CallbackServerContext* context,
              const weft::v1::CancelJobRequest& request,
              CancelReactor* reactor);
  // Planner options for `proto` with the current device load.
  absl::StatusOr<scheduler::PlannerOptions> PlannerOptions(
      const weft::v1::ScheduleOptions& proto) const;

  const Options options_;
  const MetricsOrOwn metrics_;
  PlanningLimiter planning_;
  // Gives memory back after calls on large graphs.
  MemoryTrimmer trimmer_;
  // Plans of graphs submitted before (SubmitGraph).
  PlanCache plans_;
  const std::unique_ptr<WatchWaker> waker_;
  // Runs long calls (planning large graphs); destroyed (joined) before the
  // members above.
  CallWorkers submit_workers_;
  // Open WatchJob calls, each holding one of max_watchers slots.
  std::atomic<int> watchers_{0};
  std::atomic<int64_t> on_workers_{0};
};

}  // namespace weft::server

#endif  // WEFT_SERVER_SCHEDULER_SERVICE_H_
