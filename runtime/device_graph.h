// A backend-neutral description of one device's share of a job: the device
// work a backend may capture into a graph (a CUDA graph), instantiate once
// and launch again whenever work of the same shape comes back.
//
// A DeviceGraph lists nodes in a topological order: each node names the
// earlier nodes of the same graph it depends on (intra-device edges).
// Dependencies on other devices go through events: an event-record node
// records a pooled event once its dependencies are done, and an event-wait
// node in another device's graph completes once that recording has. The
// recording must be enqueued (its graph launched) before the graph that
// waits on it, as with Backend::StreamWaitEvent.
//
// Structure and parameters. DeviceGraphSignature() encodes what a launch
// cannot change without building a new graph: the device, the node kinds
// and their order, op names, argument kinds, buffer sizes, dtypes and
// access modes, copy directions and sizes, the devices a copy touches, and
// every edge. It leaves out what can be updated in place before a launch:
// device addresses, scalar argument values, a kernel's cost_us (a spin's
// duration), occupancy_units and engine (how a simulated device books it),
// host addresses and event handles. Two graphs with equal signatures differ
// at most in parameters.
//
// Plain values; not thread-safe.
#ifndef WEFT_RUNTIME_DEVICE_GRAPH_H_
#define WEFT_RUNTIME_DEVICE_GRAPH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/backend.h"

namespace weft::runtime {

enum class DeviceGraphNodeKind {
  kKernel,
  kCopy,
  kEventRecord,
  kEventWait,
  kControl,
};
enum class CopyDirection { kHostToDevice, kDeviceToHost, kDeviceToDevice };

struct DeviceGraph;

// A loop or case..of that the device decides inside a graph (a conditional
// node in the body of another), as DeviceLoop and DeviceCase (backend.h)
// describe them: a loop runs bodies[0] while element 0 of `value` is
// nonzero, at most max_iterations times per run; a case..of runs
// bodies[i] for a selector value i (INT32 or INT64) in range, or nothing.
// An empty body is an empty branch. The node ends when the control node
// has, and the nodes after it that depend on it start then.
struct DeviceGraphControl {
  bool loop = true;
  std::string name;
  std::vector<DeviceGraph> bodies;  // on the graph's device
  DevicePtr value;                  // the condition or the selector
  scheduler::DType dtype = scheduler::DType::kInt32;
  uint32_t max_iterations = 0;  // loops
  // A loop's iterations summed over its runs, or the branch a case's last
  // run took (-1: none); updated as each run ends.
  std::shared_ptr<std::atomic<int64_t>> result =
      std::make_shared<std::atomic<int64_t>>(0);
};

struct DeviceGraphNode {
  DeviceGraphNodeKind kind = DeviceGraphNodeKind::kKernel;
  // kKernel.
  KernelLaunch launch;
  // kCopy: `dst`/`src` for device memory, `host_dst`/`host_src` for host
  // memory (which stays valid until the launch has completed).
  CopyDirection direction = CopyDirection::kDeviceToDevice;
  DevicePtr dst;
  DevicePtr src;
  void* host_dst = nullptr;
  const void* host_src = nullptr;
  uint64_t bytes = 0;
  // kEventRecord / kEventWait.
  EventHandle event;
  // kControl (shared by the copies of the graph).
  std::shared_ptr<const DeviceGraphControl> control;
  // Earlier nodes of the same graph (indices into DeviceGraph::nodes).
  std::vector<int> deps;
};

struct DeviceGraph {
  int device = 0;
  std::vector<DeviceGraphNode> nodes;

  // Appenders; each returns the new node's index.
  int AddKernel(KernelLaunch launch, std::vector<int> deps);
  int AddDeviceCopy(DevicePtr dst, DevicePtr src, uint64_t bytes,
                    std::vector<int> deps);
  int AddHostToDevice(DevicePtr dst, const void* src, uint64_t bytes,
                      std::vector<int> deps);
  int AddDeviceToHost(void* dst, DevicePtr src, uint64_t bytes,
                      std::vector<int> deps);
  int AddEventRecord(EventHandle event, std::vector<int> deps);
  int AddEventWait(EventHandle event, std::vector<int> deps);
  int AddControl(std::shared_ptr<const DeviceGraphControl> control,
                 std::vector<int> deps);
  // Whether a node here or in a nested body is a control node.
  bool HasControl() const;
};

// INVALID_ARGUMENT naming the first problem: a dependency that is not an
// earlier node, a user kernel (not supported in graphs yet), a kernel buffer or
// a copy endpoint on the wrong device (a device-to-device copy may read another
// device), a null host address, an event node without an event, or a control
// node without a control, with a value or a body on another device, a loop
// without exactly one body or with max_iterations 0, a case..of selector that
// is not INT32 or INT64, or a body that fails these checks itself.
absl::Status ValidateDeviceGraph(const DeviceGraph& graph);

// The structural key described above: equal for graphs that differ only in
// parameters, different for any structural change. An exact encoding, not a
// hash, so a cache keyed by it has no collisions.
std::string DeviceGraphSignature(const DeviceGraph& graph);
// The same, appended to `out` (whose capacity a caller may reuse).
void AppendDeviceGraphSignature(const DeviceGraph& graph, std::string& out);

// What the signature leaves out (addresses, scalar values, cost_us,
// occupancy_units, engine, host addresses, event handles), encoded for
// comparison: two graphs with equal signatures and equal parameters launch
// the same work.
std::string DeviceGraphParameters(const DeviceGraph& graph);

// Places the nodes of `graph` on lanes (streams) for enqueueing: a node
// goes onto the lane whose last node is one of its dependencies, so chains
// stay on one lane; other nodes open a new lane while fewer than
// `max_lanes` (at least 1) exist, else join the lane least recently given
// a node, which only adds order. Returns the lane of each node; `lanes` is
// set to the number of lanes (at least 1).
std::vector<int> AssignLanes(const DeviceGraph& graph, int max_lanes,
                             int& lanes);

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_DEVICE_GRAPH_H_
