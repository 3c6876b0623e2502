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
  const double lanes =
      static_cast<double>(devices) * std::max(options.copy_engines_per_device, 1);
  const bool transfers = options.model_transfers;
  const int n = graph.num_nodes();
  const int num_buffers = graph.num_buffers();

  // Upload time of each host buffer (negative: not computed yet), and a
  // stamp so that each node counts a buffer once.
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

  LowerBoundTerms terms;
  std::vector<double> finish(n, 0);
  double weighted_work = 0;
  double kernel_time = 0;
  double copy_work = 0;
  double upload_work = 0;
  std::vector<double> long_kernels;
  for (const NodeId v : dag.order) {
    double start = 0;
    for (const NodeId p : dag.Preds(v)) start = std::max(start, finish[p]);
    const Engine engine = graph.engine(v);
    const double cost = std::max(graph.cost_us(v), 0.0);
    if (transfers) {
      double most = 0;
      double sum = 0;
      for (const BufferUse& use : graph.Uses(v)) {
        const BufferId b = use.buffer;
        if (Writes(use.access)) last_writer[b] = v;
        if (engine == Engine::kHost || !graph.has_initial_data(b) ||
            stamp[b] == v) {
          continue;
        }
        stamp[b] = v;
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
    finish[v] = start + cost;
    terms.critical_path_us = std::max(terms.critical_path_us, finish[v]);
    if (IsKernel(engine)) {
      const int32_t units = graph.occupancy_units(v);
      weighted_work += OccupancyOf(units) * cost;
      kernel_time += cost;
      if (units > kOccupancyUnits / 2 && cost > 0) long_kernels.push_back(cost);
    } else if (engine == Engine::kCopy) {
      copy_work += cost;
    }
  }
  if (transfers) {
    for (BufferId b = 0; b < num_buffers; ++b) {
      const NodeId w = last_writer[b];
      if (!graph.buffer(b).output || w < 0 ||
          graph.engine(w) == Engine::kHost) {
        continue;
      }
      terms.critical_path_us = std::max(
          terms.critical_path_us,
          finish[w] + FastestHostLinkUs(*topology, devices,
                                        graph.buffer_bytes(b), true));
    }
  }
  terms.kernel_work_us =
      std::max(weighted_work / devices,
               kernel_time / devices / std::max(options.max_concurrent_kernels, 1));
  // Among the j * devices + 1 longest kernels that fill more than half a
  // device, some device runs j + 1 of them one after another.
  if (static_cast<int>(long_kernels.size()) > devices) {
    std::sort(long_kernels.begin(), long_kernels.end(), std::greater<>());
    for (size_t j = 1; j * devices < long_kernels.size(); ++j) {
      terms.long_kernels_us =
          std::max(terms.long_kernels_us,
                   static_cast<double>(j + 1) * long_kernels[j * devices]);
    }
  }
  terms.copy_work_us = std::max(copy_work, upload_work) / lanes;
  terms.bound_us = std::max({terms.critical_path_us, terms.kernel_work_us,
                             terms.long_kernels_us, terms.copy_work_us});
  return terms;
}

}  // namespace weft::scheduler
