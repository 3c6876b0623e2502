// Turns one job (a Graph and its Plan) into device graphs (device_graph.h):
// per device, the job's kernels, the device-to-device copies that keep
// buffers coherent and the event nodes that order devices, for a backend to
// launch as one unit each (Backend::LaunchDeviceGraph).
//
// The result reproduces what the executor's stream path issues (job.h),
// decided ahead of time: coherence follows plan order the same way, so a
// buffer's copy on a device is refreshed from the device holding its latest
// version right before the first node that needs it there, and zero- and
// fill-initialized buffers are filled by a kernel, after that node's
// predecessors, on each device that uses them before anything writes
// them. Buffers with initial data are uploaded by the executor on an
// upload stream of the device that first uses them (host memory stays out
// of graphs: CUDA graphs cannot copy pageable memory), each followed by an
// event that an event-wait node waits for right before its first user in
// the graph, so a graph starts without waiting for its uploads and each
// node waits only for its own, as on streams. Edges come from the plan's
// dependencies plus the coherence copies; an edge between devices becomes
// an event record in the producer's graph and a wait in the consumer's.
// An output written by a graph node is downloaded after the work of the
// logical stream that last wrote it, as on streams: an event recorded in
// the graph after that stream's last node, not the graph's end.
//
// Edges: a node follows the node before it on its logical stream (and on
// its peer stream, which then continues after it), the
// last signaller of each event it waits on (as on streams) and its plan
// dependencies. Nodes are grouped into segments so that devices never wait
// on each other both ways within one graph: a node's segment is the
// largest of its same-device predecessors' segments, its other-device
// predecessors' segments plus one, and the segment of its device's node
// before it in the plan, so that each device's graphs hold its work in
// plan order and its engines take that work in the order the plan booked
// it. One graph per (device, segment);
// graphs are launched by segment, so every event recording is enqueued
// before the waits on it. Each graph goes onto a stream of its own and
// waits for earlier graphs of its device through events too, only where
// its nodes need them, so segments overlap as the plan's streams do. A job
// whose devices do not take turns has one graph per device.
//
// A plan fits when every node is a device node whose op the backend can
// put in a graph; otherwise BuildJobGraphs answers UNIMPLEMENTED with the
// reason, and the executor issues the job node by node.
//
// Pure functions; thread-compatible.
#ifndef WEFT_RUNTIME_JOB_GRAPH_H_
#define WEFT_RUNTIME_JOB_GRAPH_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/device_graph.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::runtime {

// A buffer's initial data uploaded to a graph's device before the graph
// is launched.
struct JobGraphUpload {
  scheduler::BufferId buffer = -1;
  // The graph's event-wait node its users there wait for; the upload's
  // event goes into it (DeviceGraphNode::event).
  int wait_node = -1;
  // Its place among every upload of the job: plan order of first use.
  int order = 0;
};

// An output downloaded once the logical stream that last wrote it has
// done its work in the graphs (one never written: once it is uploaded or
// filled).
struct JobGraphDownload {
  scheduler::BufferId buffer = -1;
  int logical_stream = -1;  // the plan stream that last wrote it, or -1
  // Recorded after that stream's last node (or the upload's wait, or the
  // fill); an index into JobGraphs::event_devices.
  int event = -1;
};

struct JobDeviceGraph {
  DeviceGraph graph;  // graph.device is the device
  int segment = 0;
  // Buffers whose initial data is uploaded to the device for this graph.
  std::vector<JobGraphUpload> uploads;
  // Plan indices of the nodes in this graph, in plan order; the first one's
  // logical stream carries the launch.
  std::vector<int> plan_indices;
  // (node index, cross-device event) of the graph's event nodes.
  std::vector<std::pair<int, int>> event_nodes;
};

struct JobGraphs {
  // In launch order: by segment, then device.
  std::vector<JobDeviceGraph> graphs;
  // Cross-device events: the device each is recorded on. Event nodes carry
  // placeholders until AssignJobGraphEvents.
  std::vector<int> event_devices;
  // By buffer: the device holding its latest version once all graphs have
  // run, or -1 when no node used it.
  std::vector<int> latest;
  // Outputs some graph node uses, by buffer.
  std::vector<JobGraphDownload> downloads;
};

struct JobGraphInputs {
  const scheduler::Graph* graph = nullptr;
  const scheduler::Plan* plan = nullptr;
  // The address of buffer `b`'s copy on `device` (allocated for every
  // device whose nodes use it).
  std::function<DevicePtr(scheduler::BufferId b, int device)> buffer;
  // Whether the backend can put `op` in a device graph.
  std::function<bool(const std::string& op)> supports_op;
};

// UNIMPLEMENTED (the reason) for a plan that does not fit.
absl::StatusOr<JobGraphs> BuildJobGraphs(const JobGraphInputs& inputs);

// Puts `events[i]` (a pooled event of device event_devices[i]) into the
// event nodes of event i. REQUIRES: events.size() == event_devices.size().
void AssignJobGraphEvents(JobGraphs& graphs,
                          const std::vector<EventHandle>& events);

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_JOB_GRAPH_H_
