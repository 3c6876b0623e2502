#include "scheduler/lower_bound.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include "scheduler/lower_bound_terms.h"
#include "scheduler/lower_bound_transfers.h"
#include "scheduler/occupancy.h"
#include "scheduler/reach_sets.h"

namespace weft::scheduler {
namespace {

using bounds::FastestHostLinkUs;
using bounds::KernelSpan;
using bounds::LongKernel;
using bounds::MeetBound;
using bounds::Neighbour;
using bounds::WindowedWork;

bool IsKernel(Engine e) {
  return e == Engine::kCompute || e == Engine::kCollective;
}

// Positions the join and fork loads (EndLoad over a node's ancestors
// or descendants) may visit in all; beyond them nodes go without.
constexpr int64_t kLoadVisits = int64_t{1} << 22;

}  // namespace

LowerBoundTerms ComputeLowerBound(const Graph& graph, const Dag& dag,
                                  const LowerBoundOptions& options) {
  const int devices = std::max(options.num_devices, 1);
  std::unique_ptr<Topology> owned;
  const Topology* topology = options.topology;
  if (topology == nullptr) {
    owned = std::make_unique<Topology>(Topology::Default(devices));
    topology = owned.get();
  }
  const double lanes = static_cast<double>(devices) *
                       std::max(options.copy_engines_per_device, 1);
  const bool transfers = options.model_transfers;
  const int n = graph.num_nodes();
  const int num_buffers = graph.num_buffers();
  constexpr double kInf = std::numeric_limits<double>::infinity();

  // Per buffer: its upload time (negative: not computed yet), the last
  // node that counted it, whether some device node needs it uploaded, and
  // its last writer.
  std::vector<double> upload_us(transfers ? num_buffers : 0, -1);
  std::vector<int32_t> stamp(transfers ? num_buffers : 0, -1);
  std::vector<uint8_t> uploaded(transfers ? num_buffers : 0, 0);
  std::vector<NodeId> last_writer(transfers ? num_buffers : 0, -1);
  auto upload_of = [&](BufferId b) {
    if (upload_us[b] < 0) {
      upload_us[b] =
          FastestHostLinkUs(*topology, devices, graph.buffer_bytes(b), false);
    }
    return upload_us[b];
  };

  // Copies between devices: the fastest pair (a copy's time is linear in
  // its bytes); none with one device.
  int peer_from = -1, peer_to = -1;
  for (int a = 0; a < devices; ++a) {
    for (int b = 0; b < devices; ++b) {
      if (a == b) continue;
      if (peer_from < 0 ||
          topology->TransferUs(uint64_t{1} << 30, a, b) <
              topology->TransferUs(uint64_t{1} << 30, peer_from, peer_to)) {
        peer_from = a;
        peer_to = b;
      }
    }
  }
  auto peer_us = [&](uint64_t bytes) {
    return peer_from < 0 ? kInf
                         : topology->TransferUs(bytes, peer_from, peer_to);
  };
  const double slots = std::max(options.max_concurrent_kernels, 1);
  const double copies_per_device = std::max(options.copy_engines_per_device, 1);
  auto cost_of = [&](NodeId v) { return std::max(graph.cost_us(v), 0.0); };
  auto on_device = [&](NodeId v) { return graph.engine(v) != Engine::kHost; };
  auto work_of = [&](NodeId v) {
    return IsKernel(graph.engine(v))
               ? OccupancyOf(graph.occupancy_units(v)) * cost_of(v)
               : 0.0;
  };
  auto time_of = [&](NodeId v) {
    return IsKernel(graph.engine(v)) ? cost_of(v) : 0.0;
  };
  // Data edges: a device node's use of what another device node wrote last,
  // and the least time a copy of it to another device takes.
  struct DataEdge {
    NodeId writer, user;
    double us;
  };
  std::vector<DataEdge> data_edges;
  std::vector<int32_t> seen(transfers ? num_buffers : 0, -1);
  std::vector<Neighbour> near;
  struct Copy {
    NodeId writer;
    double sum, most;
  };
  std::vector<Copy> copies;

  // Host data only one node can use first (every other use of it comes
  // after that node's): it is issued first among the buffer's users, so
  // the buffer goes up to that node's device on the device's one upload
  // stream, one upload after another, before the node starts. By node:
  // the sum of those uploads.
  std::vector<double> sole_uploads(transfers ? n : 0, 0);
  if (transfers) {
    std::vector<NodeId> first_user(num_buffers, -1);
    std::vector<uint8_t> shared(num_buffers, 0), settled(num_buffers, 0);
    for (NodeId v = 0; v < n; ++v) {
      const absl::Span<const BufferUse> uses = graph.Uses(v);
      for (const BufferUse& use : uses) {
        const BufferId b = use.buffer;
        if (settled[b]) continue;
        // The first writer comes after every use before it.
        bool writes = false;
        for (const BufferUse& other : uses) {
          writes |= other.buffer == b && Writes(other.access);
        }
        if (first_user[b] < 0) {
          first_user[b] = v;
        } else if (first_user[b] != v && !writes) {
          shared[b] = 1;
        }
      }
      // Uses after a buffer's first writer are its descendants.
      for (const BufferUse& use : uses) {
        if (Writes(use.access)) settled[use.buffer] = 1;
      }
    }
    for (BufferId b = 0; b < num_buffers; ++b) {
      const NodeId v = first_user[b];
      if (v < 0 || shared[b] || !graph.has_initial_data(b) || !on_device(v)) {
        continue;
      }
      sole_uploads[v] += upload_of(b);
    }
  }

  // Host data that device nodes use goes up before the first of them
  // starts, over the devices' upload engines: a node starts no earlier
  // than the uploads of everything it and its ancestors use could take
  // over all those engines. Counted for up to 64 such buffers, the
  // dearest, as a bit each: by node, the set its ancestors and it use
  // and the sum of their uploads.
  std::vector<BufferId> closure_buffers;
  std::vector<int8_t> closure_bit;
  std::vector<uint64_t> closure_set;
  std::vector<double> closure_us;
  if (transfers) {
    for (BufferId b = 0; b < num_buffers; ++b) {
      if (graph.has_initial_data(b)) closure_buffers.push_back(b);
    }
    if (closure_buffers.size() > 64) {
      std::nth_element(closure_buffers.begin(), closure_buffers.begin() + 64,
                       closure_buffers.end(), [&](BufferId a, BufferId b) {
                         return upload_of(a) > upload_of(b);
                       });
      closure_buffers.resize(64);
    }
    // One buffer adds nothing to what each node's own uses give.
    if (closure_buffers.size() < 2) closure_buffers.clear();
  }
  if (!closure_buffers.empty()) {
    closure_bit.assign(num_buffers, -1);
    for (size_t i = 0; i < closure_buffers.size(); ++i) {
      closure_bit[closure_buffers[i]] = static_cast<int8_t>(i);
    }
    closure_set.assign(n, 0);
    closure_us.assign(n, 0);
  }

  // On small graphs: every node's ancestors and descendants, and the
  // kernels among them that must end before a join starts (or start after
  // a fork ends), within a budget of visited positions. The sets index
  // kernels first, by decreasing path to them (so a join's ancestors come
  // about by decreasing head, and a fork's descendants, backwards, about
  // by decreasing tail: EndLoad is valid in any order, and tightest in
  // that one), then the other nodes.
  std::unique_ptr<bounds::ReachSets> reach;
  std::vector<NodeId> by_index;  // the inverse of the sets' index
  int num_kernels = 0;
  if (n <= bounds::ReachSets::kMaxNodes) {
    std::vector<double> path(n, 0);
    for (const NodeId v : dag.order) {
      for (const NodeId p : dag.Preds(v)) {
        path[v] = std::max(path[v], path[p] + cost_of(p));
      }
    }
    auto loaded = [&](NodeId v) {
      return IsKernel(graph.engine(v)) && cost_of(v) > 0;
    };
    by_index.resize(n);
    std::iota(by_index.begin(), by_index.end(), 0);
    std::stable_sort(by_index.begin(), by_index.end(), [&](NodeId a, NodeId b) {
      if (loaded(a) != loaded(b)) return loaded(a);
      return path[a] > path[b];
    });
    std::vector<int32_t> index(n);
    for (int i = 0; i < n; ++i) {
      index[by_index[i]] = i;
      num_kernels += loaded(by_index[i]) ? 1 : 0;
    }
    reach = std::make_unique<bounds::ReachSets>(dag, &index);
  }
  int64_t load_budget = kLoadVisits;
  // The least time after which every kernel of `set` but v has ended,
  // from the least `edge` (head, or backwards tail) among them.
  auto load_of = [&](const uint64_t* set, NodeId v,
                     const std::vector<double>& edge, bool backward) {
    bounds::EndLoad load(devices, slots);
    int64_t visited = 0;
    reach->ForEachBelow(set, num_kernels, backward, [&](int i) {
      const NodeId u = by_index[i];
      ++visited;
      if (u == v) return;
      load.Add(edge[u], work_of(u), cost_of(u),
               graph.occupancy_units(u) > kOccupancyUnits / 2);
    });
    load_budget -= num_kernels / 64 + visited;
    return load.bound();
  };

  // Forward: the earliest start of every node (its head).
  std::vector<double> head(n, 0);
  std::vector<uint8_t> uses_host_data(n, 0);
  double upload_work = 0;
  for (const NodeId v : dag.order) {
    double start = transfers ? sole_uploads[v] : 0;
    for (const NodeId p : dag.Preds(v)) {
      start = std::max(start, head[p] + std::max(graph.cost_us(p), 0.0));
    }
    if (!closure_buffers.empty()) {
      // From the predecessor whose set weighs most, adding the others'.
      uint64_t set = 0;
      double us = 0;
      for (const NodeId p : dag.Preds(v)) {
        if (closure_us[p] > us) {
          set = closure_set[p];
          us = closure_us[p];
        }
      }
      auto add = [&](uint64_t bits) {
        bits &= ~set;
        set |= bits;
        for (; bits != 0; bits &= bits - 1) {
          us += upload_of(closure_buffers[__builtin_ctzll(bits)]);
        }
      };
      for (const NodeId p : dag.Preds(v)) add(closure_set[p]);
      if (on_device(v)) {
        for (const BufferUse& use : graph.Uses(v)) {
          const int8_t bit = closure_bit[use.buffer];
          if (bit >= 0) add(uint64_t{1} << bit);
        }
      }
      closure_set[v] = set;
      closure_us[v] = us;
      start = std::max(start, us / lanes);
    }
    if (transfers && on_device(v)) {
      // Each device node that wrote what v uses last is on v's device, or
      // its data comes over after it ends.
      copies.clear();
      for (const BufferUse& use : graph.Uses(v)) {
        const BufferId b = use.buffer;
        const NodeId p = last_writer[b];
        if (seen[b] == v || p < 0 || p == v || !on_device(p)) continue;
        seen[b] = v;
        const double us = peer_us(graph.buffer_bytes(b));
        auto it = std::find_if(copies.begin(), copies.end(),
                               [&](const Copy& c) { return c.writer == p; });
        if (it == copies.end()) {
          copies.push_back({p, us, us});
        } else {
          it->sum += us;
          it->most = std::max(it->most, us);
        }
      }
      near.clear();
      for (const Copy& c : copies) {
        const double us = std::max(c.most, c.sum / copies_per_device);
        data_edges.push_back({c.writer, v, us});
        near.push_back({head[c.writer] + cost_of(c.writer) + us,
                        work_of(c.writer), time_of(c.writer), head[c.writer]});
      }
      start = std::max(start, MeetBound(near, slots));
    }
    if (transfers) {
      double most = 0;
      double sum = 0;
      for (const BufferUse& use : graph.Uses(v)) {
        const BufferId b = use.buffer;
        if (Writes(use.access)) last_writer[b] = v;
        if (graph.engine(v) == Engine::kHost || !graph.has_initial_data(b) ||
            stamp[b] == v) {
          continue;
        }
        stamp[b] = v;
        uses_host_data[v] = 1;
        const double us = upload_of(b);
        most = std::max(most, us);
        sum += us;
        if (!uploaded[b]) {
          uploaded[b] = 1;
          upload_work += us;
        }
      }
      start = std::max(start, std::max(most, sum / lanes));
    }
    // A join starts after all its ancestors' kernels have run.
    if (reach != nullptr && dag.Preds(v).size() > 1 && load_budget > 0) {
      start = std::max(start, load_of(reach->Ancestors(v), v, head, false));
    }
    head[v] = start;
  }
  // Backward: the least time from every node's end to the end of the
  // graph (its tail), outputs' downloads included.
  std::vector<double> tail(n, 0);
  double download_work = 0;
  double download_head = kInf;
  if (transfers) {
    for (BufferId b = 0; b < num_buffers; ++b) {
      const NodeId w = last_writer[b];
      if (!graph.buffer(b).output || w < 0 ||
          graph.engine(w) == Engine::kHost) {
        continue;
      }
      const double us =
          FastestHostLinkUs(*topology, devices, graph.buffer_bytes(b), true);
      tail[w] = std::max(tail[w], us);
      download_work += us;
      download_head =
          std::min(download_head, head[w] + std::max(graph.cost_us(w), 0.0));
    }
  }
  // By writer: its data edges, grouped.
  std::vector<int32_t> edge_start(transfers ? n + 1 : 0, 0);
  std::vector<DataEdge> edges_by_writer(data_edges.size());
  if (transfers) {
    for (const DataEdge& e : data_edges) ++edge_start[e.writer + 1];
    for (int v = 0; v < n; ++v) edge_start[v + 1] += edge_start[v];
    std::vector<int32_t> next(edge_start.begin(), edge_start.end() - 1);
    for (const DataEdge& e : data_edges) edges_by_writer[next[e.writer]++] = e;
  }
  for (auto it = dag.order.rbegin(); it != dag.order.rend(); ++it) {
    const NodeId v = *it;
    for (const NodeId s : dag.Succs(v)) {
      tail[v] = std::max(tail[v], std::max(graph.cost_us(s), 0.0) + tail[s]);
    }
    // And a fork's descendants' kernels all run after it ends.
    if (reach != nullptr && dag.Succs(v).size() > 1 && load_budget > 0) {
      tail[v] =
          std::max(tail[v], load_of(reach->Descendants(v), v, tail, true));
    }
    if (!transfers || edge_start[v] == edge_start[v + 1]) continue;
    // Each user of v's data is on v's device, or starts after a copy.
    near.clear();
    for (int32_t i = edge_start[v]; i < edge_start[v + 1]; ++i) {
      const NodeId s = edges_by_writer[i].user;
      near.push_back({edges_by_writer[i].us + cost_of(s) + tail[s], work_of(s),
                      time_of(s), tail[s]});
    }
    tail[v] = std::max(tail[v], MeetBound(near, slots));
  }

  // Host buffers whose initial contents kernels on more than one device
  // may read (uses before the buffer's first writer, in node order: later
  // ones are its descendants): one SpanGroup each (lower_bound_terms.h).
  // Each such kernel joins the group, among its buffers, whose buffer
  // reaches a second device last. Not where a host node, a control node
  // or a memory move reads those contents too: one of them may be the
  // first user, and then each device uploads the buffer from the host.
  std::vector<bounds::SpanGroup> groups;
  std::vector<int32_t> group_of_node;
  if (transfers && devices > 1) {
    // Each kernel's reads of initial contents, once per buffer, and by
    // buffer how many kernels make them and whether another node does.
    struct InitialRead {
      NodeId kernel;
      BufferId buffer;
    };
    std::vector<InitialRead> reads;
    std::vector<int32_t> readers(num_buffers, 0);
    std::vector<uint8_t> other_read(num_buffers, 0), settled(num_buffers, 0);
    std::vector<NodeId> last_reader(num_buffers, -1);
    for (NodeId v = 0; v < n; ++v) {
      const bool kernel = IsKernel(graph.engine(v)) &&
                          graph.node(v).control == nullptr &&
                          graph.memory_move(v) == MemoryMove::kNone;
      const bool other = graph.engine(v) == Engine::kHost ||
                         graph.node(v).control != nullptr ||
                         graph.memory_move(v) != MemoryMove::kNone;
      const absl::Span<const BufferUse> uses = graph.Uses(v);
      for (const BufferUse& use : uses) {
        const BufferId b = use.buffer;
        if (settled[b]) continue;
        if (other) other_read[b] = 1;
        if (!kernel || last_reader[b] == v) continue;
        last_reader[b] = v;
        ++readers[b];
        reads.push_back({v, b});
      }
      for (const BufferUse& use : uses) {
        if (Writes(use.access)) settled[use.buffer] = 1;
      }
    }
    std::vector<int32_t> group_of_buffer(num_buffers, -1);
    for (BufferId b = 0; b < num_buffers; ++b) {
      if (readers[b] < 2 || other_read[b] || !graph.has_initial_data(b)) {
        continue;
      }
      const uint64_t bytes = graph.buffer_bytes(b);
      // To a second device: over a peer link, or down and up again.
      const double delay = std::min(
          peer_us(bytes),
          FastestHostLinkUs(*topology, devices, bytes, true) + upload_of(b));
      if (!(delay > 0)) continue;
      group_of_buffer[b] = static_cast<int32_t>(groups.size());
      groups.push_back({upload_of(b), delay});
    }
    if (!groups.empty()) group_of_node.assign(n, -1);
    for (const InitialRead& read : reads) {
      const int32_t g = group_of_buffer[read.buffer];
      if (g < 0) continue;
      int32_t& mine = group_of_node[read.kernel];
      if (mine < 0 || groups[g].release + groups[g].delay >
                          groups[mine].release + groups[mine].delay) {
        mine = g;
      }
    }
  }

  LowerBoundTerms terms;
  // Per unit kind: its work, and the least head and tail of its work.
  double weighted_work = 0, kernel_time = 0, copy_work = 0;
  double kernel_head = kInf, kernel_tail = kInf;
  double copy_head = kInf, copy_tail = kInf;
  double upload_tail = kInf;  // after an upload: its consumer and tail
  std::vector<LongKernel> long_kernels;
  std::vector<KernelSpan> spans;
  for (NodeId v = 0; v < n; ++v) {
    const double cost = std::max(graph.cost_us(v), 0.0);
    terms.critical_path_us =
        std::max(terms.critical_path_us, head[v] + cost + tail[v]);
    if (uses_host_data[v]) upload_tail = std::min(upload_tail, cost + tail[v]);
    if (!(cost > 0)) continue;
    const Engine engine = graph.engine(v);
    // A control node's bodies take its device as a kernel does (the cost
    // model books it so).
    if (IsKernel(engine) || graph.is_control(v)) {
      const int32_t units = graph.occupancy_units(v);
      weighted_work += OccupancyOf(units) * cost;
      kernel_time += cost;
      kernel_head = std::min(kernel_head, head[v]);
      kernel_tail = std::min(kernel_tail, tail[v]);
      if (spans.size() <= bounds::kMaxWindowedKernels) {
        spans.push_back({head[v], tail[v], OccupancyOf(units) * cost, cost,
                         group_of_node.empty() ? -1 : group_of_node[v]});
      }
      if (units > kOccupancyUnits / 2) {
        long_kernels.push_back({cost, head[v], tail[v]});
      }
    } else if (engine == Engine::kCopy) {
      copy_work += cost;
      copy_head = std::min(copy_head, head[v]);
      copy_tail = std::min(copy_tail, tail[v]);
    }
  }
  // The busiest device runs at least its share of the work, starting no
  // earlier than the first kernel can and leaving at least the least tail.
  if (kernel_time > 0) {
    terms.kernel_work_us =
        kernel_head +
        std::max(weighted_work / devices,
                 kernel_time / devices /
                     std::max(options.max_concurrent_kernels, 1)) +
        kernel_tail;
    terms.kernel_work_us = std::max(
        terms.kernel_work_us,
        WindowedWork(spans, devices,
                     std::max(options.max_concurrent_kernels, 1), groups));
  }
  // Among the j * devices + 1 longest kernels that fill more than half a
  // device, some device runs j + 1 one after another.
  terms.long_kernels_us = bounds::LongKernelsBound(long_kernels, devices);
  // Copy engines: COPY nodes, uploads (each host buffer at least once)
  // and downloads, each over every device's engine of its kind.
  if (copy_work > 0) {
    terms.copy_work_us = copy_head + copy_work / lanes + copy_tail;
  }
  if (upload_work > 0) {
    terms.copy_work_us =
        std::max(terms.copy_work_us, upload_work / lanes + upload_tail);
  }
  if (download_work > 0) {
    terms.copy_work_us =
        std::max(terms.copy_work_us, download_head + download_work / lanes);
  }
  if (transfers) {
    bounds::TransferOrderTerms(graph, dag, options, *topology, head, tail,
                               reach.get(), terms);
  }
  terms.bound_us = std::max({terms.critical_path_us, terms.kernel_work_us,
                             terms.long_kernels_us, terms.copy_work_us,
                             terms.uploads_us, terms.downloads_us});
  return terms;
}

}  // namespace weft::scheduler
