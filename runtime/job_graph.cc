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
struct Ref {
  int graph = -1;
  int index = -1;
  friend bool operator==(Ref a, Ref b) {
    return a.graph == b.graph && a.index == b.index;
  }
  friend bool operator<(Ref a, Ref b) {
    return a.graph != b.graph ? a.graph < b.graph : a.index < b.index;
  }
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
  // so that it runs after `src`: `src` itself in `g`, else the wait for an
  // event recorded after it in its (earlier) graph.
  void After(Ref src, int g, std::vector<int>& deps);
  // The cross-device event recorded in src's graph once `src` is done
  // (recorded once however many wait for it).
  int RecordAfter(Ref src);
  // The least segment of a node on `device` that runs after `src`.
  int SegmentAfter(Ref src, int device) const;
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
    deps.push_back(src.index);
    return;
  }
  const int event = RecordAfter(src);
  auto wait = wait_of_.find({g, event});
  if (wait == wait_of_.end()) {
    JobDeviceGraph& to = out_.graphs[g];
    const int node = to.graph.AddEventWait(EventHandle{}, {});
    to.event_nodes.emplace_back(node, event);
    wait = wait_of_.emplace(std::make_pair(g, event), node).first;
  }
  deps.push_back(wait->second);
}

int Builder::RecordAfter(Ref src) {
  const std::pair<int, int> key(src.graph, src.index);
  auto rec = record_of_.find(key);
  if (rec == record_of_.end()) {
    const int event = static_cast<int>(out_.event_devices.size());
    JobDeviceGraph& from = out_.graphs[src.graph];
    out_.event_devices.push_back(from.graph.device);
    const int node = from.graph.AddEventRecord(EventHandle{}, {src.index});
    from.event_nodes.emplace_back(node, event);
    rec = record_of_.emplace(key, event).first;
  }
  return rec->second;
}

int Builder::SegmentAfter(Ref src, int device) const {
  if (src.graph < 0) return 0;
  const JobDeviceGraph& from = out_.graphs[src.graph];
  return from.segment + (from.graph.device != device ? 1 : 0);
}

void SortUnique(std::vector<int>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
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
  int uploads = 0;
  // Outputs download after the work of their last writer's plan stream:
  // the event is recorded right after that stream's last node, while it is
  // still the last node of its lane (so the record adds no wait).
  std::vector<int> writer_stream(num_buffers, -1);
  std::vector<int> last_index(plan_.streams.size(), -1);
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan_.nodes[i];
    last_index[pn.stream] = i;
    if (pn.peer_stream >= 0) last_index[pn.peer_stream] = i;
    for (const BufferUse& use : graph_.Uses(pn.node)) {
      if (scheduler::Writes(use.access)) writer_stream[use.buffer] = pn.stream;
    }
  }
  std::vector<bool> feeds_download(plan_.streams.size(), false);
  for (BufferId b = 0; b < num_buffers; ++b) {
    if (graph_.buffer(b).output && writer_stream[b] >= 0) {
      feeds_download[writer_stream[b]] = true;
    }
  }
  std::vector<int> download_event(plan_.streams.size(), -1);
  std::vector<Ref> ref(n);
  std::vector<int> position(graph_.num_nodes(), -1);
  // The last graph node on each logical stream: a plan node or an eager
  // copy.
  std::vector<Ref> stream_tail(plan_.streams.size());
  std::vector<int> signaller(std::max(plan_.num_events, 0), -1);
  // An eager copy (Plan::copies), as the stream path issues it just before
  // its reader: on its COPY stream after that stream's earlier work, once
  // the buffer's latest version is complete; nothing if the buffer is
  // current there already. It goes into its reader's graph `g`, so graphs
  // issue copies in the plan's order, as streams do.
  auto needs_copy = [&](const scheduler::PlannedCopy& copy) {
    return out_.latest[copy.buffer] >= 0 && !current[copy.buffer][copy.device];
  };
  auto eager_copy = [&](const scheduler::PlannedCopy& copy, int g) {
    const BufferId b = copy.buffer;
    const int d = copy.device;
    const int s = out_.latest[b];
    const Ref tail = stream_tail[copy.stream];
    const Ref src = producer[b][s];
    std::vector<int> deps;
    After(tail, g, deps);
    After(src, g, deps);
    SortUnique(deps);
    producer[b][d] = Ref{g, out_.graphs[g].graph.AddDeviceCopy(
                                in_.buffer(b, d), in_.buffer(b, s),
                                graph_.buffer(b).size_bytes, std::move(deps))};
    current[b][d] = true;
    stream_tail[copy.stream] = producer[b][d];
  };
  // The segment of each device's latest graph work: a device's segments
  // never go back in plan order, so the device's graphs, launched by
  // segment, enqueue its work in the plan's order, and its kernel slots
  // and copy engines take that work in the order the plan booked it.
  std::vector<int> device_segment(num_devices, 0);
  std::vector<Ref> preds;
  auto add_pred = [&preds](Ref r) {
    if (r.graph >= 0) preds.push_back(r);
  };
  std::vector<BufferUse> uses;
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan_.nodes[i];
    const scheduler::NodeSpec& node = graph_.node(pn.node);
    const int d = pn.device;
    position[pn.node] = i;
    // Predecessors: as the stream path orders the node.
    preds.clear();
    add_pred(stream_tail[pn.stream]);
    // A node holding a peer stream too starts after both streams' earlier
    // work, and both streams' later work follows it.
    const bool peer = pn.peer_stream >= 0 && pn.peer_stream != pn.stream;
    if (peer) add_pred(stream_tail[pn.peer_stream]);
    for (int e : plan_.Waits(i)) {
      if (signaller[e] >= 0) add_pred(ref[signaller[e]]);
    }
    for (scheduler::NodeId dep : plan_.Deps(i)) add_pred(ref[position[dep]]);
    std::sort(preds.begin(), preds.end());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    if (pn.signal_event >= 0) signaller[pn.signal_event] = i;
    uses.clear();
    if (!node.args.empty()) uses = graph_.BufferUses(pn.node);
    // The segment: after every graph node this one will wait for (its
    // predecessors and the copies it reads), one more across devices, and
    // not before the device's work earlier in the plan.
    int segment = device_segment[d];
    for (Ref q : preds) segment = std::max(segment, SegmentAfter(q, d));
    for (const BufferUse& use : uses) {
      const int latest = out_.latest[use.buffer];
      if (latest < 0) continue;
      segment =
          std::max(segment, SegmentAfter(current[use.buffer][d]
                                             ? producer[use.buffer][d]
                                             : producer[use.buffer][latest],
                                         d));
    }
    const absl::Span<const scheduler::PlannedCopy> eager =
        plan_.CopiesBefore(i);
    for (const scheduler::PlannedCopy& copy : eager) {
      if (copy.device != d || !needs_copy(copy)) continue;
      segment = std::max(segment,
                         SegmentAfter(stream_tail[copy.stream], copy.device));
    }
    device_segment[d] = segment;
    const int g = GraphOf(d, segment);
    for (const scheduler::PlannedCopy& copy : eager) {
      if (copy.device == d && needs_copy(copy)) eager_copy(copy, g);
    }
    out_.graphs[g].plan_indices.push_back(i);
    std::vector<int> deps;
    for (Ref q : preds) After(q, g, deps);
    for (const BufferUse& use : uses) {
      const BufferId b = use.buffer;
      const BufferSpec& spec = graph_.buffer(b);
      const bool first = out_.latest[b] < 0;
      if (first && spec.init == BufferSpec::Init::kData) {
        // Uploaded on the device's upload stream before graph g is
        // launched; its users wait for the upload's event, first here on
        // this node's lane after its predecessors, as on its stream.
        std::vector<int> wait_deps = deps;
        SortUnique(wait_deps);
        const int wait = out_.graphs[g].graph.AddEventWait(
            EventHandle{}, std::move(wait_deps));
        out_.graphs[g].uploads.push_back({b, wait, uploads++});
        producer[b][d] = Ref{g, wait};
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
        SortUnique(fill_deps);
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
        SortUnique(copy_deps);
        producer[b][d] = Ref{g, out_.graphs[g].graph.AddDeviceCopy(
                                    in_.buffer(b, d), in_.buffer(b, s),
                                    spec.size_bytes, std::move(copy_deps))};
        current[b][d] = true;
      }
      After(producer[b][d], g, deps);
    }
    SortUnique(deps);
    ref[i] = Ref{
        g, out_.graphs[g].graph.AddKernel(LaunchFor(node, d), std::move(deps))};
    stream_tail[pn.stream] = ref[i];
    if (peer) stream_tail[pn.peer_stream] = ref[i];
    for (const int s : {pn.stream, peer ? pn.peer_stream : -1}) {
      if (s >= 0 && last_index[s] == i && feeds_download[s]) {
        download_event[s] = RecordAfter(ref[i]);
      }
    }
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

  // Outputs: each after its last writer's stream has done its work here.
  // Outputs only uploaded or filled: once that is done.
  for (BufferId b = 0; b < num_buffers; ++b) {
    if (!graph_.buffer(b).output || out_.latest[b] < 0) continue;
    if (written[b]) {
      const int s = writer_stream[b];
      out_.downloads.push_back({b, s, download_event[s]});
    } else {
      out_.downloads.push_back(
          {b, -1, RecordAfter(producer[b][out_.latest[b]])});
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
