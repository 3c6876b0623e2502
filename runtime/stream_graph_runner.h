// Runs DeviceGraphs (device_graph.h) on any Backend by lowering them onto
// streams: the simulator's implementation of Backend::LaunchDeviceGraph.
//
// Instantiation assigns the graph's nodes to "lanes", streams of the
// graph's device that the instance owns: a node goes onto the lane its
// first dependency ended, so chains stay on one lane, and nodes without
// such a dependency open a new lane, up to a cap (beyond it they share the
// least recently started lane, which only adds order). Edges between lanes
// become event waits. A launch records an entry event on the caller's
// stream that every lane waits for, enqueues the nodes in order, and has
// the caller's stream wait for every lane's end, so the launch behaves as
// one piece of work on that stream. A graph that is one chain (one lane)
// needs no lanes: its nodes go straight onto the caller's stream, after
// an event that ends the instance's previous launch. The work runs with the
// backend's own launches and copies, so its timing (kernel occupancy, copy
// engines) is the backend's as if the nodes had been issued one by one.
//
// Instances are cached by DeviceGraphSignature, least recently used first
// out beyond a bound (only idle instances are evicted). Launches of one
// instance are serialized on its lanes, as launches of one CUDA graph
// executable are. Lanes take the caller's error scope for the launch, so a
// failure reaches that scope's later work on the caller's stream (see
// ScopeLanes for aborting and releasing scopes on the lanes).
//
// Thread-safe. Must not be called from the backend's host callbacks
// (evicting an instance destroys its streams).
#ifndef WEFT_RUNTIME_STREAM_GRAPH_RUNNER_H_
#define WEFT_RUNTIME_STREAM_GRAPH_RUNNER_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "runtime/backend.h"
#include "runtime/device_graph.h"

namespace weft::runtime {

class StreamGraphRunner {
 public:
  // Starts a control node (DeviceGraphControl) on `stream` (its lane),
  // with `body_stream` (a stream of the instance's, for that node alone)
  // for its bodies, in error scope `scope`; work enqueued on `stream`
  // afterwards waits for it. The bodies' instances are prepared already:
  // it may launch them from a backend worker, never from within this call.
  using ControlLauncher = std::function<absl::Status(
      const DeviceGraphControl& control, StreamHandle stream,
      StreamHandle body_stream, int device, uint64_t scope)>;

  // Enqueues kernels as chains, one stream item per chain: `launches` in
  // order, launch i part of chain `chain_of[i]`, chain c on `streams[c]`;
  // each kernel starts when the one before it in its chain ends. Enqueues
  // nothing when it fails.
  using ChainLauncher = std::function<absl::Status(
      absl::Span<const KernelLaunch* const> launches,
      absl::Span<const int> chain_of, absl::Span<const StreamHandle> streams)>;

  struct Options {
    // Each lane is a stream of the graph's device.
    int max_cached_graphs = 32;
    int max_lanes = 8;  // per instance
    // Null: graphs with control nodes fail to instantiate (UNIMPLEMENTED).
    ControlLauncher launch_control;
    // Null: every kernel is launched by itself (Backend::Launch). Set: a
    // graph of kernels alone whose lanes never wait on each other goes
    // onto them as one chain per lane.
    ChainLauncher launch_kernels;
  };
  struct Stats {
    uint64_t instantiations = 0;
    uint64_t cache_hits = 0;
    uint64_t evictions = 0;
    int cached = 0;
  };

  // `backend` is not owned and outlives the runner. The runner does not
  // destroy its streams and events when it is destroyed: the backend's own
  // teardown does.
  StreamGraphRunner(Backend* backend, Options options);
  StreamGraphRunner(const StreamGraphRunner&) = delete;
  StreamGraphRunner& operator=(const StreamGraphRunner&) = delete;

  // Enqueues `graph` after the work on `stream` (a stream of the graph's
  // device); work enqueued on `stream` afterwards waits for all of it.
  // `scope` is the error scope the work runs in. Errors of the enqueueing
  // calls are returned (INVALID_ARGUMENT for a graph that fails
  // ValidateDeviceGraph or a stream of another device); work that reached
  // the lanes before such an error still holds back `stream`'s later work.
  absl::Status Launch(const DeviceGraph& graph, StreamHandle stream,
                      int stream_device, uint64_t scope)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Instantiates `graph` (cached) without enqueueing anything.
  absl::Status Prepare(const DeviceGraph& graph) ABSL_LOCKS_EXCLUDED(mu_);

  // Every lane of every instance when `scope` launched here (and has not
  // been forgotten), else nothing: where a backend extends
  // AbortErrorScope and ReleaseErrorScope to the lanes. The caller calls
  // its own stream functions on them, not the Backend methods that would
  // come back here.
  std::vector<StreamHandle> ScopeLanes(uint64_t scope) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void ForgetScope(uint64_t scope) ABSL_LOCKS_EXCLUDED(mu_);

  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Instance {
    int device = 0;
    // One lane: the nodes go straight onto the caller's stream (no lane
    // streams, no entry event), after the instance's previous launch.
    bool direct = false;
    std::vector<StreamHandle> lanes;     // none when direct
    std::vector<int> lane_of;            // by node
    std::vector<EventHandle> node_done;  // by node; 0 when no lane waits
    EventHandle entry;
    std::vector<EventHandle> lane_end;  // by lane; direct: the one end
    // By node: the body stream of a control node, else 0.
    std::vector<StreamHandle> control_streams;
    std::list<std::string>::iterator lru;
    bool launched = false;
    // Direct: the stream of the last launch, which orders the next one
    // there without an event wait.
    StreamHandle last_stream;
    // Launched as chains (Options::launch_kernels): kernels alone, and no
    // node waits for another lane.
    bool chains = false;
  };

  // The cached instance of `graph` (signature `key`), instantiated on a
  // miss.
  absl::StatusOr<Instance*> Find(const DeviceGraph& graph,
                                 const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::unique_ptr<Instance>> Instantiate(
      const DeviceGraph& graph) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Instantiates the bodies of `graph`'s control nodes, to any depth.
  absl::Status PrepareBodies(const DeviceGraph& graph)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Enqueues the launch, then has `stream` wait for every lane (also when
  // enqueueing failed part way).
  absl::Status Enqueue(Instance& instance, const DeviceGraph& graph,
                       StreamHandle stream, uint64_t scope)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The entry and the nodes; stops at the first error.
  absl::Status EnqueueNodes(const Instance& instance, const DeviceGraph& graph,
                            StreamHandle stream, uint64_t scope)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts idle instances beyond the bound, never the most recently used.
  void Trim() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Destroy(Instance& instance) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  Backend* const backend_;
  const Options options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Instance>> cache_
      ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);  // most recent first
  absl::flat_hash_set<uint64_t> scopes_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  // The signature of the graph being launched: its capacity is reused, so
  // a launch that finds its instance allocates nothing for the key.
  std::string key_ ABSL_GUARDED_BY(mu_);
  // A chain launch's arguments, kept for their capacity.
  std::vector<const KernelLaunch*> chain_launches_ ABSL_GUARDED_BY(mu_);
  std::vector<StreamHandle> chain_streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_STREAM_GRAPH_RUNNER_H_
