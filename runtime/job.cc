#include "runtime/job.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/kernel_launch_builder.h"
#include "runtime/ops/cpu_kernels.h"
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
  return std::make_unique<RecordingJobTracer>(std::move(options));
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
  if (absl::Status s = buffers_->AllocateFor(*graph_, *plan_, env_->host_gates);
      !s.ok()) {
    Fail(std::move(s), -1);
  }
  Pump();
}

void Job::Cancel(absl::Status reason) {
  if (phase_ == Phase::kParked) {
    Dispose();
    status_ = reason.ok() ? absl::CancelledError("job cancelled") : reason;
    Deliver(std::nullopt, {});
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
    if (next_ == 0 && !prefetched_ && status_.ok()) {
      prefetched_ = true;
      if (absl::Status s = PrefetchUploads(); !s.ok()) Fail(std::move(s), -1);
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
    if (!running_controls_.empty() &&
        WaitsForControl(static_cast<int>(next_))) {
      blocked_on_control_ = true;  // ControlFinished pumps again
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
  const bool on_host =
      !control && node.engine == scheduler::Engine::kHost && env_->host_gates;
  const int where = on_host ? buffers_->host() : device;
  std::vector<BufferUse> uses;
  if (!node.args.empty() && !control) uses = graph_->BufferUses(pn.node);
  for (const BufferUse& use : uses) {
    WEFT_RETURN_IF_ERROR(
        buffers_->MakeCurrent(use.buffer, where, device, stream));
  }

  int span = -1;
  if (control) {
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
    // A nested job reports no node: its one fence reports the body.
    if (nested_.buffers == nullptr) {
      // Sixteen bytes of captures: stored inline, no allocation. The job
      // outlives the callback (it finishes only after its fences).
      Job* self = this;
      WEFT_RETURN_IF_ERROR(
          backend->AddHostCallback(stream, [self, index](absl::Status status) {
            self->env_->node_done(self->id_, index, std::move(status));
          }));
      ++in_flight_;
    }
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

absl::Status Job::OrderAfter(StreamHandle from, int from_device,
                             StreamHandle to) {
  WEFT_ASSIGN_OR_RETURN(EventHandle join, events_.Acquire(from_device));
  WEFT_RETURN_IF_ERROR(env_->backend->RecordEvent(join, from));
  WEFT_RETURN_IF_ERROR(env_->backend->StreamWaitEvent(to, join));
  tracer_->Dirty(to);
  return absl::OkStatus();
}

absl::Status Job::JoinInto(StreamHandle from, int from_device,
                           StreamHandle to) {
  EventHandle& join = join_events_[from.value];
  if (join.value == 0) {
    WEFT_ASSIGN_OR_RETURN(join, events_.Acquire(from_device));
  }
  WEFT_RETURN_IF_ERROR(env_->backend->RecordEvent(join, from));
  WEFT_RETURN_IF_ERROR(env_->backend->StreamWaitEvent(to, join));
  tracer_->Dirty(to);
  return absl::OkStatus();
}

absl::Status Job::EnqueueHostOp(int index, StreamHandle stream,
                                const std::vector<BufferUse>& uses) {
  Backend* backend = env_->backend;
  const PlannedNode& pn = plan_->nodes[index];
  const scheduler::NodeSpec& node = graph_->node(pn.node);
  HostOp host_op;
  host_op.kernel = env_->host_kernels->Find(node.op);
  if (host_op.kernel == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("op '", node.op, "' has no host implementation"));
  }
  host_op.args.reserve(node.args.size());
  for (const scheduler::Arg& arg : node.args) {
    if (const auto* use = std::get_if<BufferUse>(&arg)) {
      const BufferSpec& spec = graph_->buffer(use->buffer);
      host_op.args.push_back(HostBufferArg{buffers_->HostData(use->buffer),
                                           spec.size_bytes, spec.dtype,
                                           use->access});
    } else {
      host_op.args.push_back(ConvertScalar<HostArg>(arg));
    }
  }
  // The callback fires once the inputs are in host memory; the gate holds
  // the stream (and the signal event after it) until the op has run.
  const uint64_t id = id_;
  const auto* post = &env_->post;
  WEFT_RETURN_IF_ERROR(
      backend->AddHostCallback(stream, [post, id, index](absl::Status status) {
        (*post)(id, [index, status = std::move(status)](Job& job) {
          job.OnHostInputsReady(index, status);
        });
      }));
  ++in_flight_;
  absl::StatusOr<GateHandle> gate = backend->EnqueueHostGate(stream);
  if (gate.ok()) {
    host_op.gate = *gate;
  } else {
    host_op.issue_error = gate.status();
    Fail(gate.status(), pn.node);
  }
  host_ops_.emplace(index, std::move(host_op));
  buffers_->MarkWritten(uses, buffers_->host(), stream);
  return absl::OkStatus();
}

void Job::OnHostInputsReady(int index, absl::Status status) {
  auto it = host_ops_.find(index);
  if (it == host_ops_.end()) return;
  HostOp& host_op = it->second;
  if (!status.ok()) {
    FinishHostOp(index, std::move(status));
    return;
  }
  if (host_op.gate.value == 0) {
    FinishHostOp(index, host_op.issue_error);
    return;
  }
  if (!status_.ok()) {
    FinishHostOp(
        index, absl::CancelledError(absl::StrCat(
                   "not run: the job had stopped (", status_.message(), ")")));
    return;
  }
  const NodeId node = plan_->nodes[index].node;
  tracer_->NodeStarted(index);
  const uint64_t id = id_;
  auto post = env_->post;
  env_->host_pool->Submit([post = std::move(post), id, index,
                           kernel = host_op.kernel, args = host_op.args,
                           op = graph_->node(node).op]() {
    absl::Status status = (*kernel)(args);
    if (!status.ok()) {
      status = absl::Status(
          status.code(), absl::StrCat(op, " on the host: ", status.message()));
    }
    post(id, [index, status = std::move(status)](Job& job) {
      job.FinishHostOp(index, status);
    });
  });
}

void Job::FinishHostOp(int index, absl::Status status) {
  auto it = host_ops_.find(index);
  if (it == host_ops_.end()) return;
  const GateHandle gate = it->second.gate;
  host_ops_.erase(it);
  if (gate.value != 0) {
    const double busy_us = graph_->node(plan_->nodes[index].node).cost_us;
    absl::Status opened =
        env_->backend->OpenHostGate(gate, status, std::max(0.0, busy_us));
    if (!opened.ok()) Fail(std::move(opened), plan_->nodes[index].node);
  }
  OnNodeDone(index, std::move(status));
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

absl::Status Job::PrefetchUploads() {
  std::vector<StreamHandle> upload(num_devices_);
  std::vector<uint8_t> seen(graph_->num_buffers(), 0);
  for (const PlannedNode& pn : plan_->nodes) {
    const scheduler::NodeSpec& node = graph_->node(pn.node);
    // A control node's buffers are first used by its bodies, later.
    const bool on_host =
        node.control != nullptr ||
        (node.engine == scheduler::Engine::kHost && env_->host_gates);
    for (const BufferUse& use : graph_->Uses(pn.node)) {
      const BufferId b = use.buffer;
      if (seen[b]) continue;
      seen[b] = 1;
      if (on_host || buffers_->has_version(b) ||
          graph_->buffer(b).init != BufferSpec::Init::kData) {
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
    const BufferCoherence::Latest latest = buffers_->latest(b);
    if (latest.where < 0) {
      // No node touched it: its contents are its initial contents.
      outputs_.emplace_back(
          spec.name, std::make_unique<std::string>(InitialContents(spec)));
      continue;
    }
    if (latest.where == buffers_->host()) {
      // Written by a host node: read once everything has drained.
      host_outputs_.emplace_back(spec.name, b);
      continue;
    }
    auto host = std::make_unique<std::string>(spec.size_bytes, '\0');
    const StreamHandle stream = latest.writer;
    WEFT_RETURN_IF_ERROR(streams_.Enter(stream));
    const std::string name = absl::StrCat(spec.name, " download");
    TracedWork download{SpanKind::kCopy, TraceTrackKind::kDeviceToHost,
                        latest.where, name};
    download.bytes = spec.size_bytes;
    const int span = tracer_->Begin(download, stream, latest.where);
    // FIFO after the last write of the latest version.
    WEFT_RETURN_IF_ERROR(env_->backend->CopyDeviceToHost(
        host->data(), latest.ptr, spec.size_bytes, stream));
    tracer_->End(span, stream, latest.where);
    outputs_.emplace_back(spec.name, std::move(host));
  }
  return absl::OkStatus();
}

void Job::StartDraining() {
  phase_ = Phase::kDraining;
  const uint64_t id = id_;
  const auto* post = &env_->post;
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
      if (s.ok()) s = JoinInto(stream, device, join);
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
    Deliver(std::nullopt, {});
    return;
  }
  phase_ = Phase::kDone;
  // Every fence has completed: nothing of this job is queued any more.
  streams_.LeaveScopes();
  // An abandoned job was reported already. Any other is reported once
  // everything is given back, its trace built before its events are.
  const bool report = !reported_;
  std::optional<JobTrace> trace;
  HostBuffers outputs;
  if (report) {
    trace = tracer_->Build();
    outputs = TakeOutputs();
  }
  if (own_buffers_ != nullptr) {
    own_buffers_->Release(/*uncached=*/streams_.unfenced());
  }
  events_.ReleaseAll();
  streams_.Release();
  if (report) Deliver(std::move(trace), std::move(outputs));
}

void Job::Rerun() {
  if (phase_ != Phase::kParked) return;
  phase_ = Phase::kIssuing;
  reported_ = false;
  next_ = 0;
  in_flight_ = 0;
  blocked_on_control_ = false;
  Begin();
}

void Job::Dispose() {
  if (phase_ != Phase::kParked) return;
  phase_ = Phase::kDone;
  streams_.LeaveScopes();
  events_.ReleaseAll();
  streams_.Release();
}

void Job::Abandon() {
  streams_.FenceOff();
  std::optional<JobTrace> trace = tracer_->Build();
  Deliver(std::move(trace), TakeOutputs());
}

HostBuffers Job::TakeOutputs() {
  HostBuffers outputs;
  if (status_.ok()) {
    for (auto& [name, data] : outputs_) outputs[name] = std::move(*data);
    for (const auto& [name, b] : host_outputs_) {
      outputs[name] = buffers_->TakeHostData(b);
    }
  }
  outputs_.clear();
  host_outputs_.clear();
  return outputs;
}

void Job::Deliver(std::optional<JobTrace> trace, HostBuffers outputs) {
  reported_ = true;
  if (trace.has_value()) callbacks_.on_trace(*std::move(trace));
  callbacks_.on_done(status_, status_.ok() ? -1 : failed_node_,
                     std::move(outputs));
}

// ---- Control nodes.

absl::Status Job::EnqueueControl(int index, int device, StreamHandle stream) {
  const scheduler::NodeSpec& node = graph_->node(plan_->nodes[index].node);
  if (node.control->kind == scheduler::ControlSpec::Kind::kWhile &&
      control_mode_ != ControlMode::kHost) {
    absl::Status on_device = EnqueueDeviceLoop(index, device, stream);
    if (on_device.ok() || control_mode_ == ControlMode::kDevice ||
        on_device.code() != absl::StatusCode::kFailedPrecondition) {
      return on_device;
    }
    // kAuto: the host runs what the device cannot.
  }
  // The condition's value in host memory, once the node's predecessors
  // are done; the run starts from the callback behind it.
  WEFT_RETURN_IF_ERROR(buffers_->MakeCurrent(node.control->condition,
                                             buffers_->host(), device, stream));
  const uint64_t id = id_;
  const auto* post = &env_->post;
  WEFT_RETURN_IF_ERROR(env_->backend->AddHostCallback(
      stream, [post, id, index](absl::Status status) {
        (*post)(id, [index, status = std::move(status)](Job& job) {
          job.OnControlReady(index, status);
        });
      }));
  ++in_flight_;
  running_controls_.insert(plan_->nodes[index].node);
  return absl::OkStatus();
}

absl::Status Job::EnqueueDeviceLoop(int index, int device,
                                    StreamHandle stream) {
  Backend* backend = env_->backend;
  const PlannedNode& pn = plan_->nodes[index];
  const scheduler::NodeSpec& node = graph_->node(pn.node);
  const scheduler::Graph& body = *node.control->bodies[0];
  const scheduler::Plan& body_plan = *plan_->bodies[pn.node][0];
  auto cannot = [&node](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat("loop '", node.name,
                     "' cannot evaluate its condition on the device: ", why));
  };
  if (!backend->supports_device_loops()) {
    return cannot("this backend has no device loops");
  }
  // The body: device ops on one device.
  const int d = body_plan.nodes.empty() ? -1 : body_plan.nodes[0].device;
  for (const PlannedNode& bn : body_plan.nodes) {
    const scheduler::NodeSpec& spec = body.node(bn.node);
    if (bn.device != d) {
      return cannot("its body is planned on more than one device");
    }
    if (spec.control != nullptr || spec.engine == scheduler::Engine::kHost) {
      return cannot(absl::StrCat("body node '", spec.name,
                                 "' runs on the host or holds control"));
    }
    if (!backend->supports_device_graph_op(spec.op)) {
      return cannot(absl::StrCat("body node '", spec.name, "' runs op '",
                                 spec.op, "', which device graphs lack"));
    }
  }
  if (d < 0) return cannot("its body is empty");
  // A stream of the body's device for the loop, ordered after the node's
  // own, and another for its iterations.
  StreamHandle loop_stream = stream;
  if (d != device) {
    WEFT_ASSIGN_OR_RETURN(loop_stream, streams_.Acquire(d));
    WEFT_RETURN_IF_ERROR(streams_.Enter(loop_stream));
  }
  // The iterations' stream is the loop's alone until it ends: leased from
  // the pool apart from the job's streams (nothing else of the job may
  // queue or wait there), in the job's error scope.
  WEFT_ASSIGN_OR_RETURN(std::optional<StreamHandle> fresh,
                        env_->stream_pools[d]->AcquireUnshared());
  if (!fresh.has_value()) {
    return cannot(absl::StrCat("no free stream on device ", d));
  }
  const StreamHandle body_stream = *fresh;
  loop_streams_[index] = {body_stream, d};
  if (absl::Status s = backend->SetErrorScope(body_stream, id_); !s.ok()) {
    return s;
  }
  (*env_->stream_scopes)[body_stream.value] = id_;
  if (!(loop_stream == stream)) {
    WEFT_RETURN_IF_ERROR(OrderAfter(stream, device, loop_stream));
  }
  // Everything the loop uses (its bodies' buffers and its condition),
  // current on the body's device before the loop starts.
  const scheduler::BufferId condition = node.control->condition;
  std::vector<BufferUse> uses = graph_->BufferUses(pn.node);
  for (const BufferUse& use : uses) {
    WEFT_RETURN_IF_ERROR(buffers_->Allocate(use.buffer, d));
    WEFT_RETURN_IF_ERROR(buffers_->MakeCurrent(use.buffer, d, d, loop_stream));
  }
  // The body as one device graph, in its plan's order.
  DeviceGraph graph;
  graph.device = d;
  absl::flat_hash_map<NodeId, int> position;
  for (int i = 0; i < body_plan.num_nodes(); ++i) {
    const NodeId v = body_plan.nodes[i].node;
    DeviceGraphNode n;
    n.kind = DeviceGraphNodeKind::kKernel;
    n.launch = BuildKernelLaunch(
        body, body.node(v), [&](BufferId b) { return buffers_->ptr(b, d); });
    for (NodeId dep : body_plan.Deps(i)) n.deps.push_back(position[dep]);
    position[v] = i;
    graph.nodes.push_back(std::move(n));
  }
  DeviceLoop loop;
  loop.name = node.name;
  loop.body = &graph;
  loop.condition = buffers_->ptr(condition, d);
  loop.dtype = graph_->buffer(condition).dtype;
  loop.max_iterations = node.control->max_iterations;
  loop.iterations = std::make_shared<std::atomic<int64_t>>(0);
  WEFT_RETURN_IF_ERROR(
      backend->LaunchDeviceLoop(loop, loop_stream, body_stream));
  buffers_->MarkWritten(uses, d, loop_stream);
  if (!(loop_stream == stream)) {
    WEFT_RETURN_IF_ERROR(OrderAfter(loop_stream, d, stream));
  }
  const uint64_t id = id_;
  const auto* post = &env_->post;
  WEFT_RETURN_IF_ERROR(backend->AddHostCallback(
      stream,
      [post, id, index, iterations = loop.iterations](absl::Status status) {
        (*post)(id,
                [index, status = std::move(status), count = iterations->load()](
                    Job& job) { job.OnDeviceLoopDone(index, status, count); });
      }));
  ++in_flight_;
  return absl::OkStatus();
}

void Job::OnDeviceLoopDone(int index, absl::Status status, int64_t iterations) {
  if (auto it = loop_streams_.find(index); it != loop_streams_.end()) {
    const auto [stream, device] = it->second;
    loop_streams_.erase(it);
    env_->backend->ReleaseErrorScope(stream, id_);
    env_->stream_pools[device]->Release(stream, status.ok());
  }
  const scheduler::NodeSpec& node = graph_->node(plan_->nodes[index].node);
  if (iterations > 0 && callbacks_.on_control) {
    callbacks_.on_control(
        node.name, ControlEventKind::kIteration, iterations,
        absl::StrCat(iterations, " iterations, on the device"));
  }
  if (!status.ok() && !IsOwnCancellation(status) &&
      status.code() != absl::StatusCode::kFailedPrecondition) {
    status = absl::Status(
        status.code(),
        absl::StrCat("loop '", node.name, "' iteration ", iterations,
                     " (on the device): ", status.message()));
  }
  OnNodeDone(index, std::move(status));
}

void Job::OnControlReady(int index, absl::Status status) {
  if (status.ok() && !status_.ok()) {
    status = absl::CancelledError(
        absl::StrCat("not run: the job had stopped (", status_.message(), ")"));
  }
  if (!status.ok()) {
    ControlFinished(index, std::move(status));
    return;
  }
  tracer_->NodeStarted(index);
  const scheduler::NodeSpec& node = graph_->node(plan_->nodes[index].node);
  const BufferId condition = node.control->condition;
  ControlRun::Hooks hooks;
  hooks.start_body = [this, index](int body) { return StartBody(index, body); };
  hooks.cancel_body = [post = env_->post](uint64_t job, absl::Status reason) {
    post(job,
         [reason = std::move(reason)](Job& nested) { nested.Cancel(reason); });
  };
  hooks.condition = [this, condition] {
    return static_cast<const char*>(buffers_->HostData(condition));
  };
  hooks.report = [this, name = &node.name](ControlEventKind kind, int64_t value,
                                           const std::string& message) {
    if (callbacks_.on_control)
      callbacks_.on_control(*name, kind, value, message);
  };
  hooks.finished = [post = &env_->post, id = id_, index](absl::Status status) {
    (*post)(id, [index, status = std::move(status)](Job& job) {
      job.ControlFinished(index, status);
    });
  };
  auto run = std::make_unique<ControlRun>(node, graph_->buffer(condition).dtype,
                                          std::move(hooks));
  ControlRun* started = run.get();
  controls_.emplace(index, std::move(run));
  started->Start();
}

absl::StatusOr<uint64_t> Job::StartBody(int index, int body) {
  const NodeId v = plan_->nodes[index].node;
  const scheduler::NodeSpec& node = graph_->node(v);
  const bool loop = node.control->kind == scheduler::ControlSpec::Kind::kWhile;
  if (auto it = parked_.find(index); loop && it != parked_.end()) {
    const uint64_t parked = it->second;
    env_->post(parked, [](Job& nested) { nested.Rerun(); });
    return parked;
  }
  std::shared_ptr<const scheduler::Graph> graph = node.control->bodies[body];
  const uint64_t nested_id = env_->reserve_id();
  if (loop) parked_[index] = nested_id;
  JobCallbacks callbacks;
  callbacks.on_done = [post = env_->post, id = id_, index, graph](
                          absl::Status status, NodeId failed,
                          HostBuffers /*outputs*/) {
    if (!status.ok() && failed >= 0) {
      status = absl::Status(status.code(),
                            absl::StrCat("node '", graph->node(failed).name,
                                         "': ", status.message()));
    }
    post(id, [index, status = std::move(status)](Job& job) {
      job.OnBodyDone(index, status);
    });
  };
  callbacks.on_control = callbacks_.on_control;
  NestedJob nested;
  nested.buffers = buffers_;
  if (node.control->kind == scheduler::ControlSpec::Kind::kWhile) {
    nested.fetch = node.control->condition;
  }
  auto job = std::make_unique<Job>(nested_id, env_, std::move(graph),
                                   plan_->bodies[v][body], std::move(callbacks),
                                   nested);
  job->set_control_mode(control_mode_);
  env_->start(nested_id, std::move(job));
  return nested_id;
}

void Job::OnBodyDone(int index, absl::Status status) {
  auto it = controls_.find(index);
  if (it != controls_.end()) it->second->OnBodyDone(std::move(status));
}

void Job::ControlFinished(int index, absl::Status status) {
  controls_.erase(index);
  if (auto it = parked_.find(index); it != parked_.end()) {
    env_->post(it->second, [](Job& nested) { nested.Dispose(); });
    parked_.erase(it);
  }
  running_controls_.erase(plan_->nodes[index].node);
  OnNodeDone(index, std::move(status));
}

bool Job::WaitsForControl(int index) const {
  for (NodeId dep : plan_->Deps(index)) {
    if (running_controls_.contains(dep)) return true;
  }
  return false;
}

absl::Status Job::FetchForEnclosing() {
  const BufferId b = nested_.fetch;
  if (b < 0) return absl::OkStatus();
  const BufferCoherence::Latest latest = buffers_->latest(b);
  if (latest.where < 0 || latest.where == buffers_->host()) {
    return absl::OkStatus();
  }
  // After the body's last write of it: on the stream that wrote it, or
  // (written by a job nested in this one) on one of this job's streams of
  // that device, after it.
  StreamHandle stream = latest.writer;
  if (streams_.DeviceOf(stream) < 0) {
    WEFT_ASSIGN_OR_RETURN(stream, streams_.Acquire(latest.where));
    WEFT_RETURN_IF_ERROR(streams_.Enter(latest.writer));
    WEFT_RETURN_IF_ERROR(streams_.Enter(stream));
    WEFT_RETURN_IF_ERROR(OrderAfter(latest.writer, latest.where, stream));
  } else {
    WEFT_RETURN_IF_ERROR(streams_.Enter(stream));
  }
  return buffers_->MakeCurrent(b, buffers_->host(), latest.where, stream);
}

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
      const char* staged = buffers_->Stage(b);
      const std::string name = absl::StrCat(spec.name, " upload");
      TracedWork upload{SpanKind::kCopy, TraceTrackKind::kHostToDevice, device,
                        name};
      upload.bytes = spec.size_bytes;
      const int span = tracer_->Begin(upload, stream, device);
      WEFT_RETURN_IF_ERROR(backend->CopyHostToDevice(
          buffers_->ptr(b, device), staged, spec.size_bytes, stream));
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
