// Helpers for the executor's tests: a graph and a hand-made plan built side
// by side, and a collector of one job's callbacks.
#ifndef WEFT_RUNTIME_EXECUTOR_TEST_UTIL_H_
#define WEFT_RUNTIME_EXECUTOR_TEST_UTIL_H_

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/trace.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::runtime::executor_testing {

using scheduler::Access;
using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::DType;
using scheduler::Graph;
using scheduler::NodeId;
using scheduler::NodeSpec;
using scheduler::Plan;
using scheduler::PlannedNode;
using scheduler::PlannedStream;

// Builds a graph and a hand-made plan side by side: nodes are planned in
// the order they are added.
class TestJob {
 public:
  explicit TestJob(int num_streams, std::vector<int> stream_devices = {}) {
    for (int s = 0; s < num_streams; ++s) {
      const int device =
          s < static_cast<int>(stream_devices.size()) ? stream_devices[s] : 0;
      plan_.streams.push_back(
          PlannedStream{s, device, "", scheduler::Engine::kCompute});
    }
  }

  // Makes `stream` a HOST-engine stream: its nodes are host nodes.
  void HostStream(int stream) {
    plan_.streams[stream].engine = scheduler::Engine::kHost;
  }

  int Buffer(std::string name, uint64_t bytes, DType dtype,
             BufferSpec::Init init = BufferSpec::Init::kZero, double fill = 0,
             std::string data = "", bool output = false) {
    BufferSpec b;
    b.name = std::move(name);
    b.size_bytes = bytes;
    b.dtype = dtype;
    b.init = init;
    b.fill = fill;
    b.data = std::move(data);
    b.output = output;
    buffers_.push_back(std::move(b));
    return static_cast<int>(buffers_.size()) - 1;
  }

  // Adds a node on `stream` (its device is the stream's) that waits on
  // `waits` and signals `signal`.
  NodeId Node(std::string name, std::string op,
              std::vector<scheduler::Arg> args, int stream,
              std::vector<int> waits = {}, int signal = -1,
              double cost_us = 0) {
    NodeSpec n;
    n.name = std::move(name);
    n.op = std::move(op);
    n.args = std::move(args);
    n.cost_us = cost_us;
    n.engine = plan_.streams[stream].engine;
    nodes_.push_back(std::move(n));
    const NodeId id = static_cast<NodeId>(nodes_.size()) - 1;
    PlannedNode pn;
    pn.node = id;
    pn.stream = stream;
    pn.device = plan_.streams[stream].device;
    pn.signal_event = signal;
    if (signal >= plan_.num_events) plan_.num_events = signal + 1;
    plan_.AddNode(pn, {}, waits);
    return id;
  }

  std::shared_ptr<const Graph> graph() const {
    return std::make_shared<const Graph>(name_, buffers_, nodes_);
  }
  void set_name(std::string name) { name_ = std::move(name); }
  std::shared_ptr<const Plan> plan() const {
    return std::make_shared<const Plan>(plan_);
  }

 private:
  std::string name_ = "test";
  std::vector<BufferSpec> buffers_;
  std::vector<NodeSpec> nodes_;
  Plan plan_;
};

inline BufferUse Use(int buffer, Access access) {
  return BufferUse{buffer, access};
}

inline std::string FloatBytes(const std::vector<float>& v) {
  std::string s(v.size() * sizeof(float), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

inline std::vector<float> Floats(const std::string& s) {
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}

// Outputs as plain bytes, zero tails included: what tests compare.
using OutputBytes = absl::flat_hash_map<std::string, std::string>;

inline OutputBytes BytesOf(const HostBuffers& outputs) {
  OutputBytes bytes;
  for (const auto& [name, buffer] : outputs) bytes[name] = buffer.ToString();
  return bytes;
}

// Collects one job's callbacks.
struct Outcome {
  absl::Notification done;
  absl::Status status;
  NodeId failed_node = -2;
  OutputBytes outputs;
  // As the executor gave them (stored bytes and sizes).
  HostBuffers host_outputs;
  int on_done_calls = 0;
  JobTrace trace;
  int on_trace_calls = 0;
  absl::Mutex mu;
  std::vector<std::pair<NodeId, NodeEventKind>> events ABSL_GUARDED_BY(mu);

  // With `traced`, asks for the job's trace too.
  JobCallbacks Callbacks(bool traced = false) {
    JobCallbacks callbacks;
    callbacks.on_node = [this](NodeId node, NodeEventKind kind,
                               const absl::Status&) {
      absl::MutexLock lock(&mu);
      events.emplace_back(node, kind);
    };
    callbacks.on_trace = [this](std::shared_ptr<const RecordedTrace> t) {
      trace = t->Build();
      ++on_trace_calls;
    };
    callbacks.on_done = [this](absl::Status s, NodeId node, HostBuffers out) {
      status = std::move(s);
      failed_node = node;
      outputs = BytesOf(out);
      host_outputs = std::move(out);
      ++on_done_calls;
      done.Notify();
    };
    if (!traced) callbacks.on_trace = nullptr;
    return callbacks;
  }

  bool Wait() { return done.WaitForNotificationWithTimeout(absl::Seconds(20)); }

  int CountOf(NodeEventKind kind) {
    absl::MutexLock lock(&mu);
    int n = 0;
    for (const auto& [node, k] : events) n += k == kind;
    return n;
  }
  // Position of (node, kind) in the event sequence, or -1.
  int IndexOf(NodeId node, NodeEventKind kind) {
    absl::MutexLock lock(&mu);
    for (size_t i = 0; i < events.size(); ++i) {
      if (events[i] == std::make_pair(node, kind)) return static_cast<int>(i);
    }
    return -1;
  }
};

// fill(x) on device 0 -> axpy(x, y) on device 1 -> reduce_sum(y) on
// device 0, so x and y each cross devices once.
TestJob VectorPipeline(float fill_value, int n = 1024);

// Checks the outputs of a VectorPipeline job.
void ExpectPipelineResult(Outcome& outcome, float fill_value, int n = 1024);

// Checks that no job holds device memory: every device's pool has nothing
// in use, and the backend holds exactly what the pools keep cached (no
// block leaked past the pools).
void ExpectNoMemoryHeld(const Backend& backend, const Executor& executor);

// The graph run on the host, node by node in graph order (a topological
// order): the outputs every correct execution produces. The status of the
// first op the host refuses (UNIMPLEMENTED for one it has no kernel for).
absl::StatusOr<OutputBytes> RunOnHost(const scheduler::Graph& graph);
// The same, failing the current test where the host refuses an op.
OutputBytes CpuReference(const scheduler::Graph& graph);

}  // namespace weft::runtime::executor_testing

#endif  // WEFT_RUNTIME_EXECUTOR_TEST_UTIL_H_
