#include "runtime/job_graph.h"

#include <algorithm>
#include <utility>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/kernel_launch_builder.h"

namespace weft::runtime {

using scheduler::BufferId;
using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::PlannedNode;

namespace {

// A node of one graph (an index into JobGraphs::graphs); graph -1: none.
// Index kStart stands for the start of the graph: what was enqueued on its
// stream before it (an upload) is done there.
constexpr int kStart = -1;
struct Ref {
  int graph = -1;
  int index = kStart;
};

class Builder {
 public:
  explicit Builder(const JobGraphInputs& in)
      : in_(in), graph_(*in.graph), plan_(*in.plan) {}

  absl::StatusOr<JobGraphs> Build();

 private:
  // The graph of (device, segment), created on first use.
  int GraphOf(int device, int segment);
  // Appends to `deps` (nodes of graph `g`) what a node of `g` waits for
  // so that it runs after `src`. Nothing when `src` is in an earlier graph
  // of the same device: the stream's order covers that.
  void After(Ref src, int g, std::vector<int>& deps);
  KernelLaunch LaunchFor(const scheduler::NodeSpec& node, int device) const;

  const JobGraphInputs& in_;
  const scheduler::Graph& graph_;
  const scheduler::Plan& plan_;
  JobGraphs out_;
  absl::flat_hash_map<std::pair<int, int>, int> graph_of_;   // (dev, seg)
  absl::flat_hash_map<std::pair<int, int>, int> record_of_;  // ref -> event
  absl::flat_hash_map<std::pair<int, int>, int> wait_of_;    // (g, event)
};

int Builder::GraphOf(int device, int segment) {
  auto [it, inserted] = graph_of_.emplace(std::make_pair(device, segment),
                                          static_cast<int>(out_.graphs.size()));
  if (inserted) {
    out_.graphs.emplace_back();
    out_.graphs.back().graph.device = device;
    out_.graphs.back().segment = segment;
  }
  return it->second;
}

void Builder::After(Ref src, int g, std::vector<int>& deps) {
  if (src.graph < 0) return;
  if (src.graph == g) {
    if (src.index != kStart) deps.push_back(src.index);
    return;
  }
  const int src_device = out_.graphs[src.graph].graph.device;
  if (src_device == out_.graphs[g].graph.device) return;
  const std::pair<int, int> key(src.graph, src.index);
  auto rec = record_of_.find(key);
  if (rec == record_of_.end()) {
    const int event = static_cast<int>(out_.event_devices.size());
    out_.event_devices.push_back(src_device);
    JobDeviceGraph& from = out_.graphs[src.graph];
    std::vector<int> after;
    if (src.index != kStart) after.push_back(src.index);
    const int node = from.graph.AddEventRecord(EventHandle{}, std::move(after));
    from.event_nodes.emplace_back(node, event);
    rec = record_of_.emplace(key, event).first;
  }
  const int event = rec->second;
  auto wait = wait_of_.find({g, event});
  if (wait == wait_of_.end()) {
    JobDeviceGraph& to = out_.graphs[g];
    const int node = to.graph.AddEventWait(EventHandle{}, {});
    to.event_nodes.emplace_back(node, event);
    wait = wait_of_.emplace(std::make_pair(g, event), node).first;
  }
  deps.push_back(wait->second);
}

KernelLaunch Builder::LaunchFor(const scheduler::NodeSpec& node,
                                int device) const {
  return BuildKernelLaunch(graph_, node, [&](BufferId buffer) {
    return in_.buffer(buffer, device);
  });
}

absl::StatusOr<JobGraphs> Builder::Build() {
  const int n = static_cast<int>(plan_.nodes.size());
  int num_devices = 1;
  for (const PlannedNode& pn : plan_.nodes) {
    num_devices = std::max(num_devices, pn.device + 1);
    const scheduler::NodeSpec& node = graph_.node(pn.node);
    if (node.engine == scheduler::Engine::kHost) {
      return absl::UnimplementedError(absl::StrCat(
          "node '", node.name, "' runs on the host, outside device graphs"));
    }
    if (node.kernel.has_value() || !in_.supports_op(node.op)) {
      return absl::UnimplementedError(
          absl::StrCat("node '", node.name, "': op '", node.op,
                       "' cannot go into a device graph on this backend"));
    }
  }

  const int num_buffers = graph_.num_buffers();
  out_.latest.assign(num_buffers, -1);
  std::vector<std::vector<bool>> current(num_buffers,
                                         std::vector<bool>(num_devices));
  std::vector<std::vector<Ref>> producer(num_buffers,
                                         std::vector<Ref>(num_devices));
  // Some node has written the buffer (BufferCoherence's `written`).
  std::vector<bool> written(num_buffers, false);
  std::vector<Ref> ref(n);
  std::vector<int> position(graph_.num_nodes(), -1);
  std::vector<int> last_on_stream(plan_.streams.size(), -1);
  std::vector<int> signaller(std::max(plan_.num_events, 0), -1);
  std::vector<int> preds;
  std::vector<BufferUse> uses;
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan_.nodes[i];
    const scheduler::NodeSpec& node = graph_.node(pn.node);
    const int d = pn.device;
    position[pn.node] = i;
    // Predecessors (plan indices): as the stream path orders the node.
    preds.clear();
    if (last_on_stream[pn.stream] >= 0) {
      preds.push_back(last_on_stream[pn.stream]);
    }
    // A node holding a peer stream too starts after both streams' earlier
    // work, and both streams' later work follows it.
    const bool peer = pn.peer_stream >= 0 && pn.peer_stream != pn.stream;
    if (peer && last_on_stream[pn.peer_stream] >= 0) {
      preds.push_back(last_on_stream[pn.peer_stream]);
    }
    for (int e : plan_.Waits(i)) {
      if (signaller[e] >= 0) preds.push_back(signaller[e]);
    }
    for (scheduler::NodeId dep : plan_.Deps(i)) {
      preds.push_back(position[dep]);
    }
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    last_on_stream[pn.stream] = i;
    if (peer) last_on_stream[pn.peer_stream] = i;
    if (pn.signal_event >= 0) signaller[pn.signal_event] = i;
    uses.clear();
    if (!node.args.empty()) uses = graph_.BufferUses(pn.node);
    // The segment: after every graph node this one will wait for (its
    // predecessors and the copies it reads), one more across devices.
    int segment = 0;
    auto at_least_after = [&](Ref src) {
      if (src.graph < 0) return;
      const JobDeviceGraph& from = out_.graphs[src.graph];
      segment =
          std::max(segment, from.segment + (from.graph.device != d ? 1 : 0));
    };
    for (int q : preds) at_least_after(ref[q]);
    for (const BufferUse& use : uses) {
      const int latest = out_.latest[use.buffer];
      if (latest < 0) continue;
      at_least_after(current[use.buffer][d] ? producer[use.buffer][d]
                                            : producer[use.buffer][latest]);
    }
    const int g = GraphOf(d, segment);
    out_.graphs[g].plan_indices.push_back(i);
    std::vector<int> deps;
    for (int q : preds) After(ref[q], g, deps);
    for (const BufferUse& use : uses) {
      const BufferId b = use.buffer;
      const BufferSpec& spec = graph_.buffer(b);
      const bool first = out_.latest[b] < 0;
      if (first && spec.init == BufferSpec::Init::kData) {
        // Uploaded before graph g, on its stream: ready where g starts.
        out_.graphs[g].uploads.push_back(b);
        producer[b][d] = Ref{g, kStart};
        out_.latest[b] = d;
        current[b][d] = true;
      } else if (spec.init != BufferSpec::Init::kData && !written[b] &&
                 !current[b][d]) {
        // Still its initial zeros or fill: made here in place, as on
        // streams, and after the node's own predecessors (with arena
        // placement the memory may hold another buffer until then).
        const bool zero = spec.init == BufferSpec::Init::kZero;
        KernelLaunch fill;
        fill.op = "fill";
        fill.args = {
            DeviceBufferArg{in_.buffer(b, d), spec.size_bytes,
                            zero ? scheduler::DType::kBytes : spec.dtype,
                            scheduler::Access::kWrite},
            zero ? 0.0 : spec.fill};
        std::vector<int> fill_deps = deps;
        std::sort(fill_deps.begin(), fill_deps.end());
        fill_deps.erase(std::unique(fill_deps.begin(), fill_deps.end()),
                        fill_deps.end());
        producer[b][d] = Ref{g, out_.graphs[g].graph.AddKernel(
                                    std::move(fill), std::move(fill_deps))};
        if (first) out_.latest[b] = d;
        current[b][d] = true;
      } else if (!current[b][d]) {
        // After the node's own predecessors, as on streams, and after the
        // latest version is complete.
        const int s = out_.latest[b];
        std::vector<int> copy_deps = deps;
        After(producer[b][s], g, copy_deps);
        std::sort(copy_deps.begin(), copy_deps.end());
        copy_deps.erase(std::unique(copy_deps.begin(), copy_deps.end()),
                        copy_deps.end());
        producer[b][d] = Ref{g, out_.graphs[g].graph.AddDeviceCopy(
                                    in_.buffer(b, d), in_.buffer(b, s),
                                    spec.size_bytes, std::move(copy_deps))};
        current[b][d] = true;
      }
      After(producer[b][d], g, deps);
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    ref[i] = Ref{
        g, out_.graphs[g].graph.AddKernel(LaunchFor(node, d), std::move(deps))};
    for (const BufferUse& use : uses) {
      if (!scheduler::Writes(use.access)) continue;
      const BufferId b = use.buffer;
      out_.latest[b] = d;
      written[b] = true;
      std::fill(current[b].begin(), current[b].end(), false);
      current[b][d] = true;
      producer[b][d] = ref[i];
    }
  }

  // Launch order: by segment, then device. Event indices stay valid (they
  // are not graph indices).
  std::stable_sort(out_.graphs.begin(), out_.graphs.end(),
                   [](const JobDeviceGraph& a, const JobDeviceGraph& b) {
                     if (a.segment != b.segment) return a.segment < b.segment;
                     return a.graph.device < b.graph.device;
                   });
  return std::move(out_);
}

}  // namespace

absl::StatusOr<JobGraphs> BuildJobGraphs(const JobGraphInputs& inputs) {
  return Builder(inputs).Build();
}

void AssignJobGraphEvents(JobGraphs& graphs,
                          const std::vector<EventHandle>& events) {
  for (JobDeviceGraph& g : graphs.graphs) {
    for (const auto& [node, event] : g.event_nodes) {
      g.graph.nodes[node].event = events[event];
    }
  }
}

}  // namespace weft::runtime
