// PlacementState (device_policy.h): the walk's model of the machine.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "scheduler/device_policy.h"

namespace weft::scheduler {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

}  // namespace

PlacementState::PlacementState(const Graph& graph, const Dag& dag,
                               const DeviceContext& context,
                               const Topology& topology,
                               bool track_finish_times, bool track_locations,
                               bool track_streams, bool lookahead)
    : graph_(graph),
      dag_(dag),
      context_(context),
      topology_(topology),
      locations_(track_locations ? graph.num_buffers() : 0),
      device_(graph.num_nodes(), -1),
      opened_(context.num_devices, 0),
      handed_(track_streams ? graph.num_nodes() : 0, 0),
      track_streams_(track_streams),
      track_locations_(track_locations),
      track_finish_(track_finish_times),
      finish_(track_finish_times ? graph.num_nodes() : 0, 0),
      start_(track_finish_times ? graph.num_nodes() : 0, 0) {
  if (!track_finish_) return;
  const int lanes = std::max(context.copy_engines_per_device, 1);
  copy_units_ = std::max<int32_t>(1, kOccupancyUnits / lanes);
  kernels_.reserve(context.num_devices);
  uploads_.reserve(context.num_devices);
  peer_copies_.reserve(context.num_devices);
  for (int d = 0; d < context.num_devices; ++d) {
    kernels_.emplace_back(std::max(context.max_concurrent_kernels, 1));
    uploads_.emplace_back(lanes);
    peer_copies_.emplace_back(lanes);
  }
  written_.assign(graph.num_buffers(), 0);
  written_at_.assign(graph.num_buffers(), -1);
  used_.assign(graph.num_buffers(), 0);
  upload_stream_.assign(context.num_devices, 0);
  if (lookahead && context.num_devices > 1) ComputeLookahead();
}

int PlacementState::PeekRoundRobin(absl::Span<const int> candidates) const {
  // Usually every device is a candidate, and the counter is in range.
  const size_t at = static_cast<size_t>(next_);
  return candidates[at < candidates.size() ? at : at % candidates.size()];
}

int PlacementState::BusyStreams(int device) const {
  const int others =
      context_.busy_streams.empty() ? 0 : context_.busy_streams[device];
  return others + opened_[device];
}

const OccupancyTimeline* PlacementState::UnitOf(NodeId v, int device) const {
  switch (graph_.engine(v)) {
    case Engine::kCompute:
    case Engine::kCollective:
      return &kernels_[device];
    case Engine::kCopy:
      return &peer_copies_[device];
    case Engine::kHost:
      // A control node's bodies run their kernels on its device.
      return graph_.is_control(v) ? &kernels_[device] : nullptr;
  }
  return nullptr;
}

bool PlacementState::EagerCopiesReach(NodeId v) const {
  return !graph_.is_control(v) ||
         (context_.bodies_on_one_device && BodiesRunOnItsDevice(graph_, v));
}

OccupancyTimeline* PlacementState::UnitOf(NodeId v, int device) {
  return const_cast<OccupancyTimeline*>(
      static_cast<const PlacementState*>(this)->UnitOf(v, device));
}

double PlacementState::Transfers(NodeId v, int device, double ready) const {
  return const_cast<PlacementState*>(this)->Transfers(v, device, ready,
                                                      /*book=*/false);
}

double PlacementState::Transfers(NodeId v, int device, double ready,
                                 bool book) {
  // A host node uses host memory; a control node's bodies use its
  // buffers on its device.
  if (graph_.engine(v) == Engine::kHost && !graph_.is_control(v)) {
    return ready;
  }
  double t = ready;
  double eager_end = 0;
  // Whether v's inputs from other devices may come by eager copies.
  const bool eager_reader = context_.eager_copies &&
                            graph_.engine(v) != Engine::kCopy &&
                            EagerCopiesReach(v);
  const absl::Span<const BufferUse> uses = graph_.Uses(v);
  const int devices = context_.num_devices;
  auto arrival = [&](BufferId b, int at) {
    const auto it = arrival_.find(int64_t{b} * devices + at);
    return it == arrival_.end() ? 0.0 : it->second;
  };
  for (size_t i = 0; i < uses.size(); ++i) {
    const BufferId b = uses[i].buffer;
    if (locations_.OnDevice(b, device)) {
      t = std::max(t, arrival(b, device));
      continue;
    }
    // A buffer used twice moves once (nodes have few arguments).
    bool seen = false;
    for (size_t j = 0; j < i; ++j) seen |= uses[j].buffer == b;
    if (seen) continue;
    const DataLocations::Mask mask = locations_.mask(b);
    const uint64_t bytes = graph_.buffer_bytes(b);
    bool from_host = true;
    double us = 0;
    // When the data is there to leave (a device it came to by a
    // transfer; the host from the start).
    double source_ready = 0;
    if (!written_[b] && !graph_.has_initial_data(b)) {
      continue;  // initial zeros or fill: created in place
    }
    if ((mask & ~DataLocations::kHostBit) != 0) {
      // From the fastest device holding it (or the host, if faster), as
      // the executor copies it from where its latest version went first,
      // once it is there.
      us = kInfinity;
      ForEachMemory(mask, [&](int from) {
        const double x = topology_.TransferUs(bytes, from, device);
        if (x < us) {
          us = x;
          from_host = from == Topology::kHost;
          source_ready = from_host ? 0 : arrival(b, from);
        }
      });
    } else {
      us = topology_.TransferUs(bytes, Topology::kHost, device);
    }
    OccupancyTimeline& engine =
        from_host ? uploads_[device] : peer_copies_[device];
    // The first use of host data uploads it from the job's start, on the
    // device's upload stream (one upload after another, in issue order).
    const bool prefetched =
        from_host && !used_[b] && graph_.has_initial_data(b);
    // An eager copy from another device leaves once its writer ends.
    const bool eager = !from_host && eager_reader && written_at_[b] >= 0;
    // The node's eager copies share the device's copy engine: each after
    // the one before (an estimate books none of them).
    double eager_from = std::max(written_at_[b], eager_end);
    double lazy_from = std::max(t, source_ready);
    double& from = prefetched ? upload_stream_[device]
                   : eager    ? eager_from
                              : lazy_from;
    const double start = book ? engine.Book(from, us, copy_units_)
                              : engine.EarliestStart(from, us, copy_units_);
    if (prefetched) {
      if (book) upload_stream_[device] = start + us;
      t = std::max(t, start + us);
    } else if (eager) {
      eager_end = start + us;
      t = std::max(t, eager_end);
    } else {
      t = start + us;
    }
    if (book) arrival_[int64_t{b} * devices + device] = start + us;
  }
  return t;
}

double PlacementState::Ready(NodeId v) const {
  if (ready_node_ != v) {
    double ready = 0;
    for (NodeId p : dag_.Preds(v)) ready = std::max(ready, finish_[p]);
    ready_node_ = v;
    ready_us_ = ready;
  }
  return ready_us_;
}

double PlacementState::EstimateFinish(NodeId v, int device) const {
  if (!track_finish_) return graph_.cost_us(v);
  const double t = Transfers(v, device, Ready(v));
  const double cost = std::max(graph_.cost_us(v), 0.0);
  const OccupancyTimeline* unit = UnitOf(v, device);
  const double start =
      unit == nullptr ? t
                      : unit->EarliestStart(t, cost, graph_.occupancy_units(v));
  return start + cost;
}

void PlacementState::ComputeLookahead() {
  const int devices = context_.num_devices;
  const int n = graph_.num_nodes();
  lookahead_.assign(static_cast<size_t>(n) * devices, 0);
  // The fastest link between two devices, for what a node hands on.
  double peer_gbps = 0;
  for (int a = 0; a < devices; ++a) {
    for (int b = 0; b < devices; ++b) {
      if (a != b) peer_gbps = std::max(peer_gbps, topology_.gbps(a, b));
    }
  }
  std::vector<double> best(n, 0);  // min over devices of OCT + cost
  std::vector<NodeId> writer(graph_.num_buffers(), -1);
  for (auto it = dag_.order.rbegin(); it != dag_.order.rend(); ++it) {
    const NodeId v = *it;
    for (const BufferUse& use : graph_.Uses(v)) {
      if (Writes(use.access)) writer[use.buffer] = v;
    }
    double* row = &lookahead_[static_cast<size_t>(v) * devices];
    for (const NodeId s : dag_.Succs(v)) {
      // Bytes of what v wrote that s uses.
      uint64_t bytes = 0;
      for (const BufferUse& use : graph_.Uses(s)) {
        if (writer[use.buffer] == v) bytes += graph_.buffer_bytes(use.buffer);
      }
      const double move =
          peer_gbps > 0 ? static_cast<double>(bytes) / (peer_gbps * 1e3) : 0;
      const double cost = std::max(graph_.cost_us(s), 0.0);
      const double* next = &lookahead_[static_cast<size_t>(s) * devices];
      for (int d = 0; d < devices; ++d) {
        row[d] = std::max(row[d], std::min(next[d] + cost, best[s] + move));
      }
    }
    best[v] = *std::min_element(row, row + devices) +
              std::max(graph_.cost_us(v), 0.0);
  }
}

void PlacementState::Place(NodeId v, int device) {
  if (track_finish_) {
    const double t = Transfers(v, device, Ready(v), /*book=*/true);
    const double cost = std::max(graph_.cost_us(v), 0.0);
    OccupancyTimeline* unit = UnitOf(v, device);
    const double start =
        unit == nullptr ? t : unit->Book(t, cost, graph_.occupancy_units(v));
    finish_[v] = start + cost;
    start_[v] = start;
    const bool device_node =
        UnitOf(v, device) != nullptr && EagerCopiesReach(v);
    for (const BufferUse& use : graph_.Uses(v)) {
      if (Writes(use.access)) {
        written_[use.buffer] = 1;
        written_at_[use.buffer] = device_node ? finish_[v] : -1;
        // The new version's readers follow v.
        arrival_.erase(int64_t{use.buffer} * context_.num_devices + device);
      }
      used_[use.buffer] = 1;
    }
  }
  device_[v] = device;
  if (track_locations_) locations_.Apply(graph_.Uses(v), device);
  if (!track_streams_) return;
  // GrCUDA's disjoint stream rule: inherit the stream of the first
  // predecessor on this device that has not handed it on yet.
  bool inherited = false;
  for (NodeId p : dag_.Preds(v)) {
    if (device_[p] == device && !handed_[p]) {
      handed_[p] = 1;
      inherited = true;
      break;
    }
  }
  if (!inherited) ++opened_[device];
}
}  // namespace weft::scheduler
