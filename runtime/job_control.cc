// Job's control nodes (job.h, control_run.h) driven from the host:
// loops and case..of run through nested jobs, and the nested jobs' own
// side (fetching the condition, parking between iterations). Control
// nodes the device decides are in job_device_control.cc.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/device_graph.h"
#include "runtime/job.h"
#include "runtime/kernel_launch_builder.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

using scheduler::BufferId;
using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::NodeId;
using scheduler::PlannedNode;

// ---- Nested jobs between iterations.

void Job::Rerun() {
  if (phase_ != Phase::kParked) return;
  phase_ = Phase::kIssuing;
  reported_ = false;
  next_ = 0;
  issued_ahead_.clear();
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

// ---- Control nodes.

absl::Status Job::EnqueueControl(int index, int device, StreamHandle stream) {
  const scheduler::NodeSpec& node = graph_->node(plan_->nodes[index].node);
  if (control_mode_ != ControlMode::kHost) {
    absl::Status on_device = EnqueueDeviceControl(index, device, stream);
    if (on_device.ok() || control_mode_ == ControlMode::kDevice ||
        on_device.code() != absl::StatusCode::kFailedPrecondition) {
      return on_device;
    }
    // kAuto: the host runs what the device cannot.
  }
  // The host decides; bodies that can run as device graphs do, and
  // others run as nested jobs.
  absl::Status as_graphs = EnqueueGraphControl(index, device, stream);
  if (as_graphs.code() != absl::StatusCode::kFailedPrecondition) {
    return as_graphs;
  }
  // The condition's value in host memory, once the node's predecessors
  // are done; the run starts from the callback behind it.
  WEFT_RETURN_IF_ERROR(buffers_->MakeCurrent(node.control->condition,
                                             buffers_->host(), device, stream));
  const uint64_t id = id_;
  const auto* post = &env_->post_completion;
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
  const auto graph_control = graph_controls_.find(index);
  const bool as_graphs = graph_control != graph_controls_.end();
  hooks.start_body = [this, index, as_graphs](int body) {
    return as_graphs ? StartGraphBody(index, body) : StartBody(index, body);
  };
  hooks.cancel_body = [post = env_->post](uint64_t job, absl::Status reason) {
    post(job,
         [reason = std::move(reason)](Job& nested) { nested.Cancel(reason); });
  };
  if (as_graphs && graph_control->second.relay != nullptr) {
    hooks.interrupt = [relay = graph_control->second.relay] { relay->Stop(); };
  }
  if (as_graphs) {
    hooks.condition = [value = graph_control->second.condition_value.get()] {
      return static_cast<const char*>(value);
    };
  } else {
    hooks.condition = [this, condition] {
      return static_cast<const char*>(buffers_->HostData(condition));
    };
  }
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

void Job::OnBodyDone(int index, absl::Status status, int64_t relayed) {
  if (auto g = graph_controls_.find(index); g != graph_controls_.end()) {
    GraphControl& control = g->second;
    tracer_->SpanCompleted(control.open_span);
    control.open_span = -1;
    // The iterations the relay began and marked, one span each.
    if (control.relay != nullptr && relayed > 0 && callbacks_.on_trace) {
      const std::vector<EventHandle> marked = control.relay->RecordedMarkers();
      const NodeId v = plan_->nodes[index].node;
      const scheduler::NodeSpec& node = graph_->node(v);
      const int d = control.bodies.device;
      for (size_t k = 0; k + 1 < marked.size(); k += 2) {
        const std::string name =
            absl::StrCat(node.name, ": iteration ",
                         control.launches + 1 + static_cast<int64_t>(k / 2));
        tracer_->AddSpan(
            TracedWork{SpanKind::kIteration, TraceTrackKind::kStream, d, name,
                       node.op, v},
            control.bodies.body_stream, marked[k], marked[k + 1]);
      }
    }
    control.launches += relayed;
  }
  auto it = controls_.find(index);
  if (it != controls_.end()) {
    it->second->OnBodyDone(std::move(status), relayed);
  }
}

void Job::OnLoopProgress(int index, int64_t iteration) {
  auto it = controls_.find(index);
  if (it != controls_.end()) it->second->Progress(iteration);
}

void Job::ControlFinished(int index, absl::Status status) {
  controls_.erase(index);
  status = EndGraphControl(index, std::move(status));
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

bool Job::IssueAhead(int& issued) {
  const int n = plan_->num_nodes();
  if (plan_index_.empty()) {
    plan_index_.assign(graph_->num_nodes(), -1);
    for (int i = 0; i < n; ++i) plan_index_[plan_->nodes[i].node] = i;
  }
  // What the unissued nodes before position j hold: their streams and
  // the events they signal.
  absl::flat_hash_set<int> held_streams;
  absl::flat_hash_set<int> held_events;
  auto unissued = [&](NodeId v) {
    const int i = plan_index_[v];
    return i >= static_cast<int>(next_) && !issued_ahead_.contains(i);
  };
  auto hold = [&](int i) {
    const PlannedNode& pn = plan_->nodes[i];
    held_streams.insert(pn.stream);
    if (pn.peer_stream >= 0) held_streams.insert(pn.peer_stream);
    if (pn.signal_event >= 0) held_events.insert(pn.signal_event);
  };
  const int first = static_cast<int>(next_);
  hold(first);
  for (int j = first + 1; j < n && j <= first + kIssueAhead; ++j) {
    if (in_flight_ >= env_->window || issued >= env_->issue_batch) break;
    if (issued_ahead_.contains(j)) continue;
    const PlannedNode& pn = plan_->nodes[j];
    bool free = !held_streams.contains(pn.stream) &&
                (pn.peer_stream < 0 || !held_streams.contains(pn.peer_stream));
    for (int32_t e : plan_->Waits(j)) free = free && !held_events.contains(e);
    for (NodeId dep : plan_->Deps(j)) {
      free = free && !unissued(dep) && !running_controls_.contains(dep);
    }
    if (!free) {
      hold(j);
      continue;
    }
    absl::Status s = IssueNode(j);
    issued_ahead_.insert(j);
    if (!s.ok()) {
      if (callbacks_.on_node) {
        callbacks_.on_node(pn.node, NodeEventKind::kFailed, s);
      }
      Fail(std::move(s), pn.node);
      return false;
    }
    ++issued;
  }
  return true;
}

absl::Status Job::FetchForEnclosing() {
  const BufferId b = nested_.fetch;
  if (b < 0) return absl::OkStatus();
  const BufferCoherence::Latest latest = buffers_->latest(b);
  if (latest.where < 0 || latest.where == buffers_->host()) {
    return absl::OkStatus();
  }
  // After the body's last write of it.
  WEFT_ASSIGN_OR_RETURN(const StreamHandle stream,
                        OwnStreamAfter(latest.writer, latest.where));
  return buffers_->MakeCurrent(b, buffers_->host(), latest.where, stream);
}

absl::StatusOr<StreamHandle> Job::OwnStreamAfter(StreamHandle writer,
                                                 int device) {
  if (streams_.DeviceOf(writer) >= 0) {
    WEFT_RETURN_IF_ERROR(streams_.Enter(writer));
    return writer;
  }
  // Written by a job nested in this one, on a stream this job does not
  // hold and so would not drain: one of this job's streams of that
  // device, after it.
  WEFT_ASSIGN_OR_RETURN(const StreamHandle stream, streams_.Acquire(device));
  WEFT_RETURN_IF_ERROR(streams_.Enter(writer));
  WEFT_RETURN_IF_ERROR(streams_.Enter(stream));
  WEFT_RETURN_IF_ERROR(OrderAfter(writer, device, stream));
  return stream;
}

}  // namespace weft::runtime
