// Job's device-graph path (job.h, job_graph.h): the whole job issued as
// device graphs where it fits.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
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
  // Uploads in plan order of first use, each with an event of its device
  // that the graph's wait node for it waits on.
  std::vector<std::pair<int, GraphUpload>> ordered;
  for (JobDeviceGraph& job_graph : graphs_->graphs) {
    const int device = job_graph.graph.device;
    for (const JobGraphUpload& upload : job_graph.uploads) {
      WEFT_ASSIGN_OR_RETURN(EventHandle event, events_.Acquire(device));
      job_graph.graph.nodes[upload.wait_node].event = event;
      ordered.push_back({upload.order, {upload.buffer, device, event}});
    }
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<GraphUpload> uploads;
  uploads.reserve(ordered.size());
  for (const auto& [order, upload] : ordered) uploads.push_back(upload);
  // Every graph is built before the first is launched: a graph the backend
  // cannot build sends the whole job node by node, with nothing enqueued.
  for (const JobDeviceGraph& job_graph : graphs_->graphs) {
    if (!backend->PrepareDeviceGraph(job_graph.graph).ok()) {
      graphs_.reset();
      return absl::OkStatus();
    }
  }
  next_ = plan_->nodes.size();  // nothing is issued node by node
  WEFT_RETURN_IF_ERROR(IssueGraphUploads(uploads));
  std::vector<StreamHandle> last_stream(num_devices_);
  WEFT_RETURN_IF_ERROR(LaunchJobGraphs(last_stream));
  return PlaceGraphOutputs(events, last_stream);
}

absl::Status Job::IssueGraphUploads(absl::Span<const GraphUpload> uploads) {
  Backend* backend = env_->backend;
  // One upload stream per device, as the plan's model has it.
  std::vector<StreamHandle> upload_stream(num_devices_);
  for (const GraphUpload& pending : uploads) {
    const int device = pending.device;
    StreamHandle& stream = upload_stream[device];
    if (stream.value == 0) {
      WEFT_ASSIGN_OR_RETURN(stream, streams_.Acquire(device));
      WEFT_RETURN_IF_ERROR(streams_.Enter(stream));
    }
    const BufferId b = pending.buffer;
    const BufferSpec& spec = graph_->buffer(b);
    WEFT_ASSIGN_OR_RETURN(const BufferCoherence::Staged staged,
                          buffers_->Stage(b));
    const std::string name = absl::StrCat(spec.name, " upload");
    TracedWork upload{SpanKind::kCopy, TraceTrackKind::kHostToDevice, device,
                      name};
    upload.bytes = spec.size_bytes;
    const int span = tracer_->Begin(upload, stream, device);
    WEFT_RETURN_IF_ERROR(
        backend->CopyHostToDevicePadded(buffers_->ptr(b, device), staged.data,
                                        staged.bytes, spec.size_bytes, stream));
    tracer_->End(span, stream, device);
    WEFT_RETURN_IF_ERROR(backend->RecordEvent(pending.event, stream));
  }
  return absl::OkStatus();
}

absl::Status Job::LaunchJobGraphs(std::vector<StreamHandle>& last_stream) {
  Backend* backend = env_->backend;
  // Each graph on a stream of its own: it waits for earlier graphs through
  // its event nodes, only where its nodes need them.
  for (int g = 0; g < static_cast<int>(graphs_->graphs.size()); ++g) {
    const JobDeviceGraph& job_graph = graphs_->graphs[g];
    const int device = job_graph.graph.device;
    WEFT_ASSIGN_OR_RETURN(const StreamHandle stream, streams_.Acquire(device));
    last_stream[device] = stream;
    WEFT_RETURN_IF_ERROR(streams_.Enter(stream));
    tracer_->Dirty(stream);
    const std::string name = absl::StrCat(
        "device graph ", g, " (", job_graph.plan_indices.size(), " nodes)");
    const int span =
        tracer_->Begin(TracedWork{SpanKind::kKernel, TraceTrackKind::kStream,
                                  device, name, "graph"},
                       stream, device);
    WEFT_RETURN_IF_ERROR(backend->LaunchDeviceGraph(job_graph.graph, stream));
    tracer_->End(span, stream, device);
    const uint64_t id = id_;
    const auto* post = &env_->post_completion;
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
  return absl::OkStatus();
}

absl::Status Job::PlaceGraphOutputs(
    absl::Span<const EventHandle> events,
    absl::Span<const StreamHandle> last_stream) {
  // Where the buffers are: DownloadOutputs reads each output from the
  // stream that holds its latest version. An output's is a stream per
  // event its download waits for (recorded in the graphs once the logical
  // stream that last wrote it has done its work there), so outputs
  // download while the graphs go on, as on streams; other buffers' is
  // their device's last graph's stream.
  for (BufferId b = 0; b < graph_->num_buffers(); ++b) {
    const int latest = graphs_->latest[b];
    if (latest >= 0) buffers_->SetLatest(b, latest, last_stream[latest]);
  }
  absl::flat_hash_map<int, StreamHandle> download_stream;  // by event
  for (const JobGraphDownload& download : graphs_->downloads) {
    const int device = graphs_->latest[download.buffer];
    auto [it, added] =
        download_stream.try_emplace(download.event, StreamHandle{});
    if (added) {
      WEFT_ASSIGN_OR_RETURN(it->second, streams_.Acquire(device));
      WEFT_RETURN_IF_ERROR(streams_.Enter(it->second));
      WEFT_RETURN_IF_ERROR(
          env_->backend->StreamWaitEvent(it->second, events[download.event]));
      tracer_->Dirty(it->second);
    }
    buffers_->SetLatest(download.buffer, device, it->second);
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
