// What the job manager tells about a job and its nodes: plain values, a
// snapshot taken under the job's lock. The service turns them into
// weft.v1 messages (job_proto.h); nothing below the service sees those.
#ifndef WEFT_SERVER_JOB_INFO_H_
#define WEFT_SERVER_JOB_INFO_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/executor.h"
#include "runtime/host_buffer.h"
#include "scheduler/graph.h"
#include "server/job_state.h"

namespace weft::server {

struct JobInfo {
  std::string id;
  std::string graph_name;
  JobState state = JobState::kQueued;
  // Why a FAILED or CANCELLED job ended (OK otherwise), and the node that
  // failed, if one did.
  absl::Status error;
  std::string failed_node;
  int64_t nodes_done = 0;
  int64_t nodes_total = 0;
  int32_t priority = 0;
  std::string request_id;
  std::string tenant;
  absl::Time create_time;
  std::optional<absl::Time> start_time;
  std::optional<absl::Time> end_time;
  std::vector<std::string> output_buffers;
  // By device: the memory the job holds there while it runs.
  std::vector<int64_t> device_memory_bytes;
  // QUEUED jobs, from JobManager::Get: why the job has not started yet.
  std::string queue_reason;
};

// An output buffer of a finished job. `data` is shared, never copied.
struct OutputBuffer {
  scheduler::DType dtype = scheduler::DType::kBytes;
  // Its bytes; a zero tail takes no memory (runtime/host_buffer.h).
  std::shared_ptr<const runtime::HostBuffer> data;
};

// One node starting, finishing or failing.
struct NodeEventInfo {
  std::string node;
  runtime::NodeEventKind kind = runtime::NodeEventKind::kStarted;
  int device = -1;
  int stream = -1;
  absl::Time time;
  std::string message;  // a failure's status; empty otherwise
  // Set for a control node's progress (then `kind` is unused): a loop's
  // iteration `value`, or a case..of's branch `value` (-1: none); the
  // message says it in words.
  std::optional<runtime::ControlEventKind> control;
  int64_t value = 0;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_INFO_H_
