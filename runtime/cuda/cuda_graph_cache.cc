#include "runtime/cuda/cuda_graph_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_status.h"
#include "scheduler/status_macros.h"

namespace weft::runtime::cuda {

CudaGraphCache::CudaGraphCache(Hooks hooks, Options options)
    : hooks_(std::move(hooks)), options_(options) {}

CudaGraphCache::~CudaGraphCache() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, entry] : cache_) (void)cudaGraphExecDestroy(entry.exec);
  for (auto& [key, lanes] : lanes_) {
    for (cudaEvent_t event : lanes->events) (void)cudaEventDestroy(event);
  }
  (void)cudaGetLastError();
}

namespace {

// How a graph's nodes go onto capture lanes: each node's lane, and the
// events: 0 forks, 1..lanes-1 join, then one per node another lane waits
// for (node_event, -1 for none).
struct LanePlan {
  std::vector<int> lane_of;
  std::vector<int> node_event;
  int lanes = 1;
  int events = 1;
};

LanePlan PlanLanes(const DeviceGraph& graph, int max_lanes) {
  LanePlan plan;
  const int n = static_cast<int>(graph.nodes.size());
  plan.lane_of = AssignLanes(graph, max_lanes, plan.lanes);
  plan.node_event.assign(n, -1);
  plan.events = plan.lanes;
  for (int i = 0; i < n; ++i) {
    for (int dep : graph.nodes[i].deps) {
      if (plan.lane_of[dep] != plan.lane_of[i] && plan.node_event[dep] < 0) {
        plan.node_event[dep] = plan.events++;
      }
    }
  }
  return plan;
}

}  // namespace

absl::Status CudaGraphCache::EnsureLanes(int device, int depth, int lanes,
                                         int events) {
  std::unique_ptr<DeviceLanes>& slot = lanes_[{device, depth}];
  if (slot == nullptr) slot = std::make_unique<DeviceLanes>();
  DeviceLanes& d = *slot;
  while (static_cast<int>(d.lanes.size()) < lanes) {
    WEFT_ASSIGN_OR_RETURN(StreamHandle lane, hooks_.create_stream(device));
    WEFT_ASSIGN_OR_RETURN(cudaStream_t raw, hooks_.stream(lane));
    d.lanes.push_back(lane);
    d.raw.push_back(raw);
  }
  while (static_cast<int>(d.events.size()) < events) {
    cudaEvent_t event = nullptr;
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    d.events.push_back(event);
  }
  return absl::OkStatus();
}

absl::Status CudaGraphCache::EnsureLanesFor(const DeviceGraph& graph,
                                            int depth) {
  const LanePlan plan = PlanLanes(graph, options_.max_lanes);
  WEFT_RETURN_IF_ERROR(
      EnsureLanes(graph.device, depth, plan.lanes, plan.events));
  for (const DeviceGraphNode& node : graph.nodes) {
    if (node.kind != DeviceGraphNodeKind::kControl || node.control == nullptr) {
      continue;
    }
    for (const DeviceGraph& body : node.control->bodies) {
      WEFT_RETURN_IF_ERROR(EnsureLanesFor(body, depth + 1));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<cudaGraph_t> CudaGraphCache::Capture(
    const DeviceGraph& graph, cudaGraph_t target, const CaptureTail* tail,
    const CaptureControl* control, int depth) {
  const int n = static_cast<int>(graph.nodes.size());
  if (depth == 0) WEFT_RETURN_IF_ERROR(EnsureLanesFor(graph, 0));
  const LanePlan plan = PlanLanes(graph, options_.max_lanes);
  const std::vector<int>& lane_of = plan.lane_of;
  const std::vector<int>& node_event = plan.node_event;
  const int num_lanes = plan.lanes;
  WEFT_RETURN_IF_ERROR(
      EnsureLanes(graph.device, depth, plan.lanes, plan.events));
  const DeviceLanes& d = *lanes_[{graph.device, depth}];
  cudaStream_t origin = d.raw[0];
  if (target == nullptr) {
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaStreamBeginCapture(origin, cudaStreamCaptureModeThreadLocal));
  } else {
    WEFT_CUDA_RETURN_IF_ERROR(cudaStreamBeginCaptureToGraph(
        origin, target, nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal));
  }

  absl::Status status;
  auto check = [&status](absl::Status s) {
    if (status.ok() && !s.ok()) status = std::move(s);
  };
  check(WEFT_CUDA_STATUS(cudaEventRecord(d.events[0], origin)));
  for (int lane = 1; lane < num_lanes; ++lane) {
    check(WEFT_CUDA_STATUS(cudaStreamWaitEvent(d.raw[lane], d.events[0], 0)));
  }
  for (int i = 0; i < n && status.ok(); ++i) {
    const DeviceGraphNode& node = graph.nodes[i];
    cudaStream_t lane = d.raw[lane_of[i]];
    for (int dep : node.deps) {
      if (lane_of[dep] != lane_of[i]) {
        check(WEFT_CUDA_STATUS(
            cudaStreamWaitEvent(lane, d.events[node_event[dep]], 0)));
      }
    }
    switch (node.kind) {
      case DeviceGraphNodeKind::kKernel:
        check(hooks_.launch(node.launch, d.lanes[lane_of[i]]));
        break;
      case DeviceGraphNodeKind::kCopy: {
        void* dst = node.direction == CopyDirection::kDeviceToHost
                        ? node.host_dst
                        : reinterpret_cast<void*>(node.dst.address);
        const void* src = node.direction == CopyDirection::kHostToDevice
                              ? node.host_src
                              : reinterpret_cast<const void*>(node.src.address);
        if (node.bytes > 0) {
          if (node.direction != CopyDirection::kHostToDevice) {
            check(hooks_.check_range(node.src, node.bytes, "copy source"));
          }
          if (node.direction != CopyDirection::kDeviceToHost) {
            check(hooks_.check_range(node.dst, node.bytes, "copy destination"));
          }
        }
        if (node.bytes > 0 && status.ok()) {
          check(WEFT_CUDA_STATUS(
              cudaMemcpyAsync(dst, src, node.bytes, cudaMemcpyDefault, lane)));
        }
        break;
      }
      case DeviceGraphNodeKind::kEventRecord: {
        absl::StatusOr<cudaEvent_t> event = hooks_.event(node.event);
        check(event.status());
        if (event.ok()) {
          check(WEFT_CUDA_STATUS(
              cudaEventRecordWithFlags(*event, lane, cudaEventRecordExternal)));
        }
        break;
      }
      case DeviceGraphNodeKind::kEventWait: {
        absl::StatusOr<cudaEvent_t> event = hooks_.event(node.event);
        check(event.status());
        if (event.ok()) {
          check(WEFT_CUDA_STATUS(
              cudaStreamWaitEvent(lane, *event, cudaEventWaitExternal)));
        }
        break;
      }
      case DeviceGraphNodeKind::kControl: {
        if (control == nullptr || !*control) {
          check(absl::UnimplementedError(
              "control nodes are captured only inside the bodies of a "
              "device loop or case"));
          break;
        }
        // Runs within this capture, under mu_.
        CaptureBody capture_body =
            [this, control, depth](const DeviceGraph& body,
                                   cudaGraph_t body_target,
                                   const CaptureTail& body_tail)
                ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                  return Capture(body, body_target, &body_tail, control,
                                 depth + 1)
                      .status();
                };
        check((*control)(*node.control, lane, capture_body));
        break;
      }
    }
    if (node_event[i] >= 0) {
      check(WEFT_CUDA_STATUS(cudaEventRecord(d.events[node_event[i]], lane)));
    }
  }
  // Join every lane back into the origin, also after a failure, so that
  // ending the capture leaves no stream capturing.
  for (int lane = 1; lane < num_lanes; ++lane) {
    check(WEFT_CUDA_STATUS(cudaEventRecord(d.events[lane], d.raw[lane])));
    check(WEFT_CUDA_STATUS(cudaStreamWaitEvent(origin, d.events[lane], 0)));
  }
  if (tail != nullptr && *tail && status.ok()) check((*tail)(origin));
  cudaGraph_t captured = nullptr;
  check(WEFT_CUDA_STATUS(cudaStreamEndCapture(origin, &captured)));
  if (!status.ok()) {
    // A target belongs to the caller (or to its conditional node).
    if (captured != nullptr && target == nullptr) {
      (void)cudaGraphDestroy(captured);
    }
    (void)cudaGetLastError();
    return absl::Status(status.code(),
                        absl::StrCat("capturing a device graph of device ",
                                     graph.device, ": ", status.message()));
  }
  return captured;
}

absl::StatusOr<cudaGraph_t> CudaGraphCache::CaptureToGraph(
    const DeviceGraph& graph, cudaGraph_t target, const CaptureTail& tail,
    const CaptureControl& control) {
  WEFT_RETURN_IF_ERROR(ValidateDeviceGraph(graph));
  absl::MutexLock lock(&mu_);
  return Capture(graph, target, &tail, &control);
}

absl::StatusOr<CudaGraphCache::Entry*> CudaGraphCache::Find(
    const DeviceGraph& graph, std::string key, std::string parameters) {
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return &it->second;
  }
  WEFT_ASSIGN_OR_RETURN(cudaGraph_t captured, Capture(graph));
  cudaGraphExec_t exec = nullptr;
  const absl::Status made =
      WEFT_CUDA_STATUS(cudaGraphInstantiate(&exec, captured, 0));
  (void)cudaGraphDestroy(captured);
  if (!made.ok()) {
    (void)cudaGetLastError();
    return made;
  }
  ++stats_.instantiations;
  lru_.push_front(key);
  Entry entry;
  entry.exec = exec;
  entry.parameters = std::move(parameters);
  entry.lru = lru_.begin();
  Entry* found =
      &cache_.emplace(std::move(key), std::move(entry)).first->second;
  Trim(found);
  return found;
}

absl::Status CudaGraphCache::Prepare(const DeviceGraph& graph) {
  WEFT_RETURN_IF_ERROR(ValidateDeviceGraph(graph));
  std::string key = DeviceGraphSignature(graph);
  absl::MutexLock lock(&mu_);
  return Find(graph, std::move(key), DeviceGraphParameters(graph)).status();
}

absl::Status CudaGraphCache::Launch(const DeviceGraph& graph,
                                    StreamHandle stream) {
  WEFT_RETURN_IF_ERROR(ValidateDeviceGraph(graph));
  WEFT_ASSIGN_OR_RETURN(cudaStream_t raw, hooks_.stream(stream));
  std::string key = DeviceGraphSignature(graph);
  std::string parameters = DeviceGraphParameters(graph);
  absl::MutexLock lock(&mu_);
  WEFT_ASSIGN_OR_RETURN(Entry * entry, Find(graph, std::move(key), parameters));
  if (entry->launched) ++stats_.cache_hits;
  entry->launched = true;
  if (entry->parameters != parameters) {
    WEFT_ASSIGN_OR_RETURN(cudaGraph_t captured, Capture(graph));
    cudaGraphExecUpdateResultInfo info;
    const cudaError_t updated =
        cudaGraphExecUpdate(entry->exec, captured, &info);
    if (updated == cudaSuccess) {
      ++stats_.updates;
    } else {
      // CUDA could not map the new parameters onto the executable (a
      // kernel variant changed, say): instantiate it anew.
      (void)cudaGetLastError();
      cudaGraphExec_t exec = nullptr;
      const absl::Status made =
          WEFT_CUDA_STATUS(cudaGraphInstantiate(&exec, captured, 0));
      if (!made.ok()) {
        (void)cudaGraphDestroy(captured);
        (void)cudaGetLastError();
        return made;
      }
      (void)cudaGraphExecDestroy(entry->exec);
      entry->exec = exec;
      ++stats_.instantiations;
    }
    (void)cudaGraphDestroy(captured);
    entry->parameters = std::move(parameters);
  }
  return WEFT_CUDA_STATUS(cudaGraphLaunch(entry->exec, raw));
}

void CudaGraphCache::Trim(const Entry* keep) {
  const size_t bound =
      static_cast<size_t>(std::max(1, options_.max_cached_graphs));
  while (cache_.size() > bound) {
    auto it = cache_.find(lru_.back());
    if (&it->second == keep) break;  // the bound is at least 1
    // Launches in flight finish first: CUDA frees the executable after.
    (void)cudaGraphExecDestroy(it->second.exec);
    cache_.erase(it);
    lru_.pop_back();
    ++stats_.evictions;
  }
}

CudaGraphCacheStats CudaGraphCache::stats() const {
  absl::MutexLock lock(&mu_);
  CudaGraphCacheStats stats = stats_;
  stats.cached = static_cast<int>(cache_.size());
  return stats;
}

}  // namespace weft::runtime::cuda
