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

bool IsKernel(Engine e) {
  return e == Engine::kCompute || e == Engine::kCollective;
}

// Microseconds `bytes` take over the fastest link from the host to a
// device (to_host: from a device to the host).
double FastestHostLinkUs(const Topology& topology, int num_devices,
                         uint64_t bytes, bool to_host) {
  double best = std::numeric_limits<double>::infinity();
  for (int d = 0; d < num_devices; ++d) {
    best = std::min(best, to_host ? topology.TransferUs(bytes, d, Topology::kHost)
                                  : topology.TransferUs(bytes, Topology::kHost, d));
  }
  return best;
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
      upload_us[b] = FastestHostLinkUs(*topology, devices,
                                       graph.buffer_bytes(b), false);
    }
    return upload_us[b];
  };

  // Forward: the earliest start of every node (its head).
  std::vector<double> head(n, 0);
  std::vector<uint8_t> uses_host_data(n, 0);
  double upload_work = 0;
  for (const NodeId v : dag.order) {
    double start = 0;
    for (const NodeId p : dag.Preds(v)) {
      start = std::max(start, head[p] + std::max(graph.cost_us(p), 0.0));
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
      const double us = FastestHostLinkUs(*topology, devices,
                                          graph.buffer_bytes(b), true);
      tail[w] = std::max(tail[w], us);
      download_work += us;
      download_head =
          std::min(download_head, head[w] + std::max(graph.cost_us(w), 0.0));
    }
  }
  for (auto it = dag.order.rbegin(); it != dag.order.rend(); ++it) {
    const NodeId v = *it;
    for (const NodeId s : dag.Succs(v)) {
      tail[v] = std::max(tail[v], std::max(graph.cost_us(s), 0.0) + tail[s]);
    }
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
  }
  // Among the j * devices + 1 longest kernels that fill more than half a
  // device, some device runs j + 1 one after another.
  if (static_cast<int>(long_kernels.size()) > devices) {
    // Only the longest kLongKernelsPerDevice x devices count: beyond them
    // the work term is as strong (and the bound stays valid with fewer
    // terms), and a full sort of millions of kernels would cost more than
    // the rest of the bound.
    const size_t keep = std::min(
        long_kernels.size(),
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
          terms.long_kernels_us, least_head +
                                     static_cast<double>(j + 1) *
                                         long_kernels[i].cost +
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
  terms.bound_us = std::max({terms.critical_path_us, terms.kernel_work_us,
                             terms.long_kernels_us, terms.copy_work_us});
  return terms;
}

}  // namespace weft::scheduler
