// CUDA graphs for device graphs (runtime/device_graph.h): the CUDA
// backend's Backend::LaunchDeviceGraph.
//
// A device graph becomes a CUDA graph by stream capture: its nodes are
// enqueued, in order, on capture streams of its device ("lanes": a chain of
// dependent nodes stays on one lane, other nodes open new lanes up to a
// cap, edges between lanes become captured event waits). Kernels go through
// the backend's own Launch, so a graph runs exactly the kernels (and the
// stream-ordered scratch memory of reduce_sum and dot) that the stream path
// runs; device copies are captured cudaMemcpyAsync (cudaMemcpyDefault, so
// peer copies work under unified addressing); event nodes are external
// event records and waits (cudaEventRecordExternal /
// cudaEventWaitExternal).
//
// The captured graph is instantiated once and cached by
// DeviceGraphSignature, least recently used out beyond a bound. A launch
// with the same signature reuses the executable graph: when its parameters
// (addresses, scalars, durations, events) equal those of the previous
// launch it is launched as is; otherwise the graph is captured again and
// the executable updated in place (cudaGraphExecUpdate; launches already
// enqueued keep their parameters), and only if CUDA refuses the update is
// it instantiated anew. Every CUDA error becomes a Status through
// cuda_status.h. Control nodes (loops and cases nested in a device loop's
// or case's bodies) are captured through the caller's CaptureControl.
//
// One executable per signature: CUDA orders each launch of an executable
// graph after its previous launches, on whatever stream, so launches of
// the same structure (two jobs of the same shape on different streams)
// run one after the other on the device, never concurrently.
//
// Thread-safe (one mutex; captures are serialized).
#ifndef WEFT_RUNTIME_CUDA_CUDA_GRAPH_CACHE_H_
#define WEFT_RUNTIME_CUDA_CUDA_GRAPH_CACHE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/backend.h"
#include "runtime/device_graph.h"

namespace weft::runtime::cuda {

struct CudaGraphCacheStats {
  uint64_t instantiations = 0;  // captures instantiated (misses)
  uint64_t cache_hits = 0;      // later launches of a cached executable
  uint64_t updates = 0;         // hits with new parameters, updated in place
  uint64_t evictions = 0;
  int cached = 0;
};

class CudaGraphCache {
 public:
  // What the cache needs from its backend.
  struct Hooks {
    // The CUDA stream and event behind backend handles.
    std::function<absl::StatusOr<cudaStream_t>(StreamHandle)> stream;
    std::function<absl::StatusOr<cudaEvent_t>(EventHandle)> event;
    // A new backend stream of `device` (the cache keeps it as a lane).
    std::function<absl::StatusOr<StreamHandle>(int device)> create_stream;
    // The backend's Launch, onto a capturing lane.
    std::function<absl::Status(const KernelLaunch&, StreamHandle)> launch;
    // OK when [ptr, ptr + bytes) lies inside one live allocation of
    // ptr.device; `what` names the range in the error. Copy nodes are
    // checked with it, as the backend's own copies are (a stray copy would
    // fault the whole device, not just its job).
    std::function<absl::Status(DevicePtr ptr, uint64_t bytes,
                               absl::string_view what)>
        check_range;
  };
  struct Options {
    int max_cached_graphs = 256;
    int max_lanes = 8;  // per device
  };

  CudaGraphCache(Hooks hooks, Options options);
  // Destroys the executable graphs (launches in flight complete first, as
  // cudaGraphExecDestroy allows) and the cache's own events. The lanes are
  // backend streams; the backend destroys them.
  ~CudaGraphCache();
  CudaGraphCache(const CudaGraphCache&) = delete;
  CudaGraphCache& operator=(const CudaGraphCache&) = delete;

  // Enqueues `graph` on `stream` (a stream of the graph's device, which
  // must be current on the calling thread). REQUIRES: every kernel op
  // passes Supports().
  absl::Status Launch(const DeviceGraph& graph, StreamHandle stream)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Captures and instantiates `graph` on a miss; enqueues nothing.
  absl::Status Prepare(const DeviceGraph& graph) ABSL_LOCKS_EXCLUDED(mu_);

  CudaGraphCacheStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

  // Enqueued on the capturing origin lane after every node of a graph
  // (all lanes joined), so that its work depends on the whole graph.
  using CaptureTail = std::function<absl::Status(cudaStream_t origin)>;
  // Captures a body of a control node into `target` (a body graph of its
  // conditional node), then `tail`, on lanes of its own.
  using CaptureBody = std::function<absl::Status(
      const DeviceGraph& body, cudaGraph_t target, const CaptureTail& tail)>;
  // Captures a control node (DeviceGraphNodeKind::kControl) onto `lane`, a
  // lane of the capture in progress: what decides it and its conditional
  // node go into the graph being captured (cudaStreamGetCaptureInfo,
  // cudaStreamUpdateCaptureDependencies), its bodies through
  // `capture_body`. Runs on the capturing thread, within CaptureToGraph.
  using CaptureControl = std::function<absl::Status(
      const DeviceGraphControl& control, cudaStream_t lane,
      const CaptureBody& capture_body)>;
  // Captures `graph` (validated) into `target`, an existing CUDA graph
  // such as the body of a conditional node (cudaStreamBeginCaptureToGraph),
  // or into a new graph when `target` is null, then runs `tail` (when set)
  // on the origin lane. Control nodes in it, to any depth, go through
  // `control`; without one they fail the capture (UNIMPLEMENTED). Returns
  // the graph captured into: `target`, or a new graph the caller owns.
  // Caches nothing; for graphs that live inside other graphs (device loops
  // and cases, cuda_device_control.h).
  absl::StatusOr<cudaGraph_t> CaptureToGraph(
      const DeviceGraph& graph, cudaGraph_t target, const CaptureTail& tail,
      const CaptureControl& control = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    cudaGraphExec_t exec = nullptr;
    std::string parameters;  // the executable's current ones
    std::list<std::string>::iterator lru;
    bool launched = false;
  };
  struct DeviceLanes {
    std::vector<StreamHandle> lanes;
    std::vector<cudaStream_t> raw;
    std::vector<cudaEvent_t> events;  // fork/join/edge events, reused
  };

  // The entry for `key`, captured and instantiated from `graph` on a miss.
  absl::StatusOr<Entry*> Find(const DeviceGraph& graph, std::string key,
                              std::string parameters)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Captures `graph` into a new CUDA graph, or into `target` when set,
  // followed by `tail` when set, on the lanes of nesting depth `depth`
  // (a control node's bodies are captured while its graph is, on lanes of
  // the next depth).
  absl::StatusOr<cudaGraph_t> Capture(const DeviceGraph& graph,
                                      cudaGraph_t target = nullptr,
                                      const CaptureTail* tail = nullptr,
                                      const CaptureControl* control = nullptr,
                                      int depth = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status EnsureLanes(int device, int depth, int lanes, int events)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // EnsureLanes for `graph` at `depth` and its control nodes' bodies
  // below, before a capture begins (streams and events are not created
  // while one is in progress).
  absl::Status EnsureLanesFor(const DeviceGraph& graph, int depth)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts least recently used entries beyond the bound, never `keep`.
  void Trim(const Entry* keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const Hooks hooks_;
  const Options options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> cache_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);  // most recent first
  // By device and nesting depth.
  absl::flat_hash_map<std::pair<int, int>, std::unique_ptr<DeviceLanes>> lanes_
      ABSL_GUARDED_BY(mu_);
  CudaGraphCacheStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_CUDA_GRAPH_CACHE_H_
