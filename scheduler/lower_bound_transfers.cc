#include "scheduler/lower_bound_transfers.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "scheduler/lower_bound_terms.h"
#include "scheduler/occupancy.h"

namespace weft::scheduler::bounds {
namespace {

bool IsKernel(Engine e) {
  return e == Engine::kCompute || e == Engine::kCollective;
}

}  // namespace

void TransferOrderTerms(const Graph& graph, const Dag& dag,
                        const LowerBoundOptions& options,
                        const Topology& topology,
                        const std::vector<double>& head,
                        const std::vector<double>& tail, const ReachSets* reach,
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

  std::vector<double> work, time, kernel_tail, kernel_head;  // by position
  if (reach != nullptr) {
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
  // writer (any device user, if a HOST node writes it first). The first
  // writer comes after the device nodes that read the buffer before it,
  // so it is the first only where none does.
  std::vector<double> delivery(num_buffers, kInf);
  std::vector<uint8_t> read_before(num_buffers, 0);
  for (NodeId v = 0; v < n; ++v) {
    if (!on_device(v)) continue;
    for (const BufferUse& use : graph.Uses(v)) {
      const BufferId b = use.buffer;
      if (!graph.has_initial_data(b)) continue;
      const NodeId fw = first_writer[b];
      if (fw >= 0 && v > fw && on_device(fw)) continue;
      if (v == fw && read_before[b]) continue;
      if (v != fw) read_before[b] = 1;
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

}  // namespace weft::scheduler::bounds
