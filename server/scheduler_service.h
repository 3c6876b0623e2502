// The weft.v1.Scheduler gRPC service.
//
// Handlers are thin: validate the request (GraphBuilder, planner options),
// call the JobManager or the planner, convert the status with ToGrpcStatus.
// No handler runs device work; SubmitGraph does compile and load a graph's
// user modules (Backend::PrepareModules, cached), so that code that does not
// compile is rejected with INVALID_ARGUMENT before a job exists. The service uses gRPC's synchronous API: each
// call holds a server thread, and streaming calls (WatchJob, ReadBuffer)
// check for client cancellation and deadlines between messages and at least
// every `watch_poll_interval`. ReadBuffer and GetJobTrace stream their data
// in chunks of at most max_chunk_bytes.
//
// Codes: INVALID_ARGUMENT for bad graphs and options (the message names the
// field, e.g. "graph.nodes[1].op: unknown op 'foo'"), NOT_FOUND for unknown
// job ids and buffers (naming them), FAILED_PRECONDITION for reading a job
// that has not succeeded, cancelling a finished one, and asking for the
// trace of a job that has not finished or was not traced, RESOURCE_EXHAUSTED
// when the admission queue is full (with a google.rpc.RetryInfo detail and
// the same delay as `grpc-retry-pushback-ms` trailing metadata),
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

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "runtime/backend.h"
#include "runtime/executor.h"
#include "scheduler/graph_builder.h"
#include "scheduler/topology.h"
#include "server/job_manager.h"
#include "weft/v1/weft.grpc.pb.h"
#include "weft/v1/weft.pb.h"

namespace weft::server {

// The metadata key that names the submitting tenant.
inline constexpr char kTenantMetadataKey[] = "weft-tenant";

// Thread-safe.
class SchedulerService final : public weft::v1::Scheduler::Service {
 public:
  struct Options {
    JobManager* jobs = nullptr;                 // not owned
    const runtime::Backend* backend = nullptr;  // not owned
    const runtime::Executor* executor = nullptr;  // not owned
    // Graph limits; num_devices is taken from the backend.
    scheduler::GraphLimits limits;
    int default_max_streams_per_device = 8;
    // The machine every plan models (PlannerOptions::topology and
    // max_concurrent_kernels); unset / 0: the planner's defaults.
    std::optional<scheduler::Topology> topology;
    int max_concurrent_kernels = 0;
    uint32_t default_chunk_bytes = 1 << 20;
    uint32_t max_chunk_bytes = 4 << 20;
    absl::Duration watch_poll_interval = absl::Milliseconds(100);
    // How long CancelJob waits for a running job to drain before answering
    // (bounded by the call's deadline). A job still RUNNING in the answer
    // has its cancellation under way; watch it to see it end.
    absl::Duration cancel_wait = absl::Seconds(10);
    int max_request_id_bytes = 256;
    int max_tenant_bytes = 64;
  };

  // All pointers must be set and outlive the service.
  explicit SchedulerService(Options options);

  grpc::Status SubmitGraph(grpc::ServerContext* context,
                           const weft::v1::SubmitGraphRequest* request,
                           weft::v1::SubmitGraphResponse* response) override;
  grpc::Status GetJob(grpc::ServerContext* context,
                      const weft::v1::GetJobRequest* request,
                      weft::v1::Job* response) override;
  grpc::Status WatchJob(
      grpc::ServerContext* context, const weft::v1::WatchJobRequest* request,
      grpc::ServerWriter<weft::v1::WatchJobResponse>* writer) override;
  grpc::Status CancelJob(grpc::ServerContext* context,
                         const weft::v1::CancelJobRequest* request,
                         weft::v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context,
                        const weft::v1::ListJobsRequest* request,
                        weft::v1::ListJobsResponse* response) override;
  grpc::Status PlanGraph(grpc::ServerContext* context,
                         const weft::v1::PlanGraphRequest* request,
                         weft::v1::PlanGraphResponse* response) override;
  grpc::Status ListDevices(grpc::ServerContext* context,
                           const weft::v1::ListDevicesRequest* request,
                           weft::v1::ListDevicesResponse* response) override;
  grpc::Status ReadBuffer(
      grpc::ServerContext* context, const weft::v1::ReadBufferRequest* request,
      grpc::ServerWriter<weft::v1::ReadBufferResponse>* writer) override;
  grpc::Status GetJobTrace(
      grpc::ServerContext* context,
      const weft::v1::GetJobTraceRequest* request,
      grpc::ServerWriter<weft::v1::GetJobTraceResponse>* writer) override;

 private:
  int num_devices() const { return options_.limits.num_devices; }
  // Planner options for `proto` with the current device load.
  absl::StatusOr<scheduler::PlannerOptions> PlannerOptions(
      const weft::v1::ScheduleOptions& proto) const;

  const Options options_;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_SCHEDULER_SERVICE_H_
