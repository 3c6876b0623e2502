#include "runtime/stream_graph_runner.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

StreamGraphRunner::StreamGraphRunner(Backend* backend, Options options)
    : backend_(backend), options_(options) {}

absl::Status StreamGraphRunner::Launch(const DeviceGraph& graph,
                                       StreamHandle stream, int stream_device,
                                       uint64_t scope) {
  if (stream_device != graph.device) {
    return absl::InvalidArgumentError(
        absl::StrCat("a graph of device ", graph.device,
                     " cannot launch on a stream of device ", stream_device));
  }
  WEFT_RETURN_IF_ERROR(ValidateDeviceGraph(graph));
  absl::MutexLock lock(&mu_);
  key_.clear();
  AppendDeviceGraphSignature(graph, key_);
  WEFT_ASSIGN_OR_RETURN(Instance * instance, Find(graph, key_));
  // The first launch of an instance is not a hit, prepared or not.
  if (instance->launched) ++stats_.cache_hits;
  instance->launched = true;
  scopes_.insert(scope);
  return Enqueue(*instance, graph, stream, scope);
}

absl::Status StreamGraphRunner::Prepare(const DeviceGraph& graph) {
  WEFT_RETURN_IF_ERROR(ValidateDeviceGraph(graph));
  absl::MutexLock lock(&mu_);
  key_.clear();
  AppendDeviceGraphSignature(graph, key_);
  if (cache_.contains(key_)) return absl::OkStatus();
  return Find(graph, key_).status();
}

absl::StatusOr<StreamGraphRunner::Instance*> StreamGraphRunner::Find(
    const DeviceGraph& graph, const std::string& key) {
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Instance> instance,
                          Instantiate(graph));
    ++stats_.instantiations;
    lru_.push_front(key);
    instance->lru = lru_.begin();
    it = cache_.emplace(key, std::move(instance)).first;
    Instance* found = it->second.get();
    Trim();
    return found;
  }
  lru_.splice(lru_.begin(), lru_, it->second->lru);
  return it->second.get();
}

absl::StatusOr<std::unique_ptr<StreamGraphRunner::Instance>>
StreamGraphRunner::Instantiate(const DeviceGraph& graph) {
  if (graph.HasControl() && !options_.launch_control) {
    return absl::UnimplementedError(
        "control nodes in device graphs are not supported here");
  }
  auto instance = std::make_unique<Instance>();
  instance->device = graph.device;
  const int n = static_cast<int>(graph.nodes.size());
  instance->node_done.assign(n, EventHandle{});
  instance->control_streams.assign(n, StreamHandle{});
  int num_lanes = 1;
  instance->lane_of = AssignLanes(graph, options_.max_lanes, num_lanes);
  // Streams and events; on failure, give back what was made.
  absl::Status status;
  auto make_event = [&](EventHandle& event) {
    if (!status.ok()) return;
    absl::StatusOr<EventHandle> made = backend_->CreateEvent(graph.device);
    if (made.ok()) {
      event = *made;
    } else {
      status = made.status();
    }
  };
  instance->direct = num_lanes == 1;
  for (int lane = 0; lane < num_lanes && status.ok() && !instance->direct;
       ++lane) {
    absl::StatusOr<StreamHandle> made = backend_->CreateStream(graph.device);
    if (made.ok()) {
      instance->lanes.push_back(*made);
    } else {
      status = made.status();
    }
  }
  if (!instance->direct) make_event(instance->entry);
  instance->lane_end.assign(instance->direct ? 1 : instance->lanes.size(),
                            EventHandle{});
  for (EventHandle& event : instance->lane_end) make_event(event);
  for (int i = 0; i < n; ++i) {
    for (int dep : graph.nodes[i].deps) {
      if (instance->lane_of[dep] != instance->lane_of[i] &&
          instance->node_done[dep].value == 0) {
        make_event(instance->node_done[dep]);
      }
    }
    if (graph.nodes[i].kind == DeviceGraphNodeKind::kControl && status.ok()) {
      absl::StatusOr<StreamHandle> made = backend_->CreateStream(graph.device);
      if (made.ok()) {
        instance->control_streams[i] = *made;
      } else {
        status = made.status();
      }
    }
  }
  if (options_.launch_kernels) {
    instance->chains = true;
    for (int i = 0; i < n && instance->chains; ++i) {
      instance->chains = graph.nodes[i].kind == DeviceGraphNodeKind::kKernel &&
                         instance->node_done[i].value == 0;
    }
  }
  if (status.ok()) status = PrepareBodies(graph);
  if (!status.ok()) {
    Destroy(*instance);
    return status;
  }
  return instance;
}

absl::Status StreamGraphRunner::PrepareBodies(const DeviceGraph& graph) {
  for (const DeviceGraphNode& node : graph.nodes) {
    if (node.kind != DeviceGraphNodeKind::kControl) continue;
    for (const DeviceGraph& body : node.control->bodies) {
      if (body.nodes.empty()) continue;
      std::string key = DeviceGraphSignature(body);
      if (cache_.contains(key)) continue;
      WEFT_RETURN_IF_ERROR(Find(body, key).status());
    }
  }
  return absl::OkStatus();
}

absl::Status StreamGraphRunner::Enqueue(Instance& instance,
                                        const DeviceGraph& graph,
                                        StreamHandle stream, uint64_t scope) {
  if (instance.direct) {
    // After the previous launch of the instance (a no-op before the
    // first; the stream's own order when it went there too), then the end
    // of this one.
    if (!(instance.last_stream == stream)) {
      WEFT_RETURN_IF_ERROR(
          backend_->StreamWaitEvent(stream, instance.lane_end[0]));
      instance.last_stream = stream;
    }
    absl::Status status = EnqueueNodes(instance, graph, stream, scope);
    absl::Status ended = backend_->RecordEvent(instance.lane_end[0], stream);
    return status.ok() ? ended : status;
  }
  absl::Status status = EnqueueNodes(instance, graph, stream, scope);
  // The caller's stream waits for every lane, also when a call above failed
  // part way: what did reach the lanes may still be running, and the caller
  // (a failed job draining its streams, then reusing its memory) must not
  // get ahead of it.
  for (size_t lane = 0; lane < instance.lanes.size(); ++lane) {
    absl::Status joined =
        backend_->RecordEvent(instance.lane_end[lane], instance.lanes[lane]);
    if (joined.ok()) {
      joined = backend_->StreamWaitEvent(stream, instance.lane_end[lane]);
    }
    if (status.ok()) status = std::move(joined);
  }
  return status;
}

absl::Status StreamGraphRunner::EnqueueNodes(const Instance& instance,
                                             const DeviceGraph& graph,
                                             StreamHandle stream,
                                             uint64_t scope) {
  if (!instance.direct) {
    WEFT_RETURN_IF_ERROR(backend_->RecordEvent(instance.entry, stream));
    for (StreamHandle lane : instance.lanes) {
      WEFT_RETURN_IF_ERROR(backend_->SetErrorScope(lane, scope));
      WEFT_RETURN_IF_ERROR(backend_->StreamWaitEvent(lane, instance.entry));
    }
  }
  if (instance.chains) {
    // No node waits for another lane: each lane's kernels are one chain.
    chain_launches_.clear();
    for (const DeviceGraphNode& node : graph.nodes) {
      chain_launches_.push_back(&node.launch);
    }
    chain_streams_.clear();
    if (instance.direct) {
      chain_streams_.push_back(stream);
    } else {
      chain_streams_.assign(instance.lanes.begin(), instance.lanes.end());
    }
    return options_.launch_kernels(chain_launches_, instance.lane_of,
                                   chain_streams_);
  }
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const DeviceGraphNode& node = graph.nodes[i];
    const int lane_index = instance.lane_of[i];
    const StreamHandle lane =
        instance.direct ? stream : instance.lanes[lane_index];
    for (int dep : node.deps) {
      if (instance.lane_of[dep] != lane_index) {
        WEFT_RETURN_IF_ERROR(
            backend_->StreamWaitEvent(lane, instance.node_done[dep]));
      }
    }
    switch (node.kind) {
      case DeviceGraphNodeKind::kKernel:
        WEFT_RETURN_IF_ERROR(backend_->Launch(node.launch, lane));
        break;
      case DeviceGraphNodeKind::kCopy:
        switch (node.direction) {
          case CopyDirection::kHostToDevice:
            WEFT_RETURN_IF_ERROR(backend_->CopyHostToDevice(
                node.dst, node.host_src, node.bytes, lane));
            break;
          case CopyDirection::kDeviceToHost:
            WEFT_RETURN_IF_ERROR(backend_->CopyDeviceToHost(
                node.host_dst, node.src, node.bytes, lane));
            break;
          case CopyDirection::kDeviceToDevice:
            WEFT_RETURN_IF_ERROR(backend_->CopyDeviceToDevice(
                node.dst, node.src, node.bytes, lane));
            break;
        }
        break;
      case DeviceGraphNodeKind::kEventRecord:
        WEFT_RETURN_IF_ERROR(backend_->RecordEvent(node.event, lane));
        break;
      case DeviceGraphNodeKind::kEventWait:
        WEFT_RETURN_IF_ERROR(backend_->StreamWaitEvent(lane, node.event));
        break;
      case DeviceGraphNodeKind::kControl:
        WEFT_RETURN_IF_ERROR(options_.launch_control(
            *node.control, lane, instance.control_streams[i], instance.device,
            scope));
        break;
    }
    if (instance.node_done[i].value != 0) {
      WEFT_RETURN_IF_ERROR(backend_->RecordEvent(instance.node_done[i], lane));
    }
  }
  return absl::OkStatus();
}

void StreamGraphRunner::Trim() {
  const size_t bound =
      static_cast<size_t>(std::max(1, options_.max_cached_graphs));
  // From the least recently used up to, not including, the most recent
  // (the instance just made, which its caller is about to use).
  auto it = lru_.end();
  while (cache_.size() > bound && std::prev(it) != lru_.begin()) {
    --it;
    Instance& instance = *cache_.at(*it);
    bool idle = true;
    for (EventHandle end : instance.lane_end) {
      absl::StatusOr<bool> done = backend_->QueryEvent(end);
      // An end never recorded (not launched yet) counts as idle.
      if (done.ok() && !*done) idle = false;
    }
    if (!idle) continue;
    Destroy(instance);
    cache_.erase(*it);
    it = lru_.erase(it);
    ++stats_.evictions;
  }
  stats_.cached = static_cast<int>(cache_.size());
}

void StreamGraphRunner::Destroy(Instance& instance) {
  // Destroying a lane drops what it remembers of every scope.
  for (StreamHandle lane : instance.lanes) {
    backend_->DestroyStream(lane).IgnoreError();
  }
  for (StreamHandle stream : instance.control_streams) {
    if (stream.value != 0) backend_->DestroyStream(stream).IgnoreError();
  }
  auto destroy = [&](EventHandle event) {
    if (event.value != 0) backend_->DestroyEvent(event).IgnoreError();
  };
  destroy(instance.entry);
  for (EventHandle event : instance.lane_end) destroy(event);
  for (EventHandle event : instance.node_done) destroy(event);
}

std::vector<StreamHandle> StreamGraphRunner::ScopeLanes(uint64_t scope) const {
  absl::MutexLock lock(&mu_);
  std::vector<StreamHandle> lanes;
  if (!scopes_.contains(scope)) return lanes;
  for (const auto& [key, instance] : cache_) {
    lanes.insert(lanes.end(), instance->lanes.begin(), instance->lanes.end());
    for (StreamHandle stream : instance->control_streams) {
      if (stream.value != 0) lanes.push_back(stream);
    }
  }
  return lanes;
}

void StreamGraphRunner::ForgetScope(uint64_t scope) {
  absl::MutexLock lock(&mu_);
  scopes_.erase(scope);
}

StreamGraphRunner::Stats StreamGraphRunner::stats() const {
  absl::MutexLock lock(&mu_);
  Stats stats = stats_;
  stats.cached = static_cast<int>(cache_.size());
  return stats;
}

}  // namespace weft::runtime
