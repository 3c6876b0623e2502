#include "server/scheduler_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "scheduler/planner.h"
#include "scheduler/status_macros.h"
#include "server/devices.h"
#include "server/grpc_status.h"
#include "server/retry_hint.h"

namespace weft::server {
namespace {

absl::Status CheckJobId(absl::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError("job_id: empty");
  return absl::OkStatus();
}

weft::v1::DType DTypeToProto(scheduler::DType dtype) {
  switch (dtype) {
    case scheduler::DType::kBytes:
      return weft::v1::BYTES;
    case scheduler::DType::kFloat32:
      return weft::v1::FLOAT32;
    case scheduler::DType::kFloat64:
      return weft::v1::FLOAT64;
    case scheduler::DType::kInt32:
      return weft::v1::INT32;
    case scheduler::DType::kInt64:
      return weft::v1::INT64;
  }
  return weft::v1::BYTES;
}

absl::StatusOr<std::string> TenantOf(const grpc::ServerContext& context,
                                     int max_bytes) {
  auto it = context.client_metadata().find(kTenantMetadataKey);
  if (it == context.client_metadata().end()) return std::string();
  std::string tenant(it->second.data(), it->second.size());
  if (static_cast<int>(tenant.size()) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        kTenantMetadataKey, " metadata: longer than ", max_bytes, " bytes"));
  }
  for (char c : tenant) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') {
      return absl::InvalidArgumentError(absl::StrCat(
          kTenantMetadataKey, " metadata: '", tenant,
          "' has characters other than letters, digits, '-', '_' and '.'"));
    }
  }
  return tenant;
}

// The status of a rejected submission, with the retry hint also as
// `grpc-retry-pushback-ms` for clients using gRPC's built-in retries.
grpc::Status Rejected(grpc::ServerContext* context,
                      const absl::Status& status) {
  if (std::optional<absl::Duration> delay = RetryDelayOf(status)) {
    context->AddTrailingMetadata(
        "grpc-retry-pushback-ms",
        absl::StrCat(absl::ToInt64Milliseconds(*delay)));
  }
  return ToGrpcStatus(status);
}

absl::Time DeadlineOf(const grpc::ServerContext& context) {
  return absl::FromChrono(context.deadline());
}

grpc::Status ClientGone() {
  return grpc::Status(grpc::StatusCode::CANCELLED,
                      "the call was cancelled or its deadline passed");
}

}  // namespace

SchedulerService::SchedulerService(Options options)
    : options_([&options] {
        options.limits.num_devices = options.backend->device_count();
        return std::move(options);
      }()) {}

absl::StatusOr<scheduler::PlannerOptions> SchedulerService::PlannerOptions(
    const weft::v1::ScheduleOptions& proto) const {
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
  if (options_.max_concurrent_kernels > 0) {
    planner.max_concurrent_kernels = options_.max_concurrent_kernels;
  }
  return planner;
}

grpc::Status SchedulerService::SubmitGraph(
    grpc::ServerContext* context, const weft::v1::SubmitGraphRequest* request,
    weft::v1::SubmitGraphResponse* response) {
  if (context->IsCancelled()) return ClientGone();
  if (static_cast<int>(request->request_id().size()) >
      options_.max_request_id_bytes) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("request_id: longer than ", options_.max_request_id_bytes,
                     " bytes")));
  }
  absl::StatusOr<std::string> tenant =
      TenantOf(*context, options_.max_tenant_bytes);
  if (!tenant.ok()) return ToGrpcStatus(tenant.status());
  absl::StatusOr<scheduler::Graph> graph =
      scheduler::BuildGraph(request->graph(), options_.limits);
  if (!graph.ok()) return ToGrpcStatus(graph.status());
  absl::StatusOr<scheduler::PlannerOptions> planner =
      PlannerOptions(request->options());
  if (!planner.ok()) return ToGrpcStatus(planner.status());
  // User code is compiled now, so that its errors reach the submitter.
  if (!graph->modules().empty() && options_.backend != nullptr) {
    absl::Status prepared = options_.backend->PrepareModules(*graph);
    if (!prepared.ok()) return ToGrpcStatus(prepared);
  }

  JobSpec spec;
  spec.graph = std::make_shared<const scheduler::Graph>(*std::move(graph));
  spec.planner_options = *std::move(planner);
  switch (request->options().launch_mode()) {
    case weft::v1::LAUNCH_STREAMS:
      spec.launch_mode = runtime::LaunchMode::kStreams;
      break;
    case weft::v1::LAUNCH_DEVICE_GRAPHS:
      spec.launch_mode = runtime::LaunchMode::kDeviceGraphs;
      break;
    default:
      spec.launch_mode = runtime::LaunchMode::kAuto;
      break;
  }
  spec.request_id = request->request_id();
  spec.priority = request->priority();
  spec.tenant = *std::move(tenant);
  spec.deadline = DeadlineOf(*context);
  spec.cancelled = [context] { return context->IsCancelled(); };
  absl::StatusOr<weft::v1::Job> job = options_.jobs->Submit(std::move(spec));
  if (!job.ok()) return Rejected(context, job.status());
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status SchedulerService::GetJob(grpc::ServerContext* context,
                                      const weft::v1::GetJobRequest* request,
                                      weft::v1::Job* response) {
  absl::Status valid = CheckJobId(request->job_id());
  if (!valid.ok()) return ToGrpcStatus(valid);
  absl::StatusOr<weft::v1::Job> job = options_.jobs->Get(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status SchedulerService::WatchJob(
    grpc::ServerContext* context, const weft::v1::WatchJobRequest* request,
    grpc::ServerWriter<weft::v1::WatchJobResponse>* writer) {
  absl::Status valid = CheckJobId(request->job_id());
  if (!valid.ok()) return ToGrpcStatus(valid);
  absl::StatusOr<std::unique_ptr<JobWatch>> watch =
      options_.jobs->Watch(request->job_id());
  if (!watch.ok()) return ToGrpcStatus(watch.status());
  while (true) {
    if (context->IsCancelled()) return ClientGone();
    const absl::Time deadline = std::min(
        absl::Now() + options_.watch_poll_interval, DeadlineOf(*context));
    WatchUpdate update = (*watch)->Next(deadline);
    if (update.changed) {
      weft::v1::WatchJobResponse message;
      *message.mutable_job() = std::move(update.job);
      for (weft::v1::NodeEvent& event : update.events) {
        *message.add_node_events() = std::move(event);
      }
      if (!writer->Write(message)) return ClientGone();
    }
    if (update.done) return grpc::Status::OK;
  }
}

grpc::Status SchedulerService::CancelJob(
    grpc::ServerContext* context, const weft::v1::CancelJobRequest* request,
    weft::v1::Job* response) {
  absl::Status valid = CheckJobId(request->job_id());
  if (!valid.ok()) return ToGrpcStatus(valid);
  absl::StatusOr<weft::v1::Job> job = options_.jobs->Cancel(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  if (job->state() == weft::v1::RUNNING) {
    // Answer with the outcome when the run drains quickly, as it usually
    // does; otherwise with the job as it is (still RUNNING, cancelling).
    const absl::Time deadline =
        std::min(absl::Now() + options_.cancel_wait, DeadlineOf(*context));
    absl::StatusOr<weft::v1::Job> after =
        options_.jobs->WaitUntilTerminal(request->job_id(), deadline);
    if (after.ok()) job = std::move(after);
  }
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status SchedulerService::ListJobs(
    grpc::ServerContext* context, const weft::v1::ListJobsRequest* request,
    weft::v1::ListJobsResponse* response) {
  if (request->page_size() < 0) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "page_size: must not be negative, got ", request->page_size())));
  }
  std::optional<JobState> state;
  if (request->state() != weft::v1::JOB_STATE_UNSPECIFIED) {
    absl::StatusOr<JobState> parsed = JobStateFromProto(request->state());
    if (!parsed.ok()) return ToGrpcStatus(parsed.status());
    state = *parsed;
  }
  for (weft::v1::Job& job : options_.jobs->List(state, request->page_size())) {
    *response->add_jobs() = std::move(job);
  }
  return grpc::Status::OK;
}

grpc::Status SchedulerService::PlanGraph(
    grpc::ServerContext* context, const weft::v1::PlanGraphRequest* request,
    weft::v1::PlanGraphResponse* response) {
  absl::StatusOr<scheduler::Graph> graph =
      scheduler::BuildGraph(request->graph(), options_.limits);
  if (!graph.ok()) return ToGrpcStatus(graph.status());
  absl::StatusOr<scheduler::PlannerOptions> planner =
      PlannerOptions(request->options());
  if (!planner.ok()) return ToGrpcStatus(planner.status());
  for (const runtime::DeviceLoad& load : options_.executor->Load()) {
    planner->busy_streams.push_back(load.streams_busy);
  }
  if (static_cast<int>(planner->busy_streams.size()) != num_devices()) {
    planner->busy_streams.clear();
  }
  absl::StatusOr<scheduler::Plan> plan = scheduler::PlanGraph(*graph, *planner);
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  *response->mutable_plan() = scheduler::PlanToProto(*graph, *plan);
  return grpc::Status::OK;
}

grpc::Status SchedulerService::ListDevices(
    grpc::ServerContext* context, const weft::v1::ListDevicesRequest* request,
    weft::v1::ListDevicesResponse* response) {
  for (weft::v1::Device& device :
       DescribeDevices(*options_.backend, *options_.executor)) {
    *response->add_devices() = std::move(device);
  }
  return grpc::Status::OK;
}

grpc::Status SchedulerService::ReadBuffer(
    grpc::ServerContext* context, const weft::v1::ReadBufferRequest* request,
    grpc::ServerWriter<weft::v1::ReadBufferResponse>* writer) {
  absl::Status valid = CheckJobId(request->job_id());
  if (!valid.ok()) return ToGrpcStatus(valid);
  if (request->buffer().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("buffer: empty"));
  }
  absl::StatusOr<OutputBuffer> output =
      options_.jobs->ReadOutput(request->job_id(), request->buffer());
  if (!output.ok()) return ToGrpcStatus(output.status());
  const uint64_t chunk =
      request->chunk_bytes() == 0
          ? options_.default_chunk_bytes
          : std::min(request->chunk_bytes(), options_.max_chunk_bytes);
  const std::string& data = *output->data;
  uint64_t offset = 0;
  do {
    if (context->IsCancelled()) return ClientGone();
    const uint64_t n = std::min<uint64_t>(chunk, data.size() - offset);
    weft::v1::ReadBufferResponse message;
    message.set_offset(offset);
    message.set_data(data.substr(offset, n));
    message.set_total_bytes(data.size());
    message.set_dtype(DTypeToProto(output->dtype));
    if (!writer->Write(message)) return ClientGone();
    offset += n;
  } while (offset < data.size());
  return grpc::Status::OK;
}

grpc::Status SchedulerService::GetJobTrace(
    grpc::ServerContext* context, const weft::v1::GetJobTraceRequest* request,
    grpc::ServerWriter<weft::v1::GetJobTraceResponse>* writer) {
  absl::Status valid = CheckJobId(request->job_id());
  if (!valid.ok()) return ToGrpcStatus(valid);
  absl::StatusOr<std::string> json =
      options_.jobs->TraceJson(request->job_id());
  if (!json.ok()) return ToGrpcStatus(json.status());
  const uint64_t chunk = std::max<uint64_t>(1, options_.max_chunk_bytes);
  uint64_t offset = 0;
  do {
    if (context->IsCancelled()) return ClientGone();
    const uint64_t n = std::min<uint64_t>(chunk, json->size() - offset);
    weft::v1::GetJobTraceResponse message;
    message.set_chunk(json->substr(offset, n));
    message.set_total_bytes(json->size());
    if (!writer->Write(message)) return ClientGone();
    offset += n;
  } while (offset < json->size());
  return grpc::Status::OK;
}

}  // namespace weft::server
