// Job's device-graph path (job.h, job_graph.h): the whole job issued as
// device graphs where it fits.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/job.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

using scheduler::BufferId;
using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::NodeId;
using scheduler::PlannedNode;

// ---- Device graphs.

absl::Status Job::IssueDeviceGraphs() {
  Backend* backend = env_->backend;
  JobGraphInputs inputs;
  inputs.graph = graph_.get();
  inputs.plan = plan_.get();
  inputs.buffer = [this](BufferId b, int device) {
    return buffers_->ptr(b, device);
  };
  inputs.supports_op = [backend](const std::string& op) {
    return backend->supports_device_graph_op(op);
  };
  absl::StatusOr<JobGraphs> built = BuildJobGraphs(inputs);
  if (built.status().code() == absl::StatusCode::kUnimplemented) {
    return absl::OkStatus();  // node by node instead
  }
  if (!built.ok()) return built.status();
  graphs_ = std::make_unique<JobGraphs>(*std::move(built));
  std::vector<EventHandle> events;
  events.reserve(graphs_->event_devices.size());
  for (int device : graphs_->event_devices) {
    WEFT_ASSIGN_OR_RETURN(EventHandle event, events_.Acquire(device));
    events.push_back(event);
  }
  AssignJobGraphEvents(*graphs_, events);
  // Every graph is built before the first is launched: a graph the backend
  // cannot build sends the whole job node by node, with nothing enqueued.
  for (const JobDeviceGraph& job_graph : graphs_->graphs) {
    if (!backend->PrepareDeviceGraph(job_graph.graph).ok()) {
      graphs_.reset();
      return absl::OkStatus();
    }
  }
  next_ = plan_->nodes.size();  // nothing is issued node by node
  std::vector<StreamHandle> device_stream(num_devices_);
  for (int g = 0; g < static_cast<int>(graphs_->graphs.size()); ++g) {
    const JobDeviceGraph& job_graph = graphs_->graphs[g];
    const int device = job_graph.graph.device;
    if (device_stream[device].value == 0) {
      WEFT_ASSIGN_OR_RETURN(
          device_stream[device],
          streams_.For(plan_->nodes[job_graph.plan_indices.front()].stream));
    }
    const StreamHandle stream = device_stream[device];
    WEFT_RETURN_IF_ERROR(streams_.Enter(stream));
    for (BufferId b : job_graph.uploads) {
      const BufferSpec& spec = graph_->buffer(b);
      WEFT_ASSIGN_OR_RETURN(const BufferCoherence::Staged staged,
                            buffers_->Stage(b));
      const std::string name = absl::StrCat(spec.name, " upload");
      TracedWork upload{SpanKind::kCopy, TraceTrackKind::kHostToDevice, device,
                        name};
      upload.bytes = spec.size_bytes;
      const int span = tracer_->Begin(upload, stream, device);
      WEFT_RETURN_IF_ERROR(backend->CopyHostToDevicePadded(
          buffers_->ptr(b, device), staged.data, staged.bytes, spec.size_bytes,
          stream));
      tracer_->End(span, stream, device);
    }
    const std::string name = absl::StrCat(
        "device graph ", g, " (", job_graph.plan_indices.size(), " nodes)");
    const int span =
        tracer_->Begin(TracedWork{SpanKind::kKernel, TraceTrackKind::kStream,
                                  device, name, "graph"},
                       stream, device);
    WEFT_RETURN_IF_ERROR(backend->LaunchDeviceGraph(job_graph.graph, stream));
    tracer_->End(span, stream, device);
    const uint64_t id = id_;
    const auto* post = &env_->post;
    WEFT_RETURN_IF_ERROR(backend->AddHostCallback(
        stream, [post, id, g, stream](absl::Status status) {
          (*post)(id, [g, stream, status = std::move(status)](Job& job) {
            job.OnGraphDone(g, stream, status);
          });
        }));
    ++in_flight_;
    if (callbacks_.on_node) {
      for (int index : job_graph.plan_indices) {
        callbacks_.on_node(plan_->nodes[index].node, NodeEventKind::kStarted,
                           absl::OkStatus());
      }
    }
  }
  // Where the outputs are: DownloadOutputs reads each from the stream that
  // holds its latest version.
  for (BufferId b = 0; b < graph_->num_buffers(); ++b) {
    const int latest = graphs_->latest[b];
    if (latest < 0) continue;
    buffers_->SetLatest(b, latest, device_stream[latest]);
  }
  return absl::OkStatus();
}

void Job::OnGraphDone(int g, StreamHandle stream, absl::Status status) {
  --in_flight_;
  const JobDeviceGraph& job_graph = graphs_->graphs[g];
  if (status.ok()) {
    if (callbacks_.on_node && !reported_) {
      for (int index : job_graph.plan_indices) {
        callbacks_.on_node(plan_->nodes[index].node, NodeEventKind::kFinished,
                           status);
      }
    }
  } else if (!IsOwnCancellation(status)) {
    streams_.MarkFailed(stream);
    Fail(absl::Status(status.code(), absl::StrCat("device graph on device ",
                                                  job_graph.graph.device, ": ",
                                                  status.message())),
         -1);
  }
  Pump();
}

}  // namespace weft::runtime
