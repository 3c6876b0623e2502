#include "runtime/job.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/ops/cpu_kernels.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

using scheduler::BufferId;
using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::NodeId;
using scheduler::PlannedNode;

absl::Status ValidatePlan(const scheduler::Graph& graph,
                          const scheduler::Plan& plan, int num_devices) {
  const int n = graph.num_nodes();
  if (static_cast<int>(plan.nodes.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan lists ", plan.nodes.size(), " nodes but graph '",
                     graph.name(), "' has ", n));
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
    const std::string where = absl::StrCat("plan.nodes[", i, "]");
    if (pn.node < 0 || pn.node >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": node id ", pn.node, " is out of range"));
    }
    if (position[pn.node] >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": node '", graph.node(pn.node).name,
                       "' is listed twice"));
    }
    position[pn.node] = i;
    const std::string named =
        absl::StrCat(where, " (node '", graph.node(pn.node).name, "')");
    if (pn.device < 0 || pn.device >= num_devices) {
      return absl::InvalidArgumentError(
          absl::StrCat(named, ": device ", pn.device,
                       " is outside the machine (", num_devices, " devices)"));
    }
    if (pn.stream < 0 || pn.stream >= num_streams) {
      return absl::InvalidArgumentError(absl::StrCat(
          named, ": stream ", pn.stream, " does not exist (", num_streams,
          " streams)"));
    }
    if (plan.streams[pn.stream].device != pn.device) {
      return absl::InvalidArgumentError(absl::StrCat(
          named, ": runs on device ", pn.device, " but its stream ", pn.stream,
          " is on device ", plan.streams[pn.stream].device));
    }
    for (int e : pn.wait_events) {
      if (e < 0 || e >= plan.num_events) {
        return absl::InvalidArgumentError(absl::StrCat(
            named, ": waits on event ", e, " of ", plan.num_events));
      }
    }
    if (pn.signal_event < -1 || pn.signal_event >= plan.num_events) {
      return absl::InvalidArgumentError(absl::StrCat(
          named, ": signals event ", pn.signal_event, " of ", plan.num_events));
    }
  }
  for (int i = 0; i < n; ++i) {
    for (NodeId dep : plan.nodes[i].deps) {
      if (dep < 0 || dep >= n || position[dep] >= i) {
        return absl::InvalidArgumentError(absl::StrCat(
            "plan.nodes[", i, "] (node '", graph.node(plan.nodes[i].node).name,
            "'): dependency ", dep, " is not issued before it"));
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
      num_devices_(env_->backend->device_count()) {
  buffers_.resize(graph_->num_buffers());
  for (BufferState& b : buffers_) b.copies.resize(num_devices_);
  streams_.resize(plan_->streams.size());
  events_.resize(plan_->num_events);
  event_devices_.assign(plan_->num_events, -1);
}

Job::~Job() = default;

void Job::Begin() {
  if (absl::Status s = AllocateBuffers(); !s.ok()) Fail(std::move(s), -1);
  Pump();
}

void Job::Cancel() {
  if (phase_ == Phase::kDone || cancelled_) return;
  cancelled_ = true;
  Fail(absl::CancelledError("job cancelled"), -1);
  Pump();
}

void Job::Fail(absl::Status status, NodeId node) {
  if (!status_.ok()) return;
  status_ = std::move(status);
  failed_node_ = node;
}

void Job::Pump() {
  if (phase_ == Phase::kIssuing) {
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

  for (int e : pn.wait_events) {
    // An event nobody recorded yet is a no-op wait, as in CUDA.
    if (events_[e].value != 0) {
      WEFT_RETURN_IF_ERROR(backend->StreamWaitEvent(stream, events_[e]));
    }
  }
  const std::vector<BufferUse> uses = graph_->BufferUses(pn.node);
  for (const BufferUse& use : uses) {
    WEFT_RETURN_IF_ERROR(MakeCurrent(use.buffer, device, stream));
  }

  KernelLaunch launch;
  launch.op = node.op;
  launch.cost_us = node.cost_us;
  launch.args.reserve(node.args.size());
  for (const scheduler::Arg& arg : node.args) {
    if (const auto* use = std::get_if<BufferUse>(&arg)) {
      const BufferSpec& spec = graph_->buffer(use->buffer);
      launch.args.push_back(DeviceBufferArg{
          buffers_[use->buffer].copies[device].ptr, spec.size_bytes,
          spec.dtype, use->access});
    } else if (const auto* f = std::get_if<float>(&arg)) {
      launch.args.push_back(*f);
    } else if (const auto* d = std::get_if<double>(&arg)) {
      launch.args.push_back(*d);
    } else if (const auto* i = std::get_if<int32_t>(&arg)) {
      launch.args.push_back(*i);
    } else if (const auto* l = std::get_if<int64_t>(&arg)) {
      launch.args.push_back(*l);
    }
  }
  WEFT_RETURN_IF_ERROR(backend->Launch(launch, stream));

  for (const BufferUse& use : uses) {
    if (!scheduler::Writes(use.access)) continue;
    BufferState& state = buffers_[use.buffer];
    state.latest = device;
    for (int d = 0; d < num_devices_; ++d) {
      Copy& copy = state.copies[d];
      copy.current = d == device;
      // From here on the plan orders every later use of this buffer.
      copy.ready_pending = false;
    }
    state.copies[device].writer = stream;
  }

  const uint64_t id = id_;
  auto post = env_->post;
  WEFT_RETURN_IF_ERROR(backend->AddHostCallback(
      stream, [post, id, index](absl::Status status) {
        post(id, [index, status = std::move(status)](Job& job) {
          job.OnNodeDone(index, status);
        });
      }));
  ++in_flight_;
  if (callbacks_.on_node) {
    callbacks_.on_node(pn.node, NodeEventKind::kStarted, absl::OkStatus());
  }
  // Recorded after the callback, so a node's completion is reported before
  // anything waiting on it can complete: progress follows dependencies.
  // The node is in flight now, so a failure here fails the job but leaves
  // the node's own report to its callback.
  if (pn.signal_event >= 0) {
    absl::StatusOr<EventHandle> event = PlanEventFor(pn.signal_event, device);
    absl::Status recorded = event.ok()
                                ? backend->RecordEvent(*event, stream)
                                : event.status();
    if (!recorded.ok()) Fail(std::move(recorded), pn.node);
  }
  return absl::OkStatus();
}

void Job::OnNodeDone(int index, absl::Status status) {
  --in_flight_;
  const PlannedNode& pn = plan_->nodes[index];
  if (status.ok()) {
    if (callbacks_.on_node) {
      callbacks_.on_node(pn.node, NodeEventKind::kFinished, status);
    }
  } else {
    stream_failed_[streams_[pn.stream].value] = true;
    if (callbacks_.on_node) {
      callbacks_.on_node(pn.node, NodeEventKind::kFailed, status);
    }
    Fail(std::move(status), pn.node);
  }
  Pump();
}

void Job::OnFence(StreamHandle stream, absl::Status status) {
  --fences_pending_;
  if (!status.ok()) {
    stream_failed_[stream.value] = true;
    Fail(std::move(status), -1);
  }
  Pump();
}

absl::Status Job::AllocateBuffers() {
  for (const PlannedNode& pn : plan_->nodes) {
    for (const BufferUse& use : graph_->BufferUses(pn.node)) {
      Copy& copy = buffers_[use.buffer].copies[pn.device];
      if (copy.allocated) continue;
      const BufferSpec& spec = graph_->buffer(use.buffer);
      absl::StatusOr<DevicePtr> ptr =
          env_->backend->Allocate(pn.device, spec.size_bytes);
      if (!ptr.ok()) {
        return absl::Status(
            ptr.status().code(),
            absl::StrCat("buffer '", spec.name, "': ", ptr.status().message()));
      }
      copy.ptr = *ptr;
      copy.allocated = true;
    }
  }
  return absl::OkStatus();
}

absl::Status Job::MakeCurrent(BufferId b, int device, StreamHandle stream) {
  BufferState& state = buffers_[b];
  Copy& dst = state.copies[device];
  if (state.latest < 0) return Materialize(b, device, stream);
  if (dst.current) return WaitReady(dst, stream);
  Copy& src = state.copies[state.latest];
  WEFT_RETURN_IF_ERROR(WaitReady(src, stream));
  WEFT_RETURN_IF_ERROR(env_->backend->CopyDeviceToDevice(
      dst.ptr, src.ptr, graph_->buffer(b).size_bytes, stream));
  return MarkTransferred(dst, device, stream);
}

absl::Status Job::Materialize(BufferId b, int device, StreamHandle stream) {
  const BufferSpec& spec = graph_->buffer(b);
  Copy& copy = buffers_[b].copies[device];
  Backend* backend = env_->backend;
  if (spec.init == BufferSpec::Init::kData) {
    staging_.push_back(InitialContents(b));
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
    WEFT_RETURN_IF_ERROR(backend->Launch(fill, stream));
  }
  buffers_[b].latest = device;
  return MarkTransferred(copy, device, stream);
}

absl::Status Job::WaitReady(Copy& copy, StreamHandle stream) {
  if (!copy.ready_pending || copy.ready_stream == stream) {
    return absl::OkStatus();
  }
  return env_->backend->StreamWaitEvent(stream, copy.ready);
}

absl::Status Job::MarkTransferred(Copy& copy, int device,
                                  StreamHandle stream) {
  if (copy.ready.value == 0) {
    WEFT_ASSIGN_OR_RETURN(copy.ready, env_->event_pools[device]->Acquire());
    held_events_.emplace_back(copy.ready, device);
  }
  WEFT_RETURN_IF_ERROR(env_->backend->RecordEvent(copy.ready, stream));
  copy.ready_pending = true;
  copy.ready_stream = stream;
  copy.current = true;
  copy.writer = stream;
  return absl::OkStatus();
}

absl::StatusOr<StreamHandle> Job::StreamFor(int logical) {
  if (streams_[logical].value != 0) return streams_[logical];
  const int device = plan_->streams[logical].device;
  WEFT_ASSIGN_OR_RETURN(StreamHandle stream,
                        env_->stream_pools[device]->Acquire());
  acquired_streams_.emplace_back(stream, device);
  if (stream_failed_.emplace(stream.value, false).second) {
    used_streams_.push_back(stream);
  }
  streams_[logical] = stream;
  return stream;
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
    auto host = std::make_unique<std::string>(spec.size_bytes, '\0');
    const Copy& copy = state.copies[state.latest];
    // FIFO after the last write of the latest version.
    WEFT_RETURN_IF_ERROR(env_->backend->CopyDeviceToHost(
        host->data(), copy.ptr, spec.size_bytes, copy.writer));
    outputs_.emplace_back(spec.name, std::move(host));
  }
  return absl::OkStatus();
}

void Job::StartDraining() {
  phase_ = Phase::kDraining;
  const uint64_t id = id_;
  auto post = env_->post;
  for (StreamHandle stream : used_streams_) {
    absl::Status s = env_->backend->AddHostCallback(
        stream, [post, id, stream](absl::Status status) {
          post(id, [stream, status = std::move(status)](Job& job) {
            job.OnFence(stream, status);
          });
        });
    if (s.ok()) {
      ++fences_pending_;
    } else {
      stream_failed_[stream.value] = true;
      Fail(std::move(s), -1);
    }
  }
}

void Job::Finish() {
  phase_ = Phase::kDone;
  Backend* backend = env_->backend;
  for (BufferState& state : buffers_) {
    for (Copy& copy : state.copies) {
      if (copy.allocated) backend->Free(copy.ptr).IgnoreError();
      copy.allocated = false;
    }
  }
  for (const auto& [event, device] : held_events_) {
    env_->event_pools[device]->Release(event);
  }
  held_events_.clear();
  for (const auto& [stream, device] : acquired_streams_) {
    env_->stream_pools[device]->Release(stream, !stream_failed_[stream.value]);
  }
  acquired_streams_.clear();
  staging_.clear();

  HostBuffers outputs;
  if (status_.ok()) {
    for (auto& [name, data] : outputs_) outputs[name] = std::move(*data);
  }
  outputs_.clear();
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

}  // namespace weft::runtime
