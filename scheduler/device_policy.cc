#include "scheduler/device_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "scheduler/huge_pages.h"

namespace weft::scheduler {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

bool NoWorse(const DeviceDecision& restricted, const DeviceDecision& overall) {
  if (!overall.decisive) return true;  // the policy had no preference
  if (!restricted.decisive) return false;
  const double slack = 1e-9 * std::max(1.0, std::fabs(overall.score));
  return restricted.score <= overall.score + slack;
}

DeviceDecision RoundRobinDecision(absl::Span<const int> candidates,
                                  const PlacementState& state, bool fallback) {
  DeviceDecision d;
  d.device = state.PeekRoundRobin(candidates);
  d.choice.why = DeviceChoice::Why::kRoundRobin;
  d.choice.fallback = fallback;
  return d;
}

}  // namespace

// ---------------------------------------------------------------------------
// Presence and bandwidth

DataPresence MeasurePresence(NodeId v, absl::Span<const int> candidates,
                             const PlacementState& state) {
  DataPresence out;
  out.present.assign(candidates.size(), 0);
  const DataLocations& loc = state.locations();
  for (const BufferUse& use : state.graph().Uses(v)) {
    const double bytes =
        static_cast<double>(state.graph().buffer_bytes(use.buffer));
    out.total += bytes;
    if (loc.OnSomeDevice(use.buffer)) out.on_some_device = true;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (loc.OnDevice(use.buffer, candidates[i])) out.present[i] += bytes;
    }
  }
  return out;
}

double LinkBandwidth(const Topology& topology, DataLocations::Mask where,
                     int target, bool best) {
  if ((where >> target) & 1) return kInfinity;
  double bw = best ? 0 : kInfinity;
  ForEachMemory(where, [&](int from) {
    const double link = topology.gbps(from, target);
    bw = best ? std::max(bw, link) : std::min(bw, link);
  });
  return bw;
}

// ---------------------------------------------------------------------------
// Policies

DeviceDecision RoundRobinPolicy::Decide(NodeId v,
                                        absl::Span<const int> candidates,
                                        const PlacementState& state) const {
  return RoundRobinDecision(candidates, state, /*fallback=*/false);
}

DeviceDecision StreamAwarePolicy::Decide(NodeId v,
                                         absl::Span<const int> candidates,
                                         const PlacementState& state) const {
  DeviceDecision d;
  int best = -1;
  for (int c : candidates) {
    const int busy = state.BusyStreams(c);
    if (best < 0 || busy < best) {
      best = busy;
      d.device = c;
    }
  }
  d.decisive = true;
  d.score = best;
  d.choice.why = DeviceChoice::Why::kFewestBusyStreams;
  d.choice.value = best;
  return d;
}

DeviceDecision MinTransferSizePolicy::Decide(
    NodeId v, absl::Span<const int> candidates,
    const PlacementState& state) const {
  const DataPresence presence = MeasurePresence(v, candidates, state);
  const double threshold = state.context().data_threshold;
  bool above = false;
  for (double p : presence.present) {
    if (presence.total > 0 && p / presence.total > threshold) above = true;
  }
  if (!above) return RoundRobinDecision(candidates, state, true);
  DeviceDecision d;
  size_t best = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (presence.present[i] > presence.present[best]) best = i;
  }
  d.device = candidates[best];
  d.decisive = true;
  d.score = -presence.present[best];
  d.choice.why = DeviceChoice::Why::kMostDataPresent;
  d.choice.value = presence.present[best];
  d.choice.total = presence.total;
  return d;
}

DeviceDecision TransferTimePolicy::Decide(NodeId v,
                                          absl::Span<const int> candidates,
                                          const PlacementState& state) const {
  const DataPresence presence = MeasurePresence(v, candidates, state);
  if (!presence.on_some_device || presence.total <= 0) {
    return RoundRobinDecision(candidates, state, true);
  }
  const double threshold = state.context().data_threshold;
  DeviceDecision d;
  bool found = false;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (presence.present[i] / presence.total <= threshold) continue;
    const int target = candidates[i];
    double time = 0;
    for (const BufferUse& use : state.graph().Uses(v)) {
      const double bw =
          LinkBandwidth(state.topology(), state.locations().mask(use.buffer),
                        target, best_link_);
      if (std::isinf(bw)) continue;
      const double bytes =
          static_cast<double>(state.graph().buffer_bytes(use.buffer));
      time += bw > 0 ? bytes / (bw * 1e3) : kInfinity;
    }
    if (!found || time < d.score) {
      found = true;
      d.device = target;
      d.score = time;
    }
  }
  if (!found) return RoundRobinDecision(candidates, state, true);
  d.decisive = true;
  d.choice.why = DeviceChoice::Why::kMinTransferTime;
  d.choice.value = d.score;
  return d;
}

DeviceDecision MinFinishTimePolicy::Decide(NodeId v,
                                           absl::Span<const int> candidates,
                                           const PlacementState& state) const {
  DeviceDecision d;
  bool found = false;
  for (int c : candidates) {
    const double finish = state.EstimateFinish(v, c);
    if (!found || finish < d.score) {
      found = true;
      d.device = c;
      d.score = finish;
    }
  }
  d.decisive = true;
  d.choice.why = DeviceChoice::Why::kMinFinishTime;
  d.choice.value = d.score;
  return d;
}

DeviceDecision LookaheadFinishTimePolicy::Decide(
    NodeId v, absl::Span<const int> candidates,
    const PlacementState& state) const {
  DeviceDecision d;
  bool found = false;
  double finish = 0;
  for (int c : candidates) {
    const double f = state.EstimateFinish(v, c);
    const double score = f + state.Lookahead(v, c);
    if (!found || score < d.score) {
      found = true;
      d.device = c;
      d.score = score;
      finish = f;
    }
  }
  d.decisive = true;
  d.choice.why = DeviceChoice::Why::kLookaheadFinishTime;
  d.choice.value = finish;
  d.choice.total = d.score - finish;
  return d;
}

// ---------------------------------------------------------------------------
// The walk

namespace {

// LOOKAHEAD_FINISH_TIME on a graph of more than kMaxModelledPlacementNodes
// nodes (device_policy.h): each unpinned, unlabelled node goes where it
// would finish first if each device ran its kernels (and its COPY nodes)
// back to back at their occupancy, after its predecessors' estimated
// finish and its inputs' copies from their fastest holder. O(uses x
// devices) arithmetic per node, with no timelines and no look ahead.
DeviceAssignment AssignByLoad(const Graph& graph, const Dag& dag,
                              const DeviceContext& context,
                              const Topology& topology) {
  const int n = graph.num_nodes();
  const int devices = context.num_devices;
  DeviceAssignment out;
  AssignHuge(out.device, n, -1);
  if (context.record_choices) out.choice.resize(n);
  std::vector<double> finish;
  AssignHuge(finish, n, 0.0);
  // By device: when its kernels and its COPY nodes have run, back to back.
  std::vector<double> kernels(devices, 0), copies(devices, 0);
  DataLocations locations(graph.num_buffers());
  std::vector<uint8_t> written(graph.num_buffers(), 0);
  std::vector<double> arrival(devices);
  // By target device: the last copy time worked out, for `bytes` held in
  // `where`. Buffers of one size held in the same memories are common, and
  // each takes a division per holder to work out.
  struct Transfer {
    uint64_t bytes = 0;
    DataLocations::Mask where = 0;
    double us = kInfinity;  // held nowhere: never there
  };
  std::vector<Transfer> last_transfer(devices);
  absl::flat_hash_map<absl::string_view, std::pair<int, NodeId>> labels;
  for (const NodeId v :
       context.walk_order != nullptr ? *context.walk_order : dag.order) {
    double ready = 0;
    for (const NodeId p : dag.Preds(v)) ready = std::max(ready, finish[p]);
    const Engine engine = graph.engine(v);
    const double cost = std::max(graph.cost_us(v), 0.0);
    const double share =
        engine == Engine::kCopy ? 1.0 : OccupancyOf(graph.occupancy_units(v));
    const absl::Span<const BufferUse> uses = graph.Uses(v);
    // When v's inputs can be on each device: after its predecessors and
    // the copies, in use order, of what is not there yet.
    arrival.assign(devices, ready);
    // A control node's bodies run their kernels over its buffers on its
    // device, as a compute node would.
    const bool control = graph.is_control(v);
    if (engine != Engine::kHost || control) {
      for (const BufferUse& use : uses) {
        const BufferId b = use.buffer;
        if (!written[b] && !graph.has_initial_data(b)) continue;
        const DataLocations::Mask where = locations.mask(b);
        const uint64_t bytes = graph.buffer_bytes(b);
        for (int d = 0; d < devices; ++d) {
          if ((where >> d) & 1) continue;
          Transfer& transfer = last_transfer[d];
          if (transfer.bytes != bytes || transfer.where != where) {
            double us = kInfinity;
            ForEachMemory(where, [&](int from) {
              us = std::min(us, topology.TransferUs(bytes, from, d));
            });
            transfer = {bytes, where, us};
          }
          arrival[d] += transfer.us;
        }
      }
    }
    auto finish_on = [&](int d) {
      const double busy = engine == Engine::kCopy               ? copies[d]
                          : engine == Engine::kHost && !control ? 0
                                                                : kernels[d];
      return std::max(arrival[d], busy) + cost;
    };
    DeviceChoice choice;
    int device = -1;
    double end = 0;  // v's finish on `device`
    const bool labelled = graph.has_label(v);
    auto label =
        labelled ? labels.find(graph.node(v).stream_label) : labels.end();
    if (graph.pin(v) >= 0) {
      device = graph.pin(v);
      choice.why = DeviceChoice::Why::kPinned;
      end = finish_on(device);
    } else if (label != labels.end()) {
      device = label->second.first;
      choice.why = DeviceChoice::Why::kLabel;
      choice.related = label->second.second;
      end = finish_on(device);
    } else {
      end = kInfinity;
      for (int d = 0; d < devices; ++d) {
        const double f = finish_on(d);
        if (f < end) {
          end = f;
          device = d;
        }
      }
      choice.why = DeviceChoice::Why::kMinFinishTime;
      choice.value = end;
    }
    if (labelled) {
      labels.emplace(graph.node(v).stream_label, std::make_pair(device, v));
    }
    finish[v] = end;
    if (engine == Engine::kCopy) {
      copies[device] = end;
    } else if (engine != Engine::kHost || control) {
      kernels[device] = std::max(kernels[device], end - cost) + share * cost;
    }
    for (const BufferUse& use : uses) {
      if (Writes(use.access)) written[use.buffer] = 1;
    }
    locations.Apply(uses, device);
    out.device[v] = device;
    if (context.record_choices) out.choice[v] = choice;
  }
  return out;
}

}  // namespace

absl::StatusOr<DeviceAssignment> DevicePolicy::Assign(
    const Graph& graph, const Dag& dag, const DeviceContext& context) const {
  if (context.num_devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.num_devices: need at least one device, got ",
                     context.num_devices));
  }
  if (context.num_devices > DataLocations::kMaxDevices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.num_devices: at most ", DataLocations::kMaxDevices,
        " devices, got ", context.num_devices));
  }
  if (!context.busy_streams.empty() &&
      static_cast<int>(context.busy_streams.size()) != context.num_devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.busy_streams: has ", context.busy_streams.size(),
                     " entries for ", context.num_devices, " devices"));
  }
  std::unique_ptr<Topology> default_topology;
  const Topology* topology = context.topology;
  if (topology == nullptr) {
    default_topology =
        std::make_unique<Topology>(Topology::Default(context.num_devices));
    topology = default_topology.get();
  } else if (topology->num_devices() < context.num_devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.topology: describes ", topology->num_devices(),
                     " devices, the plan has ", context.num_devices));
  }

  if (kind() == DevicePolicyKind::kLookaheadFinishTime &&
      graph.num_nodes() > kMaxModelledPlacementNodes) {
    return AssignByLoad(graph, dag, context, *topology);
  }
  const bool data_aware = kind() != DevicePolicyKind::kRoundRobin &&
                          kind() != DevicePolicyKind::kStreamAware;
  const bool finish_times = kind() == DevicePolicyKind::kMinFinishTime ||
                            kind() == DevicePolicyKind::kLookaheadFinishTime;
  PlacementState state(graph, dag, context, *topology, finish_times, data_aware,
                       kind() == DevicePolicyKind::kStreamAware,
                       kind() == DevicePolicyKind::kLookaheadFinishTime);
  DeviceAssignment out;
  if (context.record_choices) out.choice.resize(graph.num_nodes());
  DeviceChoice ignored;
  std::vector<int> all(context.num_devices);
  for (int d = 0; d < context.num_devices; ++d) all[d] = d;
  std::vector<int> parents;
  // Label -> (device, the first node with the label).
  absl::flat_hash_map<absl::string_view, std::pair<int, NodeId>> labels;
  for (NodeId v :
       context.walk_order != nullptr ? *context.walk_order : dag.order) {
    DeviceChoice& choice = context.record_choices ? out.choice[v] : ignored;
    const bool labelled = graph.has_label(v);
    int device;
    if (graph.pin(v) >= 0) {
      device = graph.pin(v);
      choice.why = DeviceChoice::Why::kPinned;
    } else if (auto it = labelled ? labels.find(graph.node(v).stream_label)
                                  : labels.end();
               it != labels.end()) {
      device = it->second.first;
      choice.why = DeviceChoice::Why::kLabel;
      choice.related = it->second.second;
    } else if (context.fixed_devices != nullptr &&
               (*context.fixed_devices)[v] >= 0) {
      const int fixed = (*context.fixed_devices)[v];
      DeviceDecision decision =
          Decide(v, absl::MakeConstSpan(&fixed, 1), state);
      if (!decision.decisive) state.AdvanceRoundRobin();
      device = fixed;
      if (context.record_choices) choice = decision.choice;
    } else {
      DeviceDecision decision = Decide(v, all, state);
      if (context.restrict_to_parent_devices && !dag.Preds(v).empty()) {
        parents.clear();
        for (NodeId p : dag.Preds(v)) parents.push_back(state.device(p));
        std::sort(parents.begin(), parents.end());
        parents.erase(std::unique(parents.begin(), parents.end()),
                      parents.end());
        if (!std::binary_search(parents.begin(), parents.end(),
                                decision.device)) {
          DeviceDecision restricted = Decide(v, parents, state);
          if (NoWorse(restricted, decision)) {
            decision = restricted;
            decision.choice.parents_only = true;
          }
        }
      }
      if (!decision.decisive) state.AdvanceRoundRobin();
      device = decision.device;
      if (context.record_choices) choice = decision.choice;
    }
    if (labelled) {
      labels.emplace(graph.node(v).stream_label, std::make_pair(device, v));
    }
    state.Place(v, device);
  }
  out.device = state.TakeDevices();
  out.start_us = state.TakeStartTimes();
  return out;
}

absl::StatusOr<std::unique_ptr<DevicePolicy>> CreateDevicePolicy(
    DevicePolicyKind kind) {
  switch (kind) {
    case DevicePolicyKind::kRoundRobin:
      return std::make_unique<RoundRobinPolicy>();
    case DevicePolicyKind::kStreamAware:
      return std::make_unique<StreamAwarePolicy>();
    case DevicePolicyKind::kMinTransferSize:
      return std::make_unique<MinTransferSizePolicy>();
    case DevicePolicyKind::kMinMinTransferTime:
      return std::make_unique<TransferTimePolicy>(/*best_link=*/true);
    case DevicePolicyKind::kMinMaxTransferTime:
      return std::make_unique<TransferTimePolicy>(/*best_link=*/false);
    case DevicePolicyKind::kMinFinishTime:
      return std::make_unique<MinFinishTimePolicy>();
    case DevicePolicyKind::kLookaheadFinishTime:
      return std::make_unique<LookaheadFinishTimePolicy>();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "options.device_policy: unknown device policy ", static_cast<int>(kind)));
}

}  // namespace weft::scheduler
