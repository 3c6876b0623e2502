#include "runtime/job.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/kernel_launch_builder.h"
#include "runtime/ops/scalars.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

using scheduler::BufferId;
using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::NodeId;
using scheduler::PlannedNode;

namespace {

std::unique_ptr<JobTracer> MakeTracer(bool on, const JobEnv& env,
                                      JobEvents* events,
                                      const scheduler::Graph& graph,
                                      const scheduler::Plan& plan) {
  if (!on) return std::make_unique<NullJobTracer>();
  RecordingJobTracer::Options options;
  options.backend = env.backend;
  options.events = events;
  options.device_clock = env.device_clock;
  options.name = graph.name();
  options.num_nodes = static_cast<int>(plan.nodes.size());
  options.num_events = plan.num_events;
  options.max_spans = env.trace_max_spans;
  return std::make_unique<RecordingJobTracer>(std::move(options));
}

// Whether `node`'s work writes every byte of the buffer of `use` and reads
// none of it: a built-in fill whose buffer is a whole number of its
// elements (fill writes every element, and nothing past the last whole
// one).
bool OverwritesAll(const scheduler::Graph& graph,
                   const scheduler::NodeSpec& node, const BufferUse& use) {
  if (node.op != "fill" || node.kernel.has_value() || node.args.size() != 2 ||
      !scheduler::Writes(use.access)) {
    return false;
  }
  const auto* out = std::get_if<BufferUse>(&node.args[0]);
  if (out == nullptr || out->buffer != use.buffer) return false;
  const BufferSpec& spec = graph.buffer(use.buffer);
  const std::optional<FillPattern> element =
      FillPatternOf(spec.dtype, node.args[1]);
  return element.has_value() && spec.size_bytes % element->bytes == 0;
}

std::vector<int> LogicalDevices(const scheduler::Plan& plan) {
  std::vector<int> devices;
  devices.reserve(plan.streams.size());
  for (const scheduler::PlannedStream& s : plan.streams) {
    devices.push_back(s.device);
  }
  return devices;
}

}  // namespace

Job::Job(uint64_t id, const JobEnv* env,
         std::shared_ptr<const scheduler::Graph> graph,
         std::shared_ptr<const scheduler::Plan> plan, JobCallbacks callbacks,
         NestedJob nested)
    : id_(id),
      env_(env),
      graph_(std::move(graph)),
      plan_(std::move(plan)),
      callbacks_(std::move(callbacks)),
      num_devices_(env_->backend->device_count()),
      events_(env_->event_pools, plan_->num_events),
      tracer_(MakeTracer(static_cast<bool>(callbacks_.on_trace), *env_,
                         &events_, *graph_, *plan_)),
      streams_(id_,
               JobStreams::Shared{env_->backend, env_->stream_pools,
                                  env_->stream_scopes, env_->scope_switches},
               LogicalDevices(*plan_), tracer_.get()),
      own_buffers_(
          nested.buffers != nullptr
              ? nullptr
              : std::make_unique<BufferCoherence>(
                    graph_.get(),
                    BufferCoherence::Options{env_->backend, env_->memory_pools,
                                             &events_, tracer_.get()})),
      buffers_(nested.buffers != nullptr ? nested.buffers : own_buffers_.get()),
      nested_(nested) {}

Job::~Job() = default;

void Job::Begin() {
  absl::Status s;
  // A nested job's buffers belong to the enclosing job, placed there.
  if (env_->place_buffers && own_buffers_ != nullptr) {
    s = own_buffers_->Place(*plan_, env_->host_gates);
  }
  if (s.ok()) s = buffers_->AllocateFor(*graph_, *plan_, env_->host_gates);
  if (!s.ok()) Fail(std::move(s), -1);
  Pump();
}

void Job::Cancel(absl::Status reason) {
  if (phase_ == Phase::kParked) {
    Dispose();
    status_ = reason.ok() ? absl::CancelledError("job cancelled") : reason;
    Deliver(nullptr, {});
    return;
  }
  if (phase_ == Phase::kDone || cancelled_) return;
  cancelled_ = true;
  if (reason.ok()) reason = absl::CancelledError("job cancelled");
  if (status_.ok()) cancel_reason_ = reason;
  for (auto& [index, run] : controls_) run->Stop(reason);
  for (const auto& [index, loop] : loop_streams_) {
    env_->backend->AbortErrorScope(loop.first, id_, reason).IgnoreError();
  }
  Fail(std::move(reason), -1);
  // Withdraw the work already issued but not started, and stop what runs
  // where the backend can; elsewhere the job is abandoned (job.h).
  streams_.AbortScope(status_);
  abandon_ = !env_->interrupts_work;
  Pump();
}

void Job::Fail(absl::Status status, NodeId node) {
  if (!status_.ok()) return;
  status_ = std::move(status);
  failed_node_ = node;
  // Running loops end at their next iteration boundary.
  for (auto& [index, run] : controls_) run->Stop(status_);
}

void Job::Pump() {
  if (phase_ == Phase::kIssuing) {
    if (device_graphs_ && next_ == 0 && status_.ok()) {
      device_graphs_ = false;  // one try
      if (absl::Status s = IssueDeviceGraphs(); !s.ok()) {
        Fail(std::move(s), -1);
      }
    }
    if (status_.ok()) IssueSome();
    // Outputs are downloaded once the last control node has finished too
    // (its bodies write buffers until then).
    const bool all_issued =
        next_ >= plan_->nodes.size() && running_controls_.empty();
    if (!status_.ok() || all_issued) {
      if (status_.ok()) {
        absl::Status s = nested_.buffers == nullptr ? DownloadOutputs()
                                                    : FetchForEnclosing();
        if (!s.ok()) Fail(std::move(s), -1);
      }
      StartDraining();
    } else if (in_flight_ < env_->window && !pump_posted_ &&
               !blocked_on_control_ && next_ < plan_->nodes.size()) {
      // More is issuable now: continue after other jobs had a turn.
      pump_posted_ = true;
      env_->post(id_, [](Job& job) {
        job.pump_posted_ = false;
        job.Pump();
      });
    }
  }
  if (phase_ == Phase::kDraining && streams_.fences_pending() == 0 &&
      in_flight_ == 0) {
    Finish();
  } else if (phase_ == Phase::kDraining && abandon_ && !reported_) {
    Abandon();
  }
}

void Job::IssueSome() {
  int issued = 0;
  blocked_on_control_ = false;
  while (next_ < plan_->nodes.size() && in_flight_ < env_->window &&
         issued < env_->issue_batch && status_.ok()) {
    if (issued_ahead_.erase(static_cast<int>(next_)) > 0) {
      ++next_;  // issued already
      continue;
    }
    if (!running_controls_.empty() &&
        WaitsForControl(static_cast<int>(next_))) {
      blocked_on_control_ = true;  // ControlFinished pumps again
      IssueAhead(issued);
      return;
    }
    const int index = static_cast<int>(next_++);
    absl::Status s = IssueNode(index);
    if (!s.ok()) {
      const NodeId node = plan_->nodes[index].node;
      if (callbacks_.on_node)
        callbacks_.on_node(node, NodeEventKind::kFailed, s);
      Fail(std::move(s), node);
      return;
    }
    ++issued;
  }
}

absl::Status Job::IssueNode(int index) {
  Backend* backend = env_->backend;
  const PlannedNode& pn = plan_->nodes[index];
  const scheduler::NodeSpec& node = graph_->node(pn.node);
  const int device = pn.device;
  if (!prefetched_ &&
      (index >= kNodesBeforeUploads || ReadsDataToUpload(index))) {
    prefetched_ = true;
    WEFT_RETURN_IF_ERROR(PrefetchUploads());
  }
  if (!plan_->copies.empty()) WEFT_RETURN_IF_ERROR(IssueEagerCopies(index));
  WEFT_ASSIGN_OR_RETURN(StreamHandle stream, streams_.For(pn.stream));
  WEFT_RETURN_IF_ERROR(streams_.EnterLogical(pn.stream, stream));

  bool waited = false;
  for (int e : plan_->Waits(index)) {
    // An event nobody recorded yet is a no-op wait, as in CUDA.
    if (const EventHandle event = events_.plan_event(e); event.value != 0) {
      WEFT_RETURN_IF_ERROR(backend->StreamWaitEvent(stream, event));
      waited = true;
    }
  }
  if (waited) tracer_->Dirty(stream);
  // A copy between devices also holds a stream of its source device: it
  // starts once that stream reaches it too, and that stream's later work
  // runs after it.
  StreamHandle peer;
  int peer_device = -1;
  if (pn.peer_stream >= 0) {
    WEFT_ASSIGN_OR_RETURN(peer, streams_.For(pn.peer_stream));
    peer_device = plan_->streams[pn.peer_stream].device;
    if (peer.value == stream.value) {
      peer_device = -1;  // one pooled stream: FIFO orders it already
    } else {
      WEFT_RETURN_IF_ERROR(streams_.Enter(peer));
      WEFT_RETURN_IF_ERROR(OrderAfter(peer, peer_device, stream));
    }
  }
  const bool control = node.control != nullptr;
  const scheduler::MemoryMove move = graph_->memory_move(pn.node);
  const bool on_host =
      !control && node.engine == scheduler::Engine::kHost && env_->host_gates;
  const int where = on_host ? buffers_->host() : device;
  // In argument order, without a copy (Graph::Uses).
  const absl::Span<const BufferUse> uses =
      control ? absl::Span<const BufferUse>() : graph_->Uses(pn.node);
  if (move == scheduler::MemoryMove::kNone) {
    for (const BufferUse& use : uses) {
      WEFT_RETURN_IF_ERROR(
          buffers_->MakeCurrent(use.buffer, where, device, stream,
                                OverwritesAll(*graph_, node, use)));
    }
  }

  int span = -1;
  if (move != scheduler::MemoryMove::kNone) {
    // A spill or fill: the transfer is the node (its span is the copy's).
    for (const BufferUse& use : uses) {
      WEFT_RETURN_IF_ERROR(move == scheduler::MemoryMove::kSpill
                               ? buffers_->Spill(use.buffer, device, stream)
                               : buffers_->Fill(use.buffer, device, stream));
    }
    WEFT_RETURN_IF_ERROR(ReportWhenDone(index, stream));
  } else if (control) {
    span = tracer_->Begin(TracedWork{SpanKind::kHost, TraceTrackKind::kStream,
                                     -1, node.name, node.op, pn.node},
                          stream, device);
    WEFT_RETURN_IF_ERROR(EnqueueControl(index, device, stream));
  } else if (on_host) {
    span = tracer_->Begin(TracedWork{SpanKind::kHost, TraceTrackKind::kStream,
                                     -1, node.name, node.op, pn.node},
                          stream, device);
    WEFT_RETURN_IF_ERROR(EnqueueHostOp(index, stream, uses));
    // In flight from here: its report comes from FinishHostOp.
  } else {
    const KernelLaunch launch =
        BuildKernelLaunch(*graph_, node, [&](scheduler::BufferId buffer) {
          return buffers_->ptr(buffer, device);
        });
    span = tracer_->Begin(TracedWork{SpanKind::kKernel, TraceTrackKind::kStream,
                                     device, node.name, node.op, pn.node},
                          stream, device);
    WEFT_RETURN_IF_ERROR(backend->Launch(launch, stream));
    buffers_->MarkWritten(uses, where, stream);
    WEFT_RETURN_IF_ERROR(ReportWhenDone(index, stream));
  }
  tracer_->End(span, stream, device);
  tracer_->NodeIssued(index, span, plan_->Waits(index), pn.signal_event);
  if (callbacks_.on_node) {
    callbacks_.on_node(pn.node, NodeEventKind::kStarted, absl::OkStatus());
  }
  // Recorded after the callback (or the gate), so a node's completion is
  // reported before anything waiting on it can complete: progress follows
  // dependencies. The node is in flight now, so a failure here fails the
  // job but leaves the node's own report to its completion.
  if (pn.signal_event >= 0) {
    absl::StatusOr<EventHandle> event =
        events_.ForSignal(pn.signal_event, device);
    absl::Status recorded =
        event.ok() ? backend->RecordEvent(*event, stream) : event.status();
    if (!recorded.ok()) Fail(std::move(recorded), pn.node);
  }
  if (peer_device >= 0) {
    absl::Status joined = OrderAfter(stream, device, peer);
    if (!joined.ok()) Fail(std::move(joined), pn.node);
  }
  return absl::OkStatus();
}

absl::Status Job::ReportWhenDone(int index, StreamHandle stream) {
  // A nested job reports no node: its one fence reports the body.
  if (nested_.buffers != nullptr) return absl::OkStatus();
  // Sixteen bytes of captures: stored inline, no allocation. The job
  // outlives the callback (it finishes only after its fences).
  Job* self = this;
  WEFT_RETURN_IF_ERROR(env_->backend->AddHostCallback(
      stream, [self, index](absl::Status status) {
        self->env_->node_done(self->id_, index, std::move(status));
      }));
  ++in_flight_;
  return absl::OkStatus();
}

absl::Status Job::IssueEagerCopies(int index) {
  for (const scheduler::PlannedCopy& copy : plan_->CopiesBefore(index)) {
    WEFT_ASSIGN_OR_RETURN(StreamHandle stream, streams_.For(copy.stream));
    WEFT_RETURN_IF_ERROR(streams_.EnterLogical(copy.stream, stream));
    if (const EventHandle event = events_.plan_event(copy.event);
        event.value != 0) {
      WEFT_RETURN_IF_ERROR(env_->backend->StreamWaitEvent(stream, event));
      tracer_->Dirty(stream);
    }
    // A control node's reader allocates nothing before its bodies run:
    // the copy takes the memory (placed already where memory is planned).
    WEFT_RETURN_IF_ERROR(buffers_->Allocate(copy.buffer, copy.device));
    WEFT_RETURN_IF_ERROR(
        buffers_->MakeCurrent(copy.buffer, copy.device, copy.device, stream));
  }
  return absl::OkStatus();
}

absl::Status Job::OrderAfter(StreamHandle from, int from_device,
                             StreamHandle to) {
  // A wait captures the recording it was enqueued after, so one event per
  // `from` stream serves every join from it: a loop joins its streams
  // every iteration and holds no more events for it.
  EventHandle& join = join_events_[from.value];
  if (join.value == 0) {
    WEFT_ASSIGN_OR_RETURN(join, events_.Acquire(from_device));
  }
  WEFT_RETURN_IF_ERROR(env_->backend->RecordEvent(join, from));
  WEFT_RETURN_IF_ERROR(env_->backend->StreamWaitEvent(to, join));
  tracer_->Dirty(to);
  return absl::OkStatus();
}

void Job::OnNodeDone(int index, absl::Status status) {
  --in_flight_;
  const PlannedNode& pn = plan_->nodes[index];
  tracer_->NodeCompleted(index);
  if (status.ok()) {
    if (callbacks_.on_node && !reported_) {
      callbacks_.on_node(pn.node, NodeEventKind::kFinished, status);
    }
  } else if (IsOwnCancellation(status)) {
    // Skipped because this job was cancelled: not a node failure, and the
    // stream is healthy.
  } else {
    streams_.MarkFailed(streams_.pooled(pn.stream));
    if (callbacks_.on_node && !reported_) {
      callbacks_.on_node(pn.node, NodeEventKind::kFailed, status);
    }
    Fail(std::move(status), pn.node);
  }
  Pump();
}

void Job::OnFence(StreamHandle stream, absl::Status status) {
  streams_.FenceFired();
  if (!status.ok() && !IsOwnCancellation(status)) {
    streams_.MarkFailed(stream);
    Fail(std::move(status), -1);
  }
  Pump();
}

bool Job::ReadsDataToUpload(int index) const {
  for (const BufferUse& use : graph_->Uses(plan_->nodes[index].node)) {
    if (graph_->buffer(use.buffer).init == BufferSpec::Init::kData &&
        !buffers_->has_version(use.buffer)) {
      return true;
    }
  }
  return false;
}

absl::Status Job::PrefetchUploads() {
  std::vector<StreamHandle> upload(num_devices_);
  std::vector<uint8_t> seen(graph_->num_buffers(), 0);
  for (const PlannedNode& pn : plan_->nodes) {
    const scheduler::NodeSpec& node = graph_->node(pn.node);
    // A control node's buffers are first used by its bodies, later; a
    // fill uploads host data itself, when it is needed.
    const bool on_host =
        node.control != nullptr ||
        graph_->memory_move(pn.node) != scheduler::MemoryMove::kNone ||
        (node.engine == scheduler::Engine::kHost && env_->host_gates);
    for (const BufferUse& use : graph_->Uses(pn.node)) {
      const BufferId b = use.buffer;
      if (seen[b]) continue;
      seen[b] = 1;
      // Nor is data uploaded that its first user overwrites.
      if (on_host || buffers_->has_version(b) ||
          graph_->buffer(b).init != BufferSpec::Init::kData ||
          OverwritesAll(*graph_, node, use)) {
        continue;
      }
      const int device = pn.device;
      if (upload[device].value == 0) {
        WEFT_ASSIGN_OR_RETURN(upload[device], streams_.Acquire(device));
        WEFT_RETURN_IF_ERROR(streams_.Enter(upload[device]));
      }
      WEFT_RETURN_IF_ERROR(
          buffers_->Materialize(b, device, device, upload[device]));
    }
  }
  return absl::OkStatus();
}

absl::Status Job::DownloadOutputs() {
  for (BufferId b = 0; b < graph_->num_buffers(); ++b) {
    const BufferSpec& spec = graph_->buffer(b);
    if (!spec.output) continue;
    WEFT_RETURN_IF_ERROR(buffers_->CheckNotLost(b));
    const BufferCoherence::Latest latest = buffers_->latest(b);
    if (latest.where < 0) {
      // No node touched it: its contents are its initial contents.
      outputs_.emplace_back(
          spec.name, std::make_unique<HostBuffer>(
                         spec.init == BufferSpec::Init::kFill
                             ? HostBuffer(InitialContents(spec))
                             : HostBuffer(spec.init == BufferSpec::Init::kData
                                              ? spec.data
                                              : std::string(),
                                          spec.size_bytes)));
      continue;
    }
    if (latest.where == buffers_->host()) {
      // Written by a host node: read once everything has drained.
      host_outputs_.emplace_back(spec.name, b);
      continue;
    }
    auto host = std::make_unique<HostBuffer>();
    // FIFO after the last write of the latest version, on a stream this
    // job drains before it ends.
    WEFT_ASSIGN_OR_RETURN(const StreamHandle stream,
                          OwnStreamAfter(latest.writer, latest.where));
    const std::string name = absl::StrCat(spec.name, " download");
    TracedWork download{SpanKind::kCopy, TraceTrackKind::kDeviceToHost,
                        latest.where, name};
    download.bytes = spec.size_bytes;
    const int span = tracer_->Begin(download, stream, latest.where);
    WEFT_RETURN_IF_ERROR(env_->backend->CopyDeviceToHostBuffer(
        host.get(), latest.ptr, spec.size_bytes, stream));
    tracer_->End(span, stream, latest.where);
    outputs_.emplace_back(spec.name, std::move(host));
  }
  return absl::OkStatus();
}

void Job::StartDraining() {
  phase_ = Phase::kDraining;
  const uint64_t id = id_;
  const auto* post = &env_->post_completion;
  auto fence = [post, id](StreamHandle stream) -> HostCallback {
    return [post, id, stream](absl::Status status) {
      (*post)(id, [stream, status = std::move(status)](Job& job) {
        job.OnFence(stream, status);
      });
    };
  };
  // A nested job (a body run per iteration) joins its streams into one and
  // fences that: one completion per iteration instead of one per stream.
  // Errors of its scope reach the join through the event waits.
  if (nested_.buffers != nullptr && status_.ok() &&
      streams_.used().size() > 1) {
    const StreamHandle join = streams_.used().back();
    const int join_device = streams_.DeviceOf(join);
    bool joined = join_device >= 0;
    for (StreamHandle stream : streams_.used()) {
      if (!joined || stream == join) continue;
      const int device = streams_.DeviceOf(stream);
      absl::Status s = device < 0 ? absl::InternalError("stream not leased")
                                  : streams_.Enter(stream);
      if (s.ok()) s = OrderAfter(stream, device, join);
      joined = s.ok();
    }
    if (joined) {
      if (absl::Status s = streams_.EnqueueFence(join, fence(join)); !s.ok()) {
        Fail(std::move(s), -1);
      }
      return;
    }
  }
  absl::Status fenced = streams_.EnqueueFences(fence);
  if (!fenced.ok()) Fail(std::move(fenced), -1);
}

bool Job::IsOwnCancellation(const absl::Status& status) const {
  return cancelled_ && (status.code() == absl::StatusCode::kCancelled ||
                        (!cancel_reason_.ok() && status == cancel_reason_));
}

void Job::Finish() {
  // A loop's body parks between iterations (Rerun, Dispose).
  if (nested_.buffers != nullptr && nested_.fetch >= 0 && status_.ok() &&
      !reported_ && !streams_.unfenced()) {
    phase_ = Phase::kParked;
    Deliver(nullptr, {});
    return;
  }
  phase_ = Phase::kDone;
  // Every fence has completed: nothing of this job is queued any more.
  streams_.LeaveScopes();
  // An abandoned job was reported already. Any other is reported once
  // everything is given back, its trace built before its events are.
  const bool report = !reported_;
  std::shared_ptr<const RecordedTrace> trace;
  HostBuffers outputs;
  if (report) {
    trace = tracer_->Take();
    outputs = TakeOutputs();
  }
  if (own_buffers_ != nullptr) {
    own_buffers_->Release(/*uncached=*/streams_.unfenced());
  }
  events_.ReleaseAll();
  streams_.Release();
  if (report) Deliver(std::move(trace), std::move(outputs));
}

void Job::Abandon() {
  streams_.FenceOff();
  std::shared_ptr<const RecordedTrace> trace = tracer_->Take();
  Deliver(std::move(trace), TakeOutputs());
}

HostBuffers Job::TakeOutputs() {
  HostBuffers outputs;
  if (status_.ok()) {
    for (auto& [name, data] : outputs_) outputs[name] = std::move(*data);
    for (const auto& [name, b] : host_outputs_) {
      outputs[name] = HostBuffer(buffers_->TakeHostData(b));
    }
  }
  outputs_.clear();
  host_outputs_.clear();
  return outputs;
}

void Job::Deliver(std::shared_ptr<const RecordedTrace> trace,
                  HostBuffers outputs) {
  reported_ = true;
  if (trace != nullptr) callbacks_.on_trace(std::move(trace));
  callbacks_.on_done(status_, status_.ok() ? -1 : failed_node_,
                     std::move(outputs));
}

}  // namespace weft::runtime
