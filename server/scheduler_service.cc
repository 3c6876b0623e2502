#include "server/scheduler_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/retry_info.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/byte_buffer.h"
#include "scheduler/plan_proto.h"
#include "scheduler/plan_size.h"
#include "scheduler/planner.h"
#include "scheduler/status_macros.h"
#include "server/cancel_reactor.h"
#include "server/devices.h"
#include "server/grpc_status.h"
#include "server/job_proto.h"
#include "server/request_checks.h"
#include "server/stream_reactors.h"
#include "server/watch_reactor.h"

namespace weft::server {
namespace {

// Graphs from this many nodes are large enough to hand memory back to the
// system after the call.
constexpr int kLargeGraphNodes = 100000;

int SubmitThreads(int requested) {
  if (requested > 0) return requested;
  return std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
}

// The submission's key in the plan cache: the graph's and the options'
// wire bytes, and the devices' memory the plan fits; empty where a plan is
// not kept: with STREAM_AWARE (which weighs the streams other jobs keep
// busy at each submission), or for a graph of more than
// kMaxCachedGraphNodes nodes (its planning dwarfs its building, and its key
// would be large).
constexpr int kMaxCachedGraphNodes = 4096;
std::string PlanCacheKey(const weft::v1::SubmitGraphRequest& request,
                         const scheduler::PlannerOptions& planner,
                         const PlanCache::Options& cache) {
  if (cache.max_entries <= 0 ||
      request.graph().nodes_size() > kMaxCachedGraphNodes ||
      planner.device_policy == scheduler::DevicePolicyKind::kStreamAware) {
    return "";
  }
  std::string key = request.graph().SerializeAsString();
  // The graph's length first: no two (graph, options) pairs share a key.
  key.insert(0, absl::StrCat(key.size(), ":"));
  absl::StrAppend(&key, absl::StrJoin(planner.device_memory_bytes, ","), ":");
  request.options().AppendToString(&key);
  return key;
}

}  // namespace

SchedulerService::SchedulerService(Options options)
    : options_([&options] {
        options.limits.num_devices = options.backend->device_count();
        return std::move(options);
      }()),
      metrics_(options_.metrics),
      planning_(options_.max_planning_nodes > 0 ? options_.max_planning_nodes
                                                : options_.limits.max_nodes),
      plans_(options_.plan_cache),
      waker_(std::make_unique<WatchWaker>()),
      submit_workers_(SubmitThreads(options_.submit_threads)) {}

SchedulerService::~SchedulerService() = default;

absl::StatusOr<scheduler::PlannerOptions> SchedulerService::PlannerOptions(
    const weft::v1::ScheduleOptions& proto) const {
  if (!weft::v1::LaunchMode_IsValid(proto.launch_mode())) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.launch_mode: unknown launch mode ",
                     static_cast<int>(proto.launch_mode()),
                     " (LAUNCH_AUTO, LAUNCH_STREAMS or LAUNCH_DEVICE_GRAPHS)"));
  }
  if (!weft::v1::ControlMode_IsValid(proto.control_mode())) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.control_mode: unknown control mode ",
                     static_cast<int>(proto.control_mode()),
                     " (CONTROL_AUTO, CONTROL_HOST or CONTROL_DEVICE)"));
  }
  if (proto.max_streams_per_device() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.max_streams_per_device: must not be negative, got ",
        proto.max_streams_per_device()));
  }
  WEFT_ASSIGN_OR_RETURN(
      scheduler::PlannerOptions planner,
      scheduler::PlannerOptionsFromProto(
          proto, num_devices(), options_.default_max_streams_per_device));
  planner.topology = options_.topology;
  if (options_.backend != nullptr) {
    for (int d = 0; d < num_devices(); ++d) {
      planner.device_memory_bytes.push_back(static_cast<int64_t>(
          runtime::UsableMemoryBytes(options_.backend->device_info(d))));
    }
  }
  if (options_.max_concurrent_kernels > 0) {
    planner.max_concurrent_kernels = options_.max_concurrent_kernels;
  }
  return planner;
}

template <typename Request, typename Response, typename Handle,
          typename Offload>
grpc::ServerUnaryReactor* SchedulerService::Answer(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response, Handle handle, Offload offload) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Parses (if not yet), answers and finishes the call.
  // A large request's memory goes back to the system once it is freed:
  // the trim is asked for after the parsed request and the answer are gone
  // (the trimmer waits a little longer for gRPC's copy of the bytes).
  const bool large = request->Length() >= kTrimAfterBytes;
  auto finish = [this, context, request, response, reactor, handle,
                 large](std::unique_ptr<Request> parsed) {
    const TrimWhenDone trim(&trimmer_, large);
    if (parsed == nullptr) {
      parsed = std::make_unique<Request>();
      if (grpc::Status s = Parse(*request, parsed.get()); !s.ok()) {
        reactor->Finish(s);
        return;
      }
    }
    grpc::Status status;
    {
      Response answer;
      status = handle(context, *parsed, &answer);
      if (status.ok()) {
        bool own_buffer = false;
        status = grpc::SerializationTraits<Response>::Serialize(
            answer, response, &own_buffer);
      }
    }
    reactor->Finish(status);
    parsed.reset();
  };
  std::unique_ptr<Request> parsed;
  if (request->Length() <= kInlineParseBytes) {
    parsed = std::make_unique<Request>();
    if (grpc::Status s = Parse(*request, parsed.get()); !s.ok()) {
      reactor->Finish(s);
      return reactor;
    }
    if (!offload(*parsed)) {
      finish(std::move(parsed));
      return reactor;
    }
  }
  // gRPC keeps the context, request and response until Finish.
  on_workers_.fetch_add(1, std::memory_order_relaxed);
  submit_workers_.Run([finish, parsed = std::move(parsed)]() mutable {
    finish(std::move(parsed));
  });
  return reactor;
}

namespace {

// Work for the submit workers: graphs of more than kInlineSubmitNodes.
template <typename Request>
bool LargeGraph(const Request& request) {
  return CountNodes(request.graph().nodes()) >
         SchedulerService::kInlineSubmitNodes;
}

template <typename Request>
bool Never(const Request&) {
  return false;
}

}  // namespace

grpc::ServerUnaryReactor* SchedulerService::SubmitGraph(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  using Request = weft::v1::SubmitGraphRequest;
  return Answer<Request, weft::v1::SubmitGraphResponse>(
      context, request, response,
      [this](grpc::CallbackServerContext* c, const Request& r,
             weft::v1::SubmitGraphResponse* a) { return Submit(c, r, a); },
      LargeGraph<Request>);
}

grpc::ServerUnaryReactor* SchedulerService::GetJob(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  using Request = weft::v1::GetJobRequest;
  return Answer<Request, weft::v1::Job>(
      context, request, response,
      [this](grpc::CallbackServerContext*, const Request& r, weft::v1::Job* a) {
        return Get(r, a);
      },
      Never<Request>);
}

grpc::ServerUnaryReactor* SchedulerService::ListJobs(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  using Request = weft::v1::ListJobsRequest;
  return Answer<Request, weft::v1::ListJobsResponse>(
      context, request, response,
      [this](grpc::CallbackServerContext*, const Request& r,
             weft::v1::ListJobsResponse* a) { return List(r, a); },
      Never<Request>);
}

grpc::ServerUnaryReactor* SchedulerService::PlanGraph(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  using Request = weft::v1::PlanGraphRequest;
  return Answer<Request, weft::v1::PlanGraphResponse>(
      context, request, response,
      [this](grpc::CallbackServerContext* c, const Request& r,
             weft::v1::PlanGraphResponse* a) { return Plan(c, r, a); },
      LargeGraph<Request>);
}

grpc::ServerUnaryReactor* SchedulerService::ListDevices(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  using Request = weft::v1::ListDevicesRequest;
  return Answer<Request, weft::v1::ListDevicesResponse>(
      context, request, response,
      [this](grpc::CallbackServerContext*, const Request&,
             weft::v1::ListDevicesResponse* a) { return Devices(a); },
      Never<Request>);
}

grpc::Status SchedulerService::Submit(
    grpc::CallbackServerContext* context,
    const weft::v1::SubmitGraphRequest& request,
    weft::v1::SubmitGraphResponse* response) {
  const TrimWhenDone trim(&trimmer_,
                          request.graph().nodes_size() >= kLargeGraphNodes);
  if (context->IsCancelled()) return ClientGone();
  if (static_cast<int>(request.request_id().size()) >
      options_.max_request_id_bytes) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "request_id: longer than ", options_.max_request_id_bytes, " bytes")));
  }
  absl::StatusOr<std::string> tenant =
      TenantOf(*context, options_.max_tenant_bytes);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  absl::StatusOr<scheduler::PlannerOptions> planner =
      PlannerOptions(request.options());
  if (!planner.ok()) return ToGrpcStatus(planner.status());

  JobSpec spec;
  // A graph submitted before with the same options is neither built nor
  // planned again.
  std::string key = PlanCacheKey(request, *planner, options_.plan_cache);
  if (!key.empty()) {
    spec.checked = plans_.Find(key);
    metrics_->PlanCacheLookup(spec.checked.has_value());
  }
  if (spec.checked.has_value()) {
    spec.graph = spec.checked->graph();
  } else {
    absl::StatusOr<scheduler::Graph> graph =
        scheduler::BuildGraph(request.graph(), options_.limits);
    if (!graph.ok()) return ToGrpcStatus(graph.status());
    if (absl::Status s =
            CheckControlMode(*graph, request.options(), options_.backend);
        !s.ok()) {
      return ToGrpcStatus(s);
    }
    // User code is compiled now, so that its errors reach the submitter.
    if (!graph->modules().empty() && options_.backend != nullptr) {
      absl::Status prepared = options_.backend->PrepareModules(*graph);
      if (!prepared.ok()) return ToGrpcStatus(prepared);
    }
    spec.graph = std::make_shared<const scheduler::Graph>(*std::move(graph));
  }
  spec.planner_options = *std::move(planner);
  switch (request.options().launch_mode()) {
    case weft::v1::LAUNCH_STREAMS:
      spec.launch_mode = runtime::LaunchMode::kStreams;
      break;
    case weft::v1::LAUNCH_DEVICE_GRAPHS:
      spec.launch_mode = runtime::LaunchMode::kDeviceGraphs;
      break;
    case weft::v1::LAUNCH_AUTO:
      spec.launch_mode = runtime::LaunchMode::kAuto;
      break;
    default:  // refused by PlannerOptions
      return ToGrpcStatus(absl::InternalError("unchecked launch_mode"));
  }
  spec.control_mode = ControlModeOf(request.options());
  spec.request_id = request.request_id();
  spec.priority = request.priority();
  spec.tenant = *std::move(tenant);
  spec.deadline = DeadlineOf(*context);
  spec.cancelled = [context] { return context->IsCancelled(); };
  // Admission plans the graph: it counts against the planning bound.
  std::optional<PlanningLimiter::Lease> lease;
  if (!spec.checked.has_value()) {
    absl::StatusOr<PlanningLimiter::Lease> acquired =
        planning_.TryAcquire(spec.graph->num_nodes());
    if (!acquired.ok()) return Rejected(context, acquired.status());
    lease.emplace(*std::move(acquired));
  }
  // Kept only for graphs without user code, whose modules are prepared at
  // every submission.
  const bool keep = !key.empty() && !spec.checked.has_value() &&
                    spec.graph->modules().empty();
  std::optional<runtime::CheckedPlan> planned;
  absl::StatusOr<JobInfo> job =
      options_.jobs->Submit(std::move(spec), keep ? &planned : nullptr);
  if (!job.ok()) return Rejected(context, job.status());
  if (planned.has_value()) plans_.Insert(std::move(key), *std::move(planned));
  *response->mutable_job() = JobToProto(*job);
  return grpc::Status::OK;
}

grpc::Status SchedulerService::Get(const weft::v1::GetJobRequest& request,
                                   weft::v1::Job* response) {
  absl::Status valid = CheckJobId(request.job_id());
  if (!valid.ok()) return ToGrpcStatus(valid);
  absl::StatusOr<JobInfo> job = options_.jobs->Get(request.job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = JobToProto(*job);
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<weft::v1::WatchJobResponse>*
SchedulerService::WatchJob(grpc::CallbackServerContext* context,
                           const weft::v1::WatchJobRequest* request) {
  using Response = weft::v1::WatchJobResponse;
  absl::Status valid = CheckJobId(request->job_id());
  if (!valid.ok()) return new Refused<Response>(ToGrpcStatus(valid));
  if (watchers_.fetch_add(1, std::memory_order_relaxed) >=
      options_.max_watchers) {
    watchers_.fetch_sub(1, std::memory_order_relaxed);
    return new Refused<Response>(Rejected(
        context,
        WithRetryDelay(absl::ResourceExhaustedError(absl::StrCat(
                           "job_id: ", request->job_id(),
                           ": cannot watch now, ", options_.max_watchers,
                           " watches are open (the daemon's "
                           "--max_watchers); retry later")),
                       options_.watcher_retry_delay)));
  }
  absl::StatusOr<std::unique_ptr<JobWatch>> watch =
      options_.jobs->Watch(request->job_id());
  if (!watch.ok()) {
    watchers_.fetch_sub(1, std::memory_order_relaxed);
    return new Refused<Response>(ToGrpcStatus(watch.status()));
  }
  return new WatchReactor(*std::move(watch), waker_.get(), &watchers_);
}

grpc::ServerUnaryReactor* SchedulerService::CancelJob(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  auto* reactor = new CancelReactor(response, waker_.get());
  // gRPC keeps the context, request and response until the reactor hands
  // the call over (CancelReactor).
  auto start = [this, context, request, reactor] {
    weft::v1::CancelJobRequest parsed;
    if (grpc::Status s = Parse(*request, &parsed); !s.ok()) {
      reactor->Fail(std::move(s));
      return;
    }
    Cancel(context, parsed, reactor);
  };
  if (request->Length() <= kInlineParseBytes) {
    start();
  } else {
    on_workers_.fetch_add(1, std::memory_order_relaxed);
    submit_workers_.Run(std::move(start));
  }
  return reactor;
}

void SchedulerService::Cancel(grpc::CallbackServerContext* context,
                              const weft::v1::CancelJobRequest& request,
                              CancelReactor* reactor) {
  absl::Status valid = CheckJobId(request.job_id());
  if (!valid.ok()) {
    reactor->Fail(ToGrpcStatus(valid));
    return;
  }
  absl::StatusOr<JobInfo> job = options_.jobs->Cancel(request.job_id());
  if (!job.ok()) {
    reactor->Fail(ToGrpcStatus(job.status()));
    return;
  }
  if (job->state != JobState::kRunning) {
    reactor->Answer(*job);
    return;
  }
  // Answer with the outcome when the run drains quickly, as it usually
  // does; otherwise with the job as it is then (still RUNNING, cancelling).
  absl::StatusOr<std::unique_ptr<JobWatch>> watch =
      options_.jobs->Watch(request.job_id());
  if (!watch.ok()) {  // no longer retained: as the cancellation found it
    reactor->Answer(*job);
    return;
  }
  const absl::Time deadline =
      std::min(absl::Now() + options_.cancel_wait, DeadlineOf(*context));
  reactor->AnswerWhenTerminal(*std::move(watch), deadline);
}

grpc::Status SchedulerService::List(const weft::v1::ListJobsRequest& request,
                                    weft::v1::ListJobsResponse* response) {
  if (request.page_size() < 0) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "page_size: must not be negative, got ", request.page_size())));
  }
  std::optional<JobState> state;
  if (request.state() != weft::v1::JOB_STATE_UNSPECIFIED) {
    absl::StatusOr<JobState> parsed = JobStateFromProto(request.state());
    if (!parsed.ok()) return ToGrpcStatus(parsed.status());
    state = *parsed;
  }
  for (const JobInfo& job : options_.jobs->List(state, request.page_size())) {
    *response->add_jobs() = JobToProto(job);
  }
  return grpc::Status::OK;
}

grpc::Status SchedulerService::Plan(grpc::CallbackServerContext* context,
                                    const weft::v1::PlanGraphRequest& request,
                                    weft::v1::PlanGraphResponse* response) {
  // After a large graph, the memory of parsing, building and planning it
  // goes back to the system, not only to the allocator.
  const TrimWhenDone trim(&trimmer_,
                          request.graph().nodes_size() >= kLargeGraphNodes);

  absl::StatusOr<scheduler::PlannerOptions> planner =
      PlannerOptions(request.options());
  if (!planner.ok()) return ToGrpcStatus(planner.status());
  // Refused before any work when the answer could not be sent.
  const int nodes = request.graph().nodes_size();
  const int64_t at_least =
      scheduler::PlanProtoBytesAtLeast(request.graph(), *planner);
  if (at_least > options_.max_response_bytes) {
    return ToGrpcStatus(PlanTooLarge(nodes, at_least, /*estimate=*/true,
                                     options_.max_response_bytes));
  }
  absl::StatusOr<scheduler::Graph> graph =
      scheduler::BuildGraph(request.graph(), options_.limits);
  if (!graph.ok()) return ToGrpcStatus(graph.status());
  planner->busy_streams = BusyStreams(*options_.executor, num_devices());
  planner->fit_memory = options_.fit_memory;
  // Fitting a plan to its budgets plans it again several times over; past
  // the jobs' limit the plan reports its arenas, and one over its budget
  // is refused.
  const bool fitted = nodes <= JobManager::kMaxMemoryPlanNodes;
  if (!fitted) planner->fit_memory = false;
  absl::StatusOr<PlanningLimiter::Lease> lease = planning_.TryAcquire(nodes);
  if (!lease.ok()) return Rejected(context, lease.status());
  absl::StatusOr<scheduler::Plan> plan = scheduler::PlanGraph(*graph, *planner);
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  for (const scheduler::DeviceMemory& m : plan->memory) {
    if (options_.fit_memory && !fitted && m.budget_bytes > 0 &&
        m.arena_bytes > m.budget_bytes) {
      return ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
          "device ", m.device, ": the memory plan needs an arena of ",
          m.arena_bytes, " bytes, above the memory budget of ", m.budget_bytes,
          " bytes; weftd fits plans to their budgets with spills for graphs "
          "of up to ",
          JobManager::kMaxMemoryPlanNodes, " nodes, and this one has ",
          nodes)));
    }
  }
  *response->mutable_plan() = scheduler::PlanToProto(*graph, *plan);
  const int64_t bytes = static_cast<int64_t>(response->ByteSizeLong());
  if (bytes > options_.max_response_bytes) {
    response->Clear();
    return ToGrpcStatus(PlanTooLarge(nodes, bytes, /*estimate=*/false,
                                     options_.max_response_bytes));
  }
  return grpc::Status::OK;
}

grpc::Status SchedulerService::Devices(
    weft::v1::ListDevicesResponse* response) {
  for (weft::v1::Device& device :
       DescribeDevices(*options_.backend, *options_.executor,
                       options_.jobs->ReservedBytes())) {
    *response->add_devices() = std::move(device);
  }
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<weft::v1::ReadBufferResponse>*
SchedulerService::ReadBuffer(grpc::CallbackServerContext* context,
                             const weft::v1::ReadBufferRequest* request) {
  using Response = weft::v1::ReadBufferResponse;
  absl::Status valid = CheckJobId(request->job_id());
  if (!valid.ok()) return new Refused<Response>(ToGrpcStatus(valid));
  if (request->buffer().empty()) {
    return new Refused<Response>(
        ToGrpcStatus(absl::InvalidArgumentError("buffer: empty")));
  }
  if (static_cast<int64_t>(request->buffer().size()) >
      options_.limits.max_name_bytes) {
    return new Refused<Response>(
        ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
            "buffer: ", request->buffer().size(), " bytes exceed the limit of ",
            options_.limits.max_name_bytes))));
  }
  absl::StatusOr<OutputBuffer> output =
      options_.jobs->ReadOutput(request->job_id(), request->buffer());
  if (!output.ok()) return new Refused<Response>(ToGrpcStatus(output.status()));
  const uint64_t chunk =
      request->chunk_bytes() == 0
          ? options_.default_chunk_bytes
          : std::min(request->chunk_bytes(), options_.max_chunk_bytes);
  std::shared_ptr<const runtime::HostBuffer> data = output->data;
  const weft::v1::DType dtype = DTypeToProto(output->dtype);
  const uint64_t total = data->size();
  return new ChunkReactor<Response>(
      total, chunk,
      [data = std::move(data), dtype](uint64_t offset, uint64_t n,
                                      Response* message) {
        message->set_offset(offset);
        message->set_data(data->Read(offset, n));
        message->set_total_bytes(data->size());
        message->set_dtype(dtype);
      });
}

grpc::ServerWriteReactor<weft::v1::GetJobTraceResponse>*
SchedulerService::GetJobTrace(grpc::CallbackServerContext* context,
                              const weft::v1::GetJobTraceRequest* request) {
  using Response = weft::v1::GetJobTraceResponse;
  absl::Status valid = CheckJobId(request->job_id());
  if (!valid.ok()) return new Refused<Response>(ToGrpcStatus(valid));
  absl::StatusOr<std::string> json =
      options_.jobs->TraceJson(request->job_id());
  if (!json.ok()) return new Refused<Response>(ToGrpcStatus(json.status()));
  auto trace = std::make_shared<const std::string>(*std::move(json));
  const uint64_t total = trace->size();
  return new ChunkReactor<Response>(
      total, options_.max_chunk_bytes,
      [trace = std::move(trace)](uint64_t offset, uint64_t n,
                                 Response* message) {
        message->set_chunk(trace->substr(offset, n));
        message->set_total_bytes(trace->size());
      });
}

}  // namespace weft::server
