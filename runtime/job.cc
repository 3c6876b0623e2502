#include "runtime/job.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/kernel_launch_builder.h"
#include "runtime/ops/cpu_kernels.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

using scheduler::BufferId;
using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::NodeId;
using scheduler::PlannedNode;

namespace {

const char* TrackName(int kind) {
  switch (kind) {
    case 1:
      return "H2D";
    case 2:
      return "D2H";
    case 3:
      return "D2D";
  }
  return "stream";
}

}  // namespace

absl::Status ValidatePlan(const scheduler::Graph& graph,
                          const scheduler::Plan& plan, int num_devices) {
  const int n = graph.num_nodes();
  if (static_cast<int>(plan.nodes.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan lists ", plan.nodes.size(), " nodes but graph '",
                     graph.name(), "' has ", n));
  }
  if (plan.deps.rows() != n || plan.waits.rows() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan.deps and plan.waits have ", plan.deps.rows(), " and ",
        plan.waits.rows(), " rows; the plan lists ", n, " nodes"));
  }
  if (!plan.deps.WellFormed() || !plan.waits.WellFormed()) {
    return absl::InvalidArgumentError(
        "plan.deps or plan.waits: offsets must start at 0, never go down "
        "and end at the item count");
  }
  if (plan.num_events < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.num_events is negative (", plan.num_events, ")"));
  }
  const int num_streams = static_cast<int>(plan.streams.size());
  for (int s = 0; s < num_streams; ++s) {
    const int device = plan.streams[s].device;
    if (device < 0 || device >= num_devices) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.streams[", s, "]: device ", device,
                       " is outside the machine (", num_devices, " devices)"));
    }
  }
  std::vector<int> position(n, -1);
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan.nodes[i];
    // Error contexts, built only on the error path (this loop is hot).
    auto where = [i] { return absl::StrCat("plan.nodes[", i, "]"); };
    auto named = [&] {
      return absl::StrCat(where(), " (node '", graph.node(pn.node).name, "')");
    };
    if (pn.node < 0 || pn.node >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": node id ", pn.node, " is out of range"));
    }
    if (position[pn.node] >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": node '", graph.node(pn.node).name,
                       "' is listed twice"));
    }
    position[pn.node] = i;
    if (pn.device < 0 || pn.device >= num_devices) {
      return absl::InvalidArgumentError(
          absl::StrCat(named(), ": device ", pn.device,
                       " is outside the machine (", num_devices, " devices)"));
    }
    if (pn.stream < 0 || pn.stream >= num_streams) {
      return absl::InvalidArgumentError(absl::StrCat(
          named(), ": stream ", pn.stream, " does not exist (", num_streams,
          " streams)"));
    }
    if (plan.streams[pn.stream].device != pn.device) {
      return absl::InvalidArgumentError(absl::StrCat(
          named(), ": runs on device ", pn.device, " but its stream ", pn.stream,
          " is on device ", plan.streams[pn.stream].device));
    }
    if (pn.peer_stream != -1 &&
        (pn.peer_stream < 0 || pn.peer_stream >= num_streams ||
         plan.streams[pn.peer_stream].device == pn.device)) {
      return absl::InvalidArgumentError(absl::StrCat(
          named(), ": peer stream ", pn.peer_stream,
          " is not a stream of another device (", num_streams, " streams)"));
    }
    for (int e : plan.Waits(i)) {
      if (e < 0 || e >= plan.num_events) {
        return absl::InvalidArgumentError(absl::StrCat(
            named(), ": waits on event ", e, " of ", plan.num_events));
      }
    }
    if (pn.signal_event < -1 || pn.signal_event >= plan.num_events) {
      return absl::InvalidArgumentError(absl::StrCat(
          named(), ": signals event ", pn.signal_event, " of ", plan.num_events));
    }
    // In the same pass (the plan is large): a dependency issued before this
    // node has its position already, below i.
    for (NodeId dep : plan.Deps(i)) {
      if (dep < 0 || dep >= n || position[dep] < 0 || position[dep] >= i) {
        return absl::InvalidArgumentError(
            absl::StrCat(named(), ": dependency ", dep,
                         " is not issued before it"));
      }
    }
  }
  return absl::OkStatus();
}

Job::Job(uint64_t id, const JobEnv* env,
         std::shared_ptr<const scheduler::Graph> graph,
         std::shared_ptr<const scheduler::Plan> plan, JobCallbacks callbacks)
    : id_(id),
      env_(env),
      graph_(std::move(graph)),
      plan_(std::move(plan)),
      callbacks_(std::move(callbacks)),
      num_devices_(env_->backend->device_count()),
      host_(num_devices_) {
  buffers_.resize(graph_->num_buffers());
  for (BufferState& b : buffers_) b.copies.resize(num_devices_ + 1);
  streams_.resize(plan_->streams.size());
  entered_.assign(plan_->streams.size(), 0);
  own_streams_.resize(num_devices_);
  fold_next_.assign(num_devices_, 0);
  events_.resize(plan_->num_events);
  event_devices_.assign(plan_->num_events, -1);
  if (callbacks_.on_trace) {
    trace_ = std::make_unique<TraceState>();
    trace_->node_op.assign(plan_->nodes.size(), -1);
    trace_->event_signaller.assign(plan_->num_events, -1);
  }
}

Job::~Job() = default;

void Job::Begin() {
  if (absl::Status s = AllocateBuffers(); !s.ok()) Fail(std::move(s), -1);
  Pump();
}

void Job::Cancel(absl::Status reason) {
  if (phase_ == Phase::kDone || cancelled_) return;
  cancelled_ = true;
  if (reason.ok()) reason = absl::CancelledError("job cancelled");
  if (status_.ok()) cancel_reason_ = reason;
  Fail(std::move(reason), -1);
  // Withdraw the work already issued but not started, and stop what runs
  // where the backend can; elsewhere the job is abandoned (job.h).
  for (StreamHandle stream : used_streams_) {
    env_->backend->AbortErrorScope(stream, id_, status_).IgnoreError();
  }
  abandon_ = !env_->interrupts_work;
  Pump();
}

void Job::Fail(absl::Status status, NodeId node) {
  if (!status_.ok()) return;
  status_ = std::move(status);
  failed_node_ = node;
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
    const bool all_issued = next_ >= plan_->nodes.size();
    if (!status_.ok() || all_issued) {
      if (status_.ok()) {
        if (absl::Status s = DownloadOutputs(); !s.ok()) Fail(std::move(s), -1);
      }
      StartDraining();
    } else if (in_flight_ < env_->window && !pump_posted_) {
      // More is issuable now: continue after other jobs had a turn.
      pump_posted_ = true;
      env_->post(id_, [](Job& job) {
        job.pump_posted_ = false;
        job.Pump();
      });
    }
  }
  if (phase_ == Phase::kDraining && fences_pending_ == 0 && in_flight_ == 0) {
    Finish();
  } else if (phase_ == Phase::kDraining && abandon_ && !reported_) {
    Abandon();
  }
}

void Job::IssueSome() {
  int issued = 0;
  while (next_ < plan_->nodes.size() && in_flight_ < env_->window &&
         issued < env_->issue_batch && status_.ok()) {
    const int index = static_cast<int>(next_++);
    absl::Status s = IssueNode(index);
    if (!s.ok()) {
      const NodeId node = plan_->nodes[index].node;
      if (callbacks_.on_node) callbacks_.on_node(node, NodeEventKind::kFailed, s);
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
  WEFT_ASSIGN_OR_RETURN(StreamHandle stream, StreamFor(pn.stream));
  WEFT_RETURN_IF_ERROR(EnterLogical(pn.stream, stream));

  bool waited = false;
  for (int e : plan_->Waits(index)) {
    // An event nobody recorded yet is a no-op wait, as in CUDA.
    if (events_[e].value != 0) {
      WEFT_RETURN_IF_ERROR(backend->StreamWaitEvent(stream, events_[e]));
      waited = true;
    }
  }
  if (waited) TraceDirty(stream);
  // A copy between devices also holds a stream of its source device: it
  // starts once that stream reaches it too, and that stream's later work
  // runs after it. `order_after(from, device, to)` makes `to` wait for
  // the work enqueued so far on `from`, a stream of `device`.
  auto order_after = [&](StreamHandle from, int from_device,
                         StreamHandle to) -> absl::Status {
    WEFT_ASSIGN_OR_RETURN(EventHandle join,
                          env_->event_pools[from_device]->Acquire());
    held_events_.emplace_back(join, from_device);
    WEFT_RETURN_IF_ERROR(backend->RecordEvent(join, from));
    WEFT_RETURN_IF_ERROR(backend->StreamWaitEvent(to, join));
    TraceDirty(to);
    return absl::OkStatus();
  };
  StreamHandle peer;
  int peer_device = -1;
  if (pn.peer_stream >= 0) {
    WEFT_ASSIGN_OR_RETURN(peer, StreamFor(pn.peer_stream));
    peer_device = plan_->streams[pn.peer_stream].device;
    if (peer.value == stream.value) {
      peer_device = -1;  // one pooled stream: FIFO orders it already
    } else {
      WEFT_RETURN_IF_ERROR(Enter(peer));
      WEFT_RETURN_IF_ERROR(order_after(peer, peer_device, stream));
    }
  }
  const bool on_host =
      node.engine == scheduler::Engine::kHost && env_->host_gates;
  const int where = on_host ? host_ : device;
  std::vector<BufferUse> uses;
  if (!node.args.empty()) uses = graph_->BufferUses(pn.node);
  for (const BufferUse& use : uses) {
    WEFT_RETURN_IF_ERROR(MakeCurrent(use.buffer, where, device, stream));
  }

  int op = -1;
  if (on_host) {
    op = TraceBegin(SpanKind::kHost, TraceTrackFor(TrackKind::kStream, -1, {}),
                    node.name, node.op, pn.node, 0, stream, device);
    WEFT_RETURN_IF_ERROR(EnqueueHostOp(index, stream, uses));
    // In flight from here: its report comes from FinishHostOp.
  } else {
    const KernelLaunch launch =
        BuildKernelLaunch(*graph_, node, [&](scheduler::BufferId buffer) {
          return buffers_[buffer].copies[device].ptr;
        });
    // Only when tracing: TraceBegin takes copies of the names.
    if (trace_ != nullptr) {
      op = TraceBegin(SpanKind::kKernel,
                      TraceTrackFor(TrackKind::kStream, device, stream),
                      node.name, node.op, pn.node, 0, stream, device);
    }
    WEFT_RETURN_IF_ERROR(backend->Launch(launch, stream));
    MarkWritten(uses, where, stream);
    // Sixteen bytes of captures: stored inline, no allocation. The job
    // outlives the callback (it finishes only after its fences).
    Job* self = this;
    WEFT_RETURN_IF_ERROR(backend->AddHostCallback(
        stream, [self, index](absl::Status status) {
          self->env_->node_done(self->id_, index, std::move(status));
        }));
    ++in_flight_;
  }
  TraceEnd(op, stream, device);
  if (trace_ != nullptr && op >= 0) {
    trace_->node_op[index] = op;
    for (int e : plan_->Waits(index)) {
      const int from = trace_->event_signaller[e];
      if (from >= 0) trace_->flows.emplace_back(from, op);
    }
    if (pn.signal_event >= 0) trace_->event_signaller[pn.signal_event] = op;
  }
  if (callbacks_.on_node) {
    callbacks_.on_node(pn.node, NodeEventKind::kStarted, absl::OkStatus());
  }
  // Recorded after the callback (or the gate), so a node's completion is
  // reported before anything waiting on it can complete: progress follows
  // dependencies. The node is in flight now, so a failure here fails the
  // job but leaves the node's own report to its completion.
  if (pn.signal_event >= 0) {
    absl::StatusOr<EventHandle> event = PlanEventFor(pn.signal_event, device);
    absl::Status recorded = event.ok()
                                ? backend->RecordEvent(*event, stream)
                                : event.status();
    if (!recorded.ok()) Fail(std::move(recorded), pn.node);
  }
  if (peer_device >= 0) {
    absl::Status joined = order_after(stream, device, peer);
    if (!joined.ok()) Fail(std::move(joined), pn.node);
  }
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
      host_op.args.push_back(HostBufferArg{HostData(use->buffer),
                                           spec.size_bytes, spec.dtype,
                                           use->access});
    } else if (const auto* f = std::get_if<float>(&arg)) {
      host_op.args.push_back(*f);
    } else if (const auto* d = std::get_if<double>(&arg)) {
      host_op.args.push_back(*d);
    } else if (const auto* i = std::get_if<int32_t>(&arg)) {
      host_op.args.push_back(*i);
    } else if (const auto* l = std::get_if<int64_t>(&arg)) {
      host_op.args.push_back(*l);
    }
  }
  // The callback fires once the inputs are in host memory; the gate holds
  // the stream (and the signal event after it) until the op has run.
  const uint64_t id = id_;
  const auto* post = &env_->post;
  WEFT_RETURN_IF_ERROR(backend->AddHostCallback(
      stream, [post, id, index](absl::Status status) {
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
  MarkWritten(uses, host_, stream);
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
    FinishHostOp(index, absl::CancelledError(absl::StrCat(
                            "not run: the job had stopped (",
                            status_.message(), ")")));
    return;
  }
  const NodeId node = plan_->nodes[index].node;
  if (trace_ != nullptr && !env_->device_clock && trace_->node_op[index] >= 0) {
    trace_->ops[trace_->node_op[index]].host_start = absl::Now();
  }
  const uint64_t id = id_;
  auto post = env_->post;
  env_->host_pool->Submit([post = std::move(post), id, index,
                           kernel = host_op.kernel, args = host_op.args,
                           op = graph_->node(node).op]() {
    absl::Status status = (*kernel)(args);
    if (!status.ok()) {
      status = absl::Status(status.code(), absl::StrCat(op, " on the host: ",
                                                        status.message()));
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
  if (trace_ != nullptr && !env_->device_clock && trace_->node_op[index] >= 0) {
    trace_->ops[trace_->node_op[index]].host_end = absl::Now();
  }
  if (status.ok()) {
    if (callbacks_.on_node && !reported_) {
      callbacks_.on_node(pn.node, NodeEventKind::kFinished, status);
    }
  } else if (IsOwnCancellation(status)) {
    // Skipped because this job was cancelled: not a node failure, and the
    // stream is healthy.
  } else {
    stream_failed_[streams_[pn.stream].value] = true;
    if (callbacks_.on_node && !reported_) {
      callbacks_.on_node(pn.node, NodeEventKind::kFailed, status);
    }
    Fail(std::move(status), pn.node);
  }
  Pump();
}

void Job::OnFence(StreamHandle stream, absl::Status status) {
  --fences_pending_;
  if (!status.ok() && !IsOwnCancellation(status)) {
    stream_failed_[stream.value] = true;
    Fail(std::move(status), -1);
  }
  Pump();
}

absl::Status Job::AllocateBuffers() {
  if (graph_->num_buffers() == 0) return absl::OkStatus();  // nothing to walk
  for (const PlannedNode& pn : plan_->nodes) {
    const scheduler::NodeSpec& node = graph_->node(pn.node);
    if (node.args.empty()) continue;
    if (node.engine == scheduler::Engine::kHost && env_->host_gates) continue;
    for (const BufferUse& use : graph_->BufferUses(pn.node)) {
      Copy& copy = buffers_[use.buffer].copies[pn.device];
      if (copy.allocated) continue;
      const BufferSpec& spec = graph_->buffer(use.buffer);
      absl::StatusOr<DevicePtr> ptr =
          env_->memory_pools[pn.device]->Allocate(spec.size_bytes);
      if (!ptr.ok()) {
        return absl::Status(
            ptr.status().code(),
            absl::StrCat("buffer '", spec.name, "' (first used by node '",
                         node.name, "' on device ", pn.device,
                         "): ", ptr.status().message()));
      }
      copy.ptr = *ptr;
      copy.allocated = true;
    }
  }
  return absl::OkStatus();
}

char* Job::HostData(BufferId b) {
  std::string& data = buffers_[b].host_data;
  const uint64_t size = graph_->buffer(b).size_bytes;
  if (data.size() != size) data.assign(size, '\0');
  return data.data();
}

absl::Status Job::MakeCurrent(BufferId b, int where, int stream_device,
                              StreamHandle stream) {
  BufferState& state = buffers_[b];
  Copy& dst = state.copies[where];
  if (state.latest < 0) return Materialize(b, where, stream_device, stream);
  if (dst.current) return WaitReady(dst, stream);
  if (!state.written &&
      graph_->buffer(b).init != BufferSpec::Init::kData) {
    // Still its initial zeros or fill: made here too instead of copied.
    const int latest = state.latest;
    WEFT_RETURN_IF_ERROR(Materialize(b, where, stream_device, stream));
    state.latest = latest;
    return absl::OkStatus();
  }
  Copy& src = state.copies[state.latest];
  WEFT_RETURN_IF_ERROR(WaitReady(src, stream));
  const BufferSpec& spec = graph_->buffer(b);
  const uint64_t bytes = spec.size_bytes;
  Backend* backend = env_->backend;
  int op = -1;
  if (where == host_) {
    op = TraceBegin(
        SpanKind::kCopy,
        TraceTrackFor(TrackKind::kDeviceToHost, state.latest, stream),
        absl::StrCat(spec.name, " d", state.latest, "->host"), "", -1, bytes,
        stream, stream_device);
    WEFT_RETURN_IF_ERROR(
        backend->CopyDeviceToHost(HostData(b), src.ptr, bytes, stream));
  } else if (state.latest == host_) {
    op = TraceBegin(SpanKind::kCopy,
                    TraceTrackFor(TrackKind::kHostToDevice, where, stream),
                    absl::StrCat(spec.name, " host->d", where), "", -1, bytes,
                    stream, stream_device);
    WEFT_RETURN_IF_ERROR(
        backend->CopyHostToDevice(dst.ptr, HostData(b), bytes, stream));
  } else {
    op = TraceBegin(
        SpanKind::kCopy,
        TraceTrackFor(TrackKind::kPeer, stream_device, stream),
        absl::StrCat(spec.name, " d", state.latest, "->d", where), "", -1,
        bytes, stream, stream_device);
    WEFT_RETURN_IF_ERROR(
        backend->CopyDeviceToDevice(dst.ptr, src.ptr, bytes, stream));
  }
  TraceEnd(op, stream, stream_device);
  return MarkTransferred(dst, stream_device, stream);
}

absl::Status Job::Materialize(BufferId b, int where, int stream_device,
                              StreamHandle stream) {
  const BufferSpec& spec = graph_->buffer(b);
  Copy& copy = buffers_[b].copies[where];
  buffers_[b].latest = where;
  if (where == host_) {
    const std::string initial = InitialContents(b);
    std::memcpy(HostData(b), initial.data(), initial.size());
    copy.current = true;
    copy.ready_pending = false;
    return absl::OkStatus();
  }
  Backend* backend = env_->backend;
  int op = -1;
  if (spec.init == BufferSpec::Init::kData) {
    staging_.push_back(InitialContents(b));
    op = TraceBegin(SpanKind::kCopy,
                    TraceTrackFor(TrackKind::kHostToDevice, where, stream),
                    absl::StrCat(spec.name, " upload"), "", -1,
                    spec.size_bytes, stream, stream_device);
    WEFT_RETURN_IF_ERROR(backend->CopyHostToDevice(
        copy.ptr, staging_.back().data(), spec.size_bytes, stream));
  } else {
    // Zero and fill initializations run the built-in fill on the device
    // instead of uploading a buffer's worth of bytes.
    const bool zero = spec.init == BufferSpec::Init::kZero;
    KernelLaunch fill;
    fill.op = "fill";
    fill.args = {DeviceBufferArg{copy.ptr, spec.size_bytes,
                                 zero ? scheduler::DType::kBytes : spec.dtype,
                                 scheduler::Access::kWrite},
                 zero ? 0.0 : spec.fill};
    op = TraceBegin(SpanKind::kKernel,
                    TraceTrackFor(TrackKind::kStream, where, stream),
                    absl::StrCat(spec.name, " init"), "fill", -1, 0, stream,
                    stream_device);
    WEFT_RETURN_IF_ERROR(backend->Launch(fill, stream));
  }
  TraceEnd(op, stream, stream_device);
  return MarkTransferred(copy, stream_device, stream);
}

absl::Status Job::WaitReady(Copy& copy, StreamHandle stream) {
  if (!copy.ready_pending || copy.ready_stream == stream) {
    return absl::OkStatus();
  }
  TraceDirty(stream);
  return env_->backend->StreamWaitEvent(stream, copy.ready);
}

absl::Status Job::MarkTransferred(Copy& copy, int stream_device,
                                  StreamHandle stream) {
  if (copy.ready.value == 0 || copy.ready_device != stream_device) {
    WEFT_ASSIGN_OR_RETURN(copy.ready,
                          env_->event_pools[stream_device]->Acquire());
    copy.ready_device = stream_device;
    held_events_.emplace_back(copy.ready, stream_device);
  }
  WEFT_RETURN_IF_ERROR(env_->backend->RecordEvent(copy.ready, stream));
  copy.ready_pending = true;
  copy.ready_stream = stream;
  copy.current = true;
  copy.writer = stream;
  return absl::OkStatus();
}

void Job::MarkWritten(const std::vector<BufferUse>& uses, int where,
                      StreamHandle stream) {
  for (const BufferUse& use : uses) {
    if (!scheduler::Writes(use.access)) continue;
    BufferState& state = buffers_[use.buffer];
    state.latest = where;
    state.written = true;
    for (Copy& copy : state.copies) {
      copy.current = false;
      // From here on the plan orders every later use of this buffer.
      copy.ready_pending = false;
    }
    state.copies[where].current = true;
    state.copies[where].writer = stream;
  }
}

absl::Status Job::PrefetchUploads() {
  std::vector<StreamHandle> upload(num_devices_);
  std::vector<uint8_t> seen(graph_->num_buffers(), 0);
  for (const PlannedNode& pn : plan_->nodes) {
    const scheduler::NodeSpec& node = graph_->node(pn.node);
    const bool on_host =
        node.engine == scheduler::Engine::kHost && env_->host_gates;
    for (const BufferUse& use : graph_->Uses(pn.node)) {
      const BufferId b = use.buffer;
      if (seen[b]) continue;
      seen[b] = 1;
      if (on_host || buffers_[b].latest >= 0 ||
          graph_->buffer(b).init != BufferSpec::Init::kData) {
        continue;
      }
      const int device = pn.device;
      if (upload[device].value == 0) {
        WEFT_ASSIGN_OR_RETURN(upload[device], AcquireStream(device));
        WEFT_RETURN_IF_ERROR(Enter(upload[device]));
      }
      WEFT_RETURN_IF_ERROR(Materialize(b, device, device, upload[device]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StreamHandle> Job::StreamFor(int logical) {
  if (streams_[logical].value != 0) return streams_[logical];
  WEFT_ASSIGN_OR_RETURN(streams_[logical],
                        AcquireStream(plan_->streams[logical].device));
  return streams_[logical];
}

absl::StatusOr<StreamHandle> Job::AcquireStream(int device) {
  StreamPool* pool = env_->stream_pools[device];
  std::vector<StreamHandle>& own = own_streams_[device];
  StreamHandle stream;
  if (!own.empty()) {
    WEFT_ASSIGN_OR_RETURN(std::optional<StreamHandle> fresh,
                          pool->AcquireUnshared());
    if (fresh.has_value()) {
      stream = *fresh;
      acquired_streams_.emplace_back(stream, device);
      own.push_back(stream);
    } else {
      // The pool is at its cap: serialize with this job's own work rather
      // than with other jobs'.
      stream = own[fold_next_[device]++ % own.size()];
    }
  } else {
    WEFT_ASSIGN_OR_RETURN(stream, pool->Acquire());
    acquired_streams_.emplace_back(stream, device);
    own.push_back(stream);
  }
  if (stream_failed_.emplace(stream.value, false).second) {
    used_streams_.push_back(stream);
    stream_devices_[stream.value] = device;
  }
  return stream;
}

absl::Status Job::Enter(StreamHandle stream) {
  uint64_t& scope = (*env_->stream_scopes)[stream.value];
  if (scope == id_) return absl::OkStatus();
  WEFT_RETURN_IF_ERROR(env_->backend->SetErrorScope(stream, id_));
  scope = id_;
  if (env_->scope_switches != nullptr) ++*env_->scope_switches;
  // Another job's work went onto the stream since this job's last marker.
  TraceDirty(stream);
  return absl::OkStatus();
}

absl::Status Job::EnterLogical(int logical, StreamHandle stream) {
  const uint64_t* switches = env_->scope_switches;
  if (switches != nullptr && entered_[logical] == *switches + 1) {
    return absl::OkStatus();
  }
  WEFT_RETURN_IF_ERROR(Enter(stream));
  if (switches != nullptr) entered_[logical] = *switches + 1;
  return absl::OkStatus();
}

absl::StatusOr<EventHandle> Job::PlanEventFor(int event, int device) {
  if (events_[event].value != 0 && event_devices_[event] == device) {
    return events_[event];
  }
  // First signal, or a signal from another device than the last one
  // (events belong to a device). The previous handle stays held: waits
  // already enqueued on it have captured their recording.
  WEFT_ASSIGN_OR_RETURN(EventHandle handle,
                        env_->event_pools[device]->Acquire());
  held_events_.emplace_back(handle, device);
  events_[event] = handle;
  event_devices_[event] = device;
  return handle;
}

absl::Status Job::DownloadOutputs() {
  for (BufferId b = 0; b < graph_->num_buffers(); ++b) {
    const BufferSpec& spec = graph_->buffer(b);
    if (!spec.output) continue;
    const BufferState& state = buffers_[b];
    if (state.latest < 0) {
      // No node touched it: its contents are its initial contents.
      outputs_.emplace_back(spec.name,
                            std::make_unique<std::string>(InitialContents(b)));
      continue;
    }
    if (state.latest == host_) {
      // Written by a host node: read once everything has drained.
      host_outputs_.emplace_back(spec.name, b);
      continue;
    }
    auto host = std::make_unique<std::string>(spec.size_bytes, '\0');
    const Copy& copy = state.copies[state.latest];
    const StreamHandle stream = copy.writer;
    WEFT_RETURN_IF_ERROR(Enter(stream));
    const int op = TraceBegin(
        SpanKind::kCopy,
        TraceTrackFor(TrackKind::kDeviceToHost, state.latest, stream),
        absl::StrCat(spec.name, " download"), "", -1, spec.size_bytes, stream,
        state.latest);
    // FIFO after the last write of the latest version.
    WEFT_RETURN_IF_ERROR(env_->backend->CopyDeviceToHost(
        host->data(), copy.ptr, spec.size_bytes, stream));
    TraceEnd(op, stream, state.latest);
    outputs_.emplace_back(spec.name, std::move(host));
  }
  return absl::OkStatus();
}

void Job::StartDraining() {
  phase_ = Phase::kDraining;
  const uint64_t id = id_;
  const auto* post = &env_->post;
  for (StreamHandle stream : used_streams_) {
    absl::Status s = Enter(stream);
    if (s.ok()) {
      s = env_->backend->AddHostCallback(
          stream, [post, id, stream](absl::Status status) {
            (*post)(id, [stream, status = std::move(status)](Job& job) {
              job.OnFence(stream, status);
            });
          });
    }
    if (s.ok()) {
      ++fences_pending_;
    } else {
      unfenced_ = true;
      stream_failed_[stream.value] = true;
      Fail(std::move(s), -1);
    }
  }
}

bool Job::IsOwnCancellation(const absl::Status& status) const {
  return cancelled_ && (status.code() == absl::StatusCode::kCancelled ||
                        (!cancel_reason_.ok() && status == cancel_reason_));
}

void Job::Finish() {
  phase_ = Phase::kDone;
  Backend* backend = env_->backend;
  // Every fence has completed: nothing of this job is queued any more.
  for (StreamHandle stream : used_streams_) {
    backend->ReleaseErrorScope(stream, id_);
  }
  // An abandoned job was reported already. Any other is reported once
  // everything is given back, its trace built before its events are.
  const bool report = !reported_;
  std::optional<JobTrace> trace;
  HostBuffers outputs;
  if (report) {
    if (trace_ != nullptr) trace = BuildTrace();
    outputs = TakeOutputs();
  }
  for (BufferState& state : buffers_) {
    for (Copy& copy : state.copies) {
      if (copy.allocated) {
        MemoryPool* pool = env_->memory_pools[copy.ptr.device];
        (unfenced_ ? pool->FreeUncached(copy.ptr) : pool->Free(copy.ptr))
            .IgnoreError();
      }
      copy.allocated = false;
    }
  }
  for (const auto& [event, device] : held_events_) {
    env_->event_pools[device]->Release(event);
  }
  held_events_.clear();
  for (const auto& [stream, device] : acquired_streams_) {
    StreamPool* pool = env_->stream_pools[device];
    if (fenced_) pool->Unfence(stream);
    pool->Release(stream, !stream_failed_[stream.value]);
  }
  acquired_streams_.clear();
  staging_.clear();
  if (report) Deliver(std::move(trace), std::move(outputs));
}

void Job::Abandon() {
  fenced_ = true;
  for (const auto& [stream, device] : acquired_streams_) {
    env_->stream_pools[device]->Fence(stream);
  }
  std::optional<JobTrace> trace;
  if (trace_ != nullptr) trace = BuildTrace();
  Deliver(std::move(trace), TakeOutputs());
}

HostBuffers Job::TakeOutputs() {
  HostBuffers outputs;
  if (status_.ok()) {
    for (auto& [name, data] : outputs_) outputs[name] = std::move(*data);
    for (const auto& [name, b] : host_outputs_) {
      outputs[name] = std::move(buffers_[b].host_data);
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

std::string Job::InitialContents(BufferId b) const {
  const BufferSpec& spec = graph_->buffer(b);
  std::string bytes(spec.size_bytes, '\0');
  switch (spec.init) {
    case BufferSpec::Init::kZero:
      break;
    case BufferSpec::Init::kData:
      std::memcpy(bytes.data(), spec.data.data(),
                  std::min<size_t>(spec.data.size(), bytes.size()));
      break;
    case BufferSpec::Init::kFill: {
      const HostArg args[] = {
          HostBufferArg{bytes.data(), bytes.size(), spec.dtype,
                        scheduler::Access::kWrite},
          spec.fill};
      FillKernel(args).IgnoreError();  // cannot fail: a buffer and a scalar
      break;
    }
  }
  return bytes;
}

// ---- Device graphs.

absl::Status Job::IssueDeviceGraphs() {
  Backend* backend = env_->backend;
  JobGraphInputs inputs;
  inputs.graph = graph_.get();
  inputs.plan = plan_.get();
  inputs.buffer = [this](BufferId b, int device) {
    return buffers_[b].copies[device].ptr;
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
    WEFT_ASSIGN_OR_RETURN(EventHandle event,
                          env_->event_pools[device]->Acquire());
    held_events_.emplace_back(event, device);
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
          StreamFor(plan_->nodes[job_graph.plan_indices.front()].stream));
    }
    const StreamHandle stream = device_stream[device];
    WEFT_RETURN_IF_ERROR(Enter(stream));
    for (BufferId b : job_graph.uploads) {
      const BufferSpec& spec = graph_->buffer(b);
      staging_.push_back(InitialContents(b));
      const int op = TraceBegin(
          SpanKind::kCopy,
          TraceTrackFor(TrackKind::kHostToDevice, device, stream),
          absl::StrCat(spec.name, " upload"), "", -1, spec.size_bytes, stream,
          device);
      WEFT_RETURN_IF_ERROR(backend->CopyHostToDevice(
          buffers_[b].copies[device].ptr, staging_.back().data(),
          spec.size_bytes, stream));
      TraceEnd(op, stream, device);
    }
    const int op = TraceBegin(
        SpanKind::kKernel, TraceTrackFor(TrackKind::kStream, device, stream),
        absl::StrCat("device graph ", g, " (", job_graph.plan_indices.size(),
                     " nodes)"),
        "graph", -1, 0, stream, device);
    WEFT_RETURN_IF_ERROR(backend->LaunchDeviceGraph(job_graph.graph, stream));
    TraceEnd(op, stream, device);
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
    BufferState& state = buffers_[b];
    state.latest = latest;
    state.copies[latest].current = true;
    state.copies[latest].writer = device_stream[latest];
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
    stream_failed_[stream.value] = true;
    Fail(absl::Status(status.code(),
                      absl::StrCat("device graph on device ",
                                   job_graph.graph.device, ": ",
                                   status.message())),
         -1);
  }
  Pump();
}

// ---- Tracing.

int Job::TraceTrackFor(TrackKind kind, int device, StreamHandle stream) {
  if (trace_ == nullptr) return -1;
  const int k = static_cast<int>(kind);
  // Copy engines are per device; stream tracks per pooled stream.
  const uint64_t which = kind == TrackKind::kStream ? stream.value : 0;
  const std::pair<int, uint64_t> key((device + 1) * 4 + k, which);
  auto it = trace_->track_index.find(key);
  if (it != trace_->track_index.end()) return it->second;
  const int track = static_cast<int>(trace_->tracks.size());
  std::string name;
  if (device < 0) {
    name = "host";
  } else if (kind == TrackKind::kStream) {
    name = absl::StrCat("stream ", stream.value);
  } else {
    name = TrackName(k);
  }
  trace_->tracks.push_back(TraceTrack{device, std::move(name)});
  trace_->track_index.emplace(key, track);
  return track;
}

absl::StatusOr<EventHandle> Job::TraceMarker(StreamHandle stream, int device) {
  WEFT_ASSIGN_OR_RETURN(EventHandle event,
                        env_->event_pools[device]->Acquire());
  held_events_.emplace_back(event, device);
  WEFT_RETURN_IF_ERROR(env_->backend->RecordEvent(event, stream));
  return event;
}

int Job::TraceBegin(SpanKind kind, int track, std::string name,
                    std::string op, NodeId node, uint64_t bytes,
                    StreamHandle stream, int device) {
  if (trace_ == nullptr) return -1;
  TracedOp traced;
  traced.kind = kind;
  traced.track = track;
  traced.name = std::move(name);
  traced.op = std::move(op);
  traced.node = node;
  traced.bytes = bytes;
  if (env_->device_clock) {
    auto clean = trace_->clean_end.find(stream.value);
    if (clean != trace_->clean_end.end()) {
      traced.start = clean->second;
    } else {
      absl::StatusOr<EventHandle> marker = TraceMarker(stream, device);
      if (!marker.ok()) return -1;  // traces are best effort
      traced.start = *marker;
    }
  } else {
    traced.host_start = absl::Now();
  }
  trace_->ops.push_back(std::move(traced));
  return static_cast<int>(trace_->ops.size()) - 1;
}

void Job::TraceEnd(int op, StreamHandle stream, int device) {
  if (trace_ == nullptr || op < 0) return;
  if (!env_->device_clock) return;  // the host clock ends at completion
  absl::StatusOr<EventHandle> marker = TraceMarker(stream, device);
  if (!marker.ok()) {
    trace_->clean_end.erase(stream.value);
    return;
  }
  trace_->ops[op].end = *marker;
  trace_->clean_end[stream.value] = *marker;
}

void Job::TraceDirty(StreamHandle stream) {
  if (trace_ != nullptr) trace_->clean_end.erase(stream.value);
}

JobTrace Job::BuildTrace() {
  JobTrace trace;
  trace.name = graph_->name();
  trace.device_clock = env_->device_clock;
  trace.tracks = trace_->tracks;
  struct Times {
    bool ok = false;
    double start = 0;
    double end = 0;
  };
  std::vector<Times> times(trace_->ops.size());
  double origin = std::numeric_limits<double>::infinity();
  absl::Time host_origin = absl::InfiniteFuture();
  for (size_t i = 0; i < trace_->ops.size(); ++i) {
    const TracedOp& op = trace_->ops[i];
    Times& t = times[i];
    if (env_->device_clock) {
      if (op.start.value == 0 || op.end.value == 0) continue;
      absl::StatusOr<double> start = env_->backend->EventTimeUs(op.start);
      absl::StatusOr<double> end = env_->backend->EventTimeUs(op.end);
      if (!start.ok() || !end.ok()) continue;
      t = Times{true, *start, std::max(*start, *end)};
      origin = std::min(origin, t.start);
    } else {
      if (op.host_end == absl::Time()) continue;
      host_origin = std::min(host_origin, op.host_start);
      t.ok = true;
    }
  }
  std::vector<int> span_of(trace_->ops.size(), -1);
  for (size_t i = 0; i < trace_->ops.size(); ++i) {
    if (!times[i].ok) continue;
    const TracedOp& op = trace_->ops[i];
    TraceSpan span;
    span.track = op.track;
    span.kind = op.kind;
    span.name = op.name;
    span.op = op.op;
    span.node = op.node;
    span.bytes = op.bytes;
    if (env_->device_clock) {
      span.start_us = times[i].start - origin;
      span.end_us = times[i].end - origin;
    } else {
      span.start_us = absl::ToDoubleMicroseconds(op.host_start - host_origin);
      span.end_us = std::max(
          span.start_us, absl::ToDoubleMicroseconds(op.host_end - host_origin));
    }
    span_of[i] = static_cast<int>(trace.spans.size());
    trace.spans.push_back(std::move(span));
  }
  for (const auto& [from, to] : trace_->flows) {
    if (span_of[from] >= 0 && span_of[to] >= 0) {
      trace.flows.push_back(TraceFlow{span_of[from], span_of[to]});
    }
  }
  return trace;
}

}  // namespace weft::runtime
