#include "scheduler/lower_bound.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "scheduler/occupancy.h"

namespace weft::scheduler {
namespace {

// The longest kernels per device the long-kernel term looks at.
constexpr int kLongKernelsPerDevice = 64;
// Kernels the windowed work term looks at: beyond them its sorts would
// cost more than the rest of the bound, and the plain work term stands.
constexpr size_t kMaxWindowedKernels = size_t{1} << 16;

bool IsKernel(Engine e) {
  return e == Engine::kCompute || e == Engine::kCollective;
}

// Microseconds `bytes` take over the fastest link from the host to a
// device (to_host: from a device to the host).
double FastestHostLinkUs(const Topology& topology, int num_devices,
                         uint64_t bytes, bool to_host) {
  double best = std::numeric_limits<double>::infinity();
  for (int d = 0; d < num_devices; ++d) {
    best = std::min(best, to_host
                              ? topology.TransferUs(bytes, d, Topology::kHost)
                              : topology.TransferUs(bytes, Topology::kHost, d));
  }
  return best;
}

// Descendant and ancestor sets of a small DAG, each a bitset over issue
// positions, for the terms that weigh the work between two nodes. Memory
// and time grow as V^2 / 64, so graphs beyond kMaxNodes go without them.
class ReachSets {
 public:
  static constexpr int kMaxNodes = 4096;

  // REQUIRES: dag.num_nodes() <= kMaxNodes.
  explicit ReachSets(const Dag& dag)
      : n_(dag.num_nodes()),
        words_((n_ + 63) / 64),
        pos_(n_),
        desc_(static_cast<size_t>(n_) * words_, 0),
        anc_(static_cast<size_t>(n_) * words_, 0) {
    for (int i = 0; i < n_; ++i) pos_[dag.order[i]] = i;
    for (int i = n_ - 1; i >= 0; --i) {
      const NodeId v = dag.order[i];
      uint64_t* row = Row(desc_, v);
      row[i / 64] |= uint64_t{1} << (i % 64);
      for (const NodeId s : dag.Succs(v)) {
        const uint64_t* other = Row(desc_, s);
        for (int w = 0; w < words_; ++w) row[w] |= other[w];
      }
    }
    for (int i = 0; i < n_; ++i) {
      const NodeId v = dag.order[i];
      uint64_t* row = Row(anc_, v);
      row[i / 64] |= uint64_t{1} << (i % 64);
      for (const NodeId p : dag.Preds(v)) {
        const uint64_t* other = Row(anc_, p);
        for (int w = 0; w < words_; ++w) row[w] |= other[w];
      }
    }
  }

  int pos(NodeId v) const { return pos_[v]; }
  // `v` and every node after it / before it.
  const uint64_t* Descendants(NodeId v) const { return Row(desc_, v); }
  const uint64_t* Ancestors(NodeId v) const { return Row(anc_, v); }
  bool Has(const uint64_t* set, NodeId v) const {
    const int i = pos_[v];
    return (set[i / 64] >> (i % 64)) & 1;
  }
  // Calls f(position) for every position in a and (if not null) b.
  template <typename F>
  void ForEach(const uint64_t* a, const uint64_t* b, F f) const {
    for (int w = 0; w < words_; ++w) {
      uint64_t bits = b == nullptr ? a[w] : a[w] & b[w];
      while (bits != 0) {
        f(w * 64 + __builtin_ctzll(bits));
        bits &= bits - 1;
      }
    }
  }

 private:
  uint64_t* Row(std::vector<uint64_t>& sets, NodeId v) {
    return sets.data() + static_cast<size_t>(v) * words_;
  }
  const uint64_t* Row(const std::vector<uint64_t>& sets, NodeId v) const {
    return sets.data() + static_cast<size_t>(v) * words_;
  }

  const int n_;
  const int words_;
  std::vector<int> pos_;              // by NodeId
  std::vector<uint64_t> desc_, anc_;  // by NodeId, words_ each
};

// One transfer a bound term orders: its time and when it may start
// (release) or what must follow it (delivery).
struct Job {
  double us;
  double when;
};

// Jobs on `lanes` identical engines, each with a delivery time: the one
// of any set that ends last ends after the set's work over the lanes, and
// its delivery follows; each job ends after itself. The best such set is
// a prefix by decreasing delivery. Reorders `jobs`.
double DeliveryBound(std::vector<Job>& jobs, double lanes) {
  std::sort(jobs.begin(), jobs.end(),
            [](const Job& a, const Job& b) { return a.when > b.when; });
  double work = 0, best = 0;
  for (const Job& job : jobs) {
    work += job.us;
    best = std::max({best, work / lanes + job.when, job.us + job.when});
  }
  return best;
}

// Jobs on `lanes` identical engines, each with a release time: the jobs
// released at or after some time all run after it; each job runs after
// its own release. Reorders `jobs`.
double ReleaseBound(std::vector<Job>& jobs, double lanes) {
  std::sort(jobs.begin(), jobs.end(),
            [](const Job& a, const Job& b) { return a.when > b.when; });
  double work = 0, best = 0;
  for (const Job& job : jobs) {
    work += job.us;
    best = std::max({best, job.when + work / lanes, job.when + job.us});
  }
  return best;
}

// A kernel's work and where it may run: after its head, before its tail.
struct KernelSpan {
  double head, tail, work, time;
};

// The kernels whose head is at least h and whose tail is at least t all
// run between h and t before the end: the busiest device runs its share
// of their work in between. The largest such bound over a bounded number
// of values of h (every distinct head on small graphs) and every t: one
// pass over the kernels by decreasing tail per value of h. 0 for graphs
// of more than 65536 kernels. Reorders `spans`.
double WindowedWork(std::vector<KernelSpan>& spans, double devices,
                    double slots) {
  if (spans.empty() || spans.size() > kMaxWindowedKernels) return 0;
  const size_t n = spans.size();
  std::vector<double> heads(n);
  for (size_t i = 0; i < n; ++i) heads[i] = spans[i].head;
  std::sort(heads.begin(), heads.end(), std::greater<double>());
  std::sort(
      spans.begin(), spans.end(),
      [](const KernelSpan& a, const KernelSpan& b) { return a.tail > b.tail; });
  // Passes over up to n kernels: about 2^22 kernels visited in all.
  const size_t windows = std::clamp<size_t>((size_t{1} << 22) / n, 4, 64);
  const size_t step = std::max<size_t>(1, n / windows);
  double best = 0;
  for (size_t end = std::min(step, n);; end = std::min(end + step, n)) {
    // Every kernel with the same head as the last one taken.
    while (end < n && heads[end] == heads[end - 1]) ++end;
    const double h = heads[end - 1];
    double work = 0, time = 0;
    for (const KernelSpan& k : spans) {
      if (k.head < h) continue;
      work += k.work;
      time += k.time;
      best =
          std::max(best, h + std::max(work, time / slots) / devices + k.tail);
    }
    if (end == n) break;
  }
  return best;
}

// A neighbour of a node (a predecessor whose data it uses, or a successor
// that uses its data), for the bound on where they meet.
struct Neighbour {
  double apart;  // the node's bound if the neighbour is on another device
  double work;   // the neighbour's occupancy-weighted kernel work
  double time;   // and its kernel time
  double edge;   // the neighbour's head (or tail)
};

// The node's bound over every choice of the neighbours S on its device:
// those apart bound it by their `apart`; those in S run on one device, from
// the least head of S (or until the least tail of S), one device's worth of
// their work. For each choice the larger, and the least over the choices:
// S is a prefix by decreasing `apart`. Reorders `near`.
double MeetBound(std::vector<Neighbour>& near, double slots) {
  if (near.empty()) return 0;
  std::sort(
      near.begin(), near.end(),
      [](const Neighbour& a, const Neighbour& b) { return a.apart > b.apart; });
  double best = near[0].apart;  // none on the node's device
  double work = 0, time = 0;
  double edge = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < near.size(); ++k) {
    work += near[k].work;
    time += near[k].time;
    edge = std::min(edge, near[k].edge);
    const double outside = k + 1 < near.size() ? near[k + 1].apart : 0;
    best =
        std::min(best, std::max(outside, edge + std::max(work, time / slots)));
  }
  return best;
}

// The terms that order transfers (lower_bound.h): host data before its
// first user and what must follow that user, outputs after their last
// writer and the work that must precede it.
void TransferOrderTerms(const Graph& graph, const Dag& dag,
                        const LowerBoundOptions& options,
                        const Topology& topology,
                        const std::vector<double>& head,
                        const std::vector<double>& tail,
                        LowerBoundTerms& terms) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Positions the work-weighing terms may visit in all; beyond them the
  // terms go without the work between nodes (and stay valid).
  constexpr int64_t kVisitBudget = int64_t{1} << 26;
  const int devices = std::max(options.num_devices, 1);
  const double lanes = static_cast<double>(devices) *
                       std::max(options.copy_engines_per_device, 1);
  const double slots = std::max(options.max_concurrent_kernels, 1);
  const int n = graph.num_nodes();
  const int num_buffers = graph.num_buffers();
  auto cost = [&](NodeId v) { return std::max(graph.cost_us(v), 0.0); };
  auto on_device = [&](NodeId v) { return graph.engine(v) != Engine::kHost; };

  // By buffer: its first writer and last writer in program order (buffer
  // dependencies follow NodeId order: a use after the first writer is
  // its descendant).
  std::vector<NodeId> first_writer(num_buffers, -1);
  std::vector<NodeId> last_writer(num_buffers, -1);
  for (NodeId v = 0; v < n; ++v) {
    for (const BufferUse& use : graph.Uses(v)) {
      if (!Writes(use.access)) continue;
      if (first_writer[use.buffer] < 0) first_writer[use.buffer] = v;
      last_writer[use.buffer] = v;
    }
  }
  struct Output {
    NodeId writer;
    double us;
  };
  std::vector<Output> outputs;
  for (BufferId b = 0; b < num_buffers; ++b) {
    const NodeId w = last_writer[b];
    if (!graph.buffer(b).output || w < 0 || !on_device(w)) continue;
    outputs.push_back(
        {w, FastestHostLinkUs(topology, devices, graph.buffer_bytes(b), true)});
  }

  std::unique_ptr<ReachSets> reach;
  std::vector<double> work, time, kernel_tail, kernel_head;  // by position
  if (n <= ReachSets::kMaxNodes) {
    reach = std::make_unique<ReachSets>(dag);
    work.assign(n, 0);
    time.assign(n, 0);
    kernel_tail.assign(n, kInf);
    kernel_head.assign(n, kInf);
    for (NodeId v = 0; v < n; ++v) {
      if (!IsKernel(graph.engine(v)) || !(cost(v) > 0)) continue;
      const int i = reach->pos(v);
      work[i] = OccupancyOf(graph.occupancy_units(v)) * cost(v);
      time[i] = cost(v);
      kernel_tail[i] = tail[v];
      kernel_head[i] = head[v];
    }
  }
  int64_t budget = kVisitBudget;
  // Kernel work of a set over the devices (at most `slots` kernels at once
  // on each).
  auto spread = [&](double w, double t) {
    return std::max(w, t / slots) / devices;
  };

  // The least time from the start of node u to the end of the graph: its
  // own path, the kernel work of u and its descendants with the least tail
  // among them, and the downloads of the outputs they write last, each
  // after the work between u and its writer.
  std::vector<double> rest(n, -1);
  std::vector<Job> jobs;
  auto rest_of = [&](NodeId u) {
    if (rest[u] >= 0) return rest[u];
    double r = cost(u) + tail[u];
    if (reach != nullptr && budget > 0) {
      const uint64_t* below = reach->Descendants(u);
      double w = 0, t = 0, least_tail = kInf;
      reach->ForEach(below, nullptr, [&](int i) {
        w += work[i];
        t += time[i];
        least_tail = std::min(least_tail, kernel_tail[i]);
      });
      budget -= n;
      if (t > 0) r = std::max(r, spread(w, t) + least_tail);
      jobs.clear();
      for (const Output& o : outputs) {
        if (budget <= 0) break;
        if (!reach->Has(below, o.writer)) continue;
        double ow = 0, ot = 0;
        reach->ForEach(below, reach->Ancestors(o.writer), [&](int i) {
          ow += work[i];
          ot += time[i];
        });
        budget -= n;
        jobs.push_back({o.us, spread(ow, ot)});
      }
      if (!jobs.empty()) r = std::max(r, ReleaseBound(jobs, lanes));
    }
    rest[u] = r;
    return r;
  };

  // Host data: each buffer crosses a host link before the first device
  // node to use it starts, which is one of its users up to its first
  // writer (any device user, if a HOST node writes it first).
  std::vector<double> delivery(num_buffers, kInf);
  for (NodeId v = 0; v < n; ++v) {
    if (!on_device(v)) continue;
    for (const BufferUse& use : graph.Uses(v)) {
      const BufferId b = use.buffer;
      if (!graph.has_initial_data(b)) continue;
      const NodeId fw = first_writer[b];
      if (fw >= 0 && v > fw && on_device(fw)) continue;
      delivery[b] = std::min(delivery[b], rest_of(v));
    }
  }
  std::vector<Job> uploads;
  for (BufferId b = 0; b < num_buffers; ++b) {
    if (delivery[b] == kInf) continue;
    uploads.push_back(
        {FastestHostLinkUs(topology, devices, graph.buffer_bytes(b), false),
         delivery[b]});
  }
  if (!uploads.empty()) terms.uploads_us = DeliveryBound(uploads, lanes);

  // Outputs: each download starts after its last writer ends, which is
  // after the writer's path and after the kernel work of its ancestors
  // (from the least head among them).
  std::vector<Job> downloads;
  for (const Output& o : outputs) {
    double release = head[o.writer] + cost(o.writer);
    if (reach != nullptr && budget > 0) {
      double w = 0, t = 0, least_head = kInf;
      reach->ForEach(reach->Ancestors(o.writer), nullptr, [&](int i) {
        w += work[i];
        t += time[i];
        least_head = std::min(least_head, kernel_head[i]);
      });
      budget -= n;
      if (t > 0) release = std::max(release, least_head + spread(w, t));
    }
    downloads.push_back({o.us, release});
  }
  if (!downloads.empty()) terms.downloads_us = ReleaseBound(downloads, lanes);
}

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

  // Forward: the earliest start of every node (its head).
  std::vector<double> head(n, 0);
  std::vector<uint8_t> uses_host_data(n, 0);
  double upload_work = 0;
  for (const NodeId v : dag.order) {
    double start = transfers ? sole_uploads[v] : 0;
    for (const NodeId p : dag.Preds(v)) {
      start = std::max(start, head[p] + std::max(graph.cost_us(p), 0.0));
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

  LowerBoundTerms terms;
  // Per unit kind: its work, and the least head and tail of its work.
  double weighted_work = 0, kernel_time = 0, copy_work = 0;
  double kernel_head = kInf, kernel_tail = kInf;
  double copy_head = kInf, copy_tail = kInf;
  double upload_tail = kInf;  // after an upload: its consumer and tail
  struct LongKernel {
    double cost, head, tail;
  };
  std::vector<LongKernel> long_kernels;
  std::vector<KernelSpan> spans;
  for (NodeId v = 0; v < n; ++v) {
    const double cost = std::max(graph.cost_us(v), 0.0);
    terms.critical_path_us =
        std::max(terms.critical_path_us, head[v] + cost + tail[v]);
    if (uses_host_data[v]) upload_tail = std::min(upload_tail, cost + tail[v]);
    if (!(cost > 0)) continue;
    const Engine engine = graph.engine(v);
    if (IsKernel(engine)) {
      const int32_t units = graph.occupancy_units(v);
      weighted_work += OccupancyOf(units) * cost;
      kernel_time += cost;
      kernel_head = std::min(kernel_head, head[v]);
      kernel_tail = std::min(kernel_tail, tail[v]);
      if (spans.size() <= kMaxWindowedKernels) {
        spans.push_back({head[v], tail[v], OccupancyOf(units) * cost, cost});
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
    terms.kernel_work_us =
        std::max(terms.kernel_work_us,
                 WindowedWork(spans, devices,
                              std::max(options.max_concurrent_kernels, 1)));
  }
  // Among the j * devices + 1 longest kernels that fill more than half a
  // device, some device runs j + 1 one after another.
  if (static_cast<int>(long_kernels.size()) > devices) {
    // Only the longest kLongKernelsPerDevice x devices count: beyond them
    // the work term is as strong (and the bound stays valid with fewer
    // terms), and a full sort of millions of kernels would cost more than
    // the rest of the bound.
    const size_t keep =
        std::min(long_kernels.size(),
                 static_cast<size_t>(kLongKernelsPerDevice) * devices + 1);
    auto longer = [](const LongKernel& a, const LongKernel& b) {
      return a.cost > b.cost;
    };
    if (keep < long_kernels.size()) {
      std::nth_element(long_kernels.begin(), long_kernels.begin() + keep,
                       long_kernels.end(), longer);
    }
    std::sort(long_kernels.begin(), long_kernels.begin() + keep, longer);
    double least_head = kInf, least_tail = kInf;
    for (size_t i = 0; i < keep; ++i) {
      least_head = std::min(least_head, long_kernels[i].head);
      least_tail = std::min(least_tail, long_kernels[i].tail);
      if (i == 0 || i % devices != 0) continue;
      const size_t j = i / devices;
      terms.long_kernels_us = std::max(
          terms.long_kernels_us,
          least_head + static_cast<double>(j + 1) * long_kernels[i].cost +
              least_tail);
    }
  }
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
    TransferOrderTerms(graph, dag, options, *topology, head, tail, terms);
  }
  terms.bound_us = std::max({terms.critical_path_us, terms.kernel_work_us,
                             terms.long_kernels_us, terms.copy_work_us,
                             terms.uploads_us, terms.downloads_us});
  return terms;
}

}  // namespace weft::scheduler
