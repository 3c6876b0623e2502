#include "server/job_proto.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/timestamp.pb.h"

namespace weft::server {
namespace {

void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t nanos = absl::ToUnixNanos(t);
  int64_t seconds = nanos / 1'000'000'000;
  int64_t rest = nanos % 1'000'000'000;
  if (rest < 0) {
    rest += 1'000'000'000;
    --seconds;
  }
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(rest));
}

weft::v1::NodeEventKind EventKindToProto(runtime::NodeEventKind kind) {
  switch (kind) {
    case runtime::NodeEventKind::kStarted:
      return weft::v1::NODE_STARTED;
    case runtime::NodeEventKind::kFinished:
      return weft::v1::NODE_FINISHED;
    case runtime::NodeEventKind::kFailed:
      return weft::v1::NODE_FAILED;
  }
  return weft::v1::NODE_EVENT_KIND_UNSPECIFIED;
}

}  // namespace

weft::v1::JobState JobStateToProto(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return weft::v1::QUEUED;
    case JobState::kRunning:
      return weft::v1::RUNNING;
    case JobState::kSucceeded:
      return weft::v1::SUCCEEDED;
    case JobState::kFailed:
      return weft::v1::FAILED;
    case JobState::kCancelled:
      return weft::v1::CANCELLED;
  }
  return weft::v1::JOB_STATE_UNSPECIFIED;
}

absl::StatusOr<JobState> JobStateFromProto(weft::v1::JobState state) {
  switch (state) {
    case weft::v1::QUEUED:
      return JobState::kQueued;
    case weft::v1::RUNNING:
      return JobState::kRunning;
    case weft::v1::SUCCEEDED:
      return JobState::kSucceeded;
    case weft::v1::FAILED:
      return JobState::kFailed;
    case weft::v1::CANCELLED:
      return JobState::kCancelled;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("state: not a job state: ", static_cast<int>(state)));
  }
}

weft::v1::Job JobToProto(const JobInfo& info) {
  weft::v1::Job job;
  job.set_id(info.id);
  job.set_graph_name(info.graph_name);
  job.set_state(JobStateToProto(info.state));
  if (!info.error.ok()) {
    job.mutable_error()->set_code(static_cast<int32_t>(info.error.code()));
    job.mutable_error()->set_message(std::string(info.error.message()));
    job.mutable_error()->set_node(info.failed_node);
  }
  job.set_nodes_done(info.nodes_done);
  job.set_nodes_total(info.nodes_total);
  job.set_priority(info.priority);
  job.set_request_id(info.request_id);
  job.set_tenant(info.tenant);
  SetTimestamp(info.create_time, job.mutable_create_time());
  if (info.start_time) SetTimestamp(*info.start_time, job.mutable_start_time());
  if (info.end_time) SetTimestamp(*info.end_time, job.mutable_end_time());
  for (const std::string& name : info.output_buffers) {
    job.add_output_buffers(name);
  }
  for (const int64_t bytes : info.device_memory_bytes) {
    job.add_device_memory_bytes(bytes);
  }
  job.set_queue_reason(info.queue_reason);
  return job;
}

weft::v1::NodeEvent NodeEventToProto(const NodeEventInfo& info) {
  weft::v1::NodeEvent event;
  event.set_node(info.node);
  if (info.control.has_value()) {
    if (*info.control == runtime::ControlEventKind::kIteration) {
      event.set_kind(weft::v1::NODE_ITERATION);
      event.set_iteration(info.value);
    } else {
      event.set_kind(weft::v1::NODE_BRANCH);
      event.set_branch(static_cast<int32_t>(info.value));
    }
  } else {
    event.set_kind(EventKindToProto(info.kind));
  }
  event.set_device(info.device);
  event.set_stream(info.stream);
  SetTimestamp(info.time, event.mutable_time());
  if (!info.message.empty()) event.set_message(info.message);
  return event;
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

}  // namespace weft::server
