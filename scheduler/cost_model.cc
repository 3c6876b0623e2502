#include "scheduler/cost_model.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <queue>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "scheduler/huge_pages.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler {

CostLevels ComputeCostLevels(const Graph& graph, const Dag& dag) {
  const int n = dag.num_nodes();
  CostLevels levels;
  ReserveHuge(levels.top_us, n);
  ReserveHuge(levels.bottom_us, n);
  levels.top_us.assign(n, 0);
  levels.bottom_us.assign(n, 0);
  levels.bottom_hops.assign(n, 0);
  for (NodeId v : dag.order) {
    double top = 0;
    for (NodeId p : dag.Preds(v)) {
      top = std::max(top, levels.top_us[p] + graph.cost_us(p));
    }
    levels.top_us[v] = top;
    const double cost = graph.cost_us(v);
    levels.critical_path_us = std::max(levels.critical_path_us, top + cost);
    levels.total_work_us += cost;
    const Engine engine = graph.engine(v);
    if (engine == Engine::kCompute || engine == Engine::kCollective) {
      levels.device_work_us += cost;
    }
  }
  for (auto it = dag.order.rbegin(); it != dag.order.rend(); ++it) {
    const NodeId v = *it;
    double below = 0;
    int32_t hops = 0;
    for (NodeId s : dag.Succs(v)) {
      below = std::max(below, levels.bottom_us[s]);
      hops = std::max(hops, levels.bottom_hops[s] + 1);
    }
    levels.bottom_us[v] = below + graph.cost_us(v);
    levels.bottom_hops[v] = hops;
  }
  return levels;
}

double LowerBound(const CostLevels& levels, int num_devices,
                  int kernels_per_device) {
  return std::max(levels.critical_path_us,
                  levels.device_work_us / std::max(num_devices, 1) /
                      std::max(kernels_per_device, 1));
}

namespace {

constexpr int32_t kNowhere = -2;  // a buffer not created anywhere yet

// What a node waits for or does, in order.
enum class Phase : uint8_t {
  kBlocked,       // behind its stream or its events
  kTransferWait,  // waiting for a copy engine to fetch its inputs
  kTransfer,      // fetching its inputs
  kUnitWait,      // waiting for its kernel slot or copy engine
  kRunning,
  kDone,
};

// Execution units: per device, kernel slots and copy engines.
enum class UnitKind : uint8_t { kKernel, kCopy, kHost };

UnitKind UnitOf(Engine engine) {
  switch (engine) {
    case Engine::kCompute:
    case Engine::kCollective:
      return UnitKind::kKernel;
    case Engine::kCopy:
      return UnitKind::kCopy;
    case Engine::kHost:
      return UnitKind::kHost;
  }
  return UnitKind::kHost;
}

using MinHeap =
    std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>>;

// One run of the simulation over a compact schedule; writes the times
// into a ScheduleTimes. Not thread-safe.
class Simulation {
 public:
  Simulation(const Graph& graph, const Schedule& schedule,
             const SimulationOptions& options, const Topology& topology,
             ScheduleTimes& times)
      : graph_(graph),
        schedule_(schedule),
        options_(options),
        topology_(topology),
        n_(static_cast<int>(schedule.node.size())),
        num_devices_(schedule.num_devices),
        start_(times.start_us),
        transfer_(times.transfer_us),
        makespan_(times.makespan_us) {}

  absl::Status Run() {
    WEFT_RETURN_IF_ERROR(Index());
    Setup();
    for (int s = 0; s < schedule_.num_streams; ++s) TryActivate(s);
    Dispatch();
    int finished = 0;
    double makespan = 0;
    while (!completions_.empty()) {
      now_ = completions_.top().first;
      // Apply everything ending now before starting anything new.
      while (!completions_.empty() && completions_.top().first == now_) {
        const int32_t i = completions_.top().second;
        completions_.pop();
        if (phase_[i] == Phase::kTransfer) {
          FinishTransfer(i);
        } else {
          ++finished;
          makespan = std::max(makespan, now_);
          FinishNode(i);
        }
      }
      Dispatch();
    }
    if (finished != n_) {
      return absl::InternalError(
          absl::StrCat("the plan deadlocks: ", n_ - finished,
                       " nodes never start (waits out of stream order)"));
    }
    makespan_ = makespan;
    return absl::OkStatus();
  }

 private:
  static constexpr uint64_t kHostBit = uint64_t{1} << 63;

  // Checks the schedule's references and builds the per-position arrays
  // and the stream and waiter indexes.
  absl::Status Index() {
    const Schedule& sc = schedule_;
    const int num_streams = sc.num_streams;
    const int num_events = sc.num_events;
    if (static_cast<int>(sc.device.size()) != n_ ||
        static_cast<int>(sc.stream.size()) != n_ ||
        static_cast<int>(sc.signal.size()) != n_ || sc.waits.rows() != n_ ||
        sc.peer_stream.size() != sc.peer_device.size() ||
        (!sc.peer_stream.empty() &&
         static_cast<int>(sc.peer_stream.size()) != n_)) {
      return absl::InternalError("schedule arrays disagree on the node count");
    }
    int64_t num_members = n_;
    std::vector<int32_t> signaller(num_events, -1);
    stream_offsets_.assign(num_streams + 1, 0);
    waiter_offsets_.assign(num_events + 1, 0);
    pending_.resize(n_);
    unit_.resize(n_);
    cost_.resize(n_);
    for (int i = 0; i < n_; ++i) {
      const NodeId v = sc.node[i];
      if (v < 0 || v >= graph_.num_nodes()) {
        return absl::InternalError(
            absl::StrCat("plan node ", i, " refers to unknown node ", v));
      }
      if (sc.stream[i] < 0 || sc.stream[i] >= num_streams) {
        return absl::InternalError(absl::StrCat(
            "plan node ", i, " is on unknown stream ", sc.stream[i]));
      }
      if (sc.device[i] < 0 || sc.device[i] >= num_devices_) {
        return absl::InternalError(
            absl::StrCat("plan node ", i, " is on device ", sc.device[i]));
      }
      const int32_t e = sc.signal[i];
      if (e >= 0) {
        if (e >= num_events || signaller[e] >= 0) {
          return absl::InternalError(
              absl::StrCat("plan node ", i, " signals bad event ", e));
        }
        signaller[e] = i;
      }
      auto waits = sc.waits.Row(i);
      pending_[i] = static_cast<int32_t>(waits.size());
      for (int32_t w : waits) {
        if (w < 0 || w >= num_events) {
          return absl::InternalError(
              absl::StrCat("plan node ", i, " waits on unknown event ", w));
        }
        ++waiter_offsets_[w + 1];
      }
      unit_[i] = UnitOf(graph_.engine(v));
      cost_[i] = graph_.cost_us(v);
      ++stream_offsets_[sc.stream[i] + 1];
      if (const int32_t t = Peer(i); t >= 0) {
        if (t >= num_streams || t == sc.stream[i] || sc.peer_device[i] < 0 ||
            sc.peer_device[i] >= num_devices_ ||
            sc.peer_device[i] == sc.device[i]) {
          return absl::InternalError(absl::StrCat(
              "plan node ", i, " has a bad peer stream ", t, " (device ",
              sc.peer_device[i], ")"));
        }
        ++stream_offsets_[t + 1];
        ++num_members;
      }
    }
    for (int e = 0; e < num_events; ++e) {
      if (signaller[e] < 0) {
        return absl::InternalError(
            absl::StrCat("event ", e, " is never signalled"));
      }
      waiter_offsets_[e + 1] += waiter_offsets_[e];
    }
    for (int s = 0; s < num_streams; ++s) {
      stream_offsets_[s + 1] += stream_offsets_[s];
    }
    stream_nodes_.resize(num_members);
    waiters_.resize(waiter_offsets_[num_events]);
    head_.assign(stream_offsets_.begin(), stream_offsets_.end() - 1);
    std::vector<int32_t> wfill(waiter_offsets_.begin(),
                               waiter_offsets_.end() - 1);
    for (int i = 0; i < n_; ++i) {
      stream_nodes_[head_[sc.stream[i]]++] = i;
      if (const int32_t t = Peer(i); t >= 0) stream_nodes_[head_[t]++] = i;
      for (int32_t e : sc.waits.Row(i)) waiters_[wfill[e]++] = i;
    }
    head_.assign(stream_offsets_.begin(), stream_offsets_.end() - 1);
    return absl::OkStatus();
  }

  void Setup() {
    const int num_streams = schedule_.num_streams;
    phase_.assign(n_, Phase::kBlocked);
    ReserveHuge(start_, n_);
    ReserveHuge(transfer_, n_);
    start_.assign(n_, 0);
    transfer_.assign(n_, 0);
    busy_.assign(num_streams, 0);
    kernel_free_.assign(num_devices_,
                        std::max(options_.max_concurrent_kernels, 1));
    copy_free_.assign(num_devices_,
                      std::max(options_.copy_engines_per_device, 1));
    kernel_ready_.resize(num_devices_);
    copy_ready_.resize(num_devices_);
    parked_.resize(num_devices_);
    // Each node has at most one completion pending: its transfer or itself.
    std::vector<std::pair<double, int32_t>> pending;
    pending.reserve(n_);
    completions_ = decltype(completions_)(std::greater<>(), std::move(pending));
    if (!options_.model_transfers) return;
    const int num_buffers = graph_.num_buffers();
    where_.assign(num_buffers, 0);
    latest_.assign(num_buffers, kNowhere);
    stamp_.assign(num_buffers, -1);
    for (BufferId b = 0; b < num_buffers; ++b) {
      if (graph_.has_initial_data(b)) {
        latest_[b] = Topology::kHost;
        where_[b] = kHostBit;
      }
    }
  }

  // Starts the node at the head of stream s on its way to its unit once
  // its events allow.
  void TryActivate(int s) {
    if (busy_[s] || head_[s] >= stream_offsets_[s + 1]) return;
    const int32_t i = stream_nodes_[head_[s]];
    if (pending_[i] > 0) return;
    // A copy between devices also waits for the head of its other stream.
    const int32_t o = Peer(i) < 0 ? -1
                      : schedule_.stream[i] == s ? Peer(i)
                                                 : schedule_.stream[i];
    if (o >= 0) {
      if (busy_[o] || stream_nodes_[head_[o]] != i) return;
      busy_[o] = 1;
    }
    busy_[s] = 1;
    if (options_.model_transfers && NeedsTransfer(i)) {
      phase_[i] = Phase::kTransferWait;
      copy_ready_[schedule_.device[i]].push(i);
    } else {
      EnqueueForUnit(i);
    }
  }

  // Creates never-written buffers in place; true if some input must be
  // copied to the node's device.
  bool NeedsTransfer(int32_t i) {
    const int device = schedule_.device[i];
    const uint64_t bit = PresentBits(i);
    bool needed = false;
    for (const BufferUse& use : graph_.Uses(schedule_.node[i])) {
      if (!Reads(use.access)) continue;
      const BufferId b = use.buffer;
      if (latest_[b] == kNowhere) {
        latest_[b] = device;
        where_[b] = uint64_t{1} << device;
      }
      if (!(where_[b] & bit)) needed = true;
    }
    return needed;
  }

  double TransferTime(int32_t i) {
    const int device = schedule_.device[i];
    const uint64_t bit = PresentBits(i);
    double total = 0;
    for (const BufferUse& use : graph_.Uses(schedule_.node[i])) {
      if (!Reads(use.access)) continue;
      const BufferId b = use.buffer;
      if ((where_[b] & bit) || stamp_[b] == i) continue;
      stamp_[b] = i;
      total += topology_.TransferUs(graph_.buffer_bytes(b), latest_[b],
                                    device);
    }
    return total;
  }

  void FinishTransfer(int32_t i) {
    FreeCopyEngine(schedule_.device[i]);
    const uint64_t bit = uint64_t{1} << schedule_.device[i];
    for (const BufferUse& use : graph_.Uses(schedule_.node[i])) {
      if (Reads(use.access)) where_[use.buffer] |= bit;
    }
    EnqueueForUnit(i);
  }

  void EnqueueForUnit(int32_t i) {
    phase_[i] = Phase::kUnitWait;
    switch (unit_[i]) {
      case UnitKind::kKernel:
        kernel_ready_[schedule_.device[i]].push(i);
        break;
      case UnitKind::kCopy:
        copy_ready_[schedule_.device[i]].push(i);
        break;
      case UnitKind::kHost:
        host_ready_.push(i);
        break;
    }
  }

  void Start(int32_t i) {
    if (phase_[i] == Phase::kTransferWait) {
      phase_[i] = Phase::kTransfer;
      const double t = TransferTime(i);
      transfer_[i] = t;
      completions_.emplace(now_ + t, i);
      return;
    }
    phase_[i] = Phase::kRunning;
    start_[i] = now_;
    completions_.emplace(now_ + cost_[i], i);
  }

  void Dispatch() {
    while (!host_ready_.empty()) {
      const int32_t i = host_ready_.top();
      host_ready_.pop();
      Start(i);
    }
    for (int d = 0; d < num_devices_; ++d) {
      while (kernel_free_[d] > 0 && !kernel_ready_[d].empty()) {
        --kernel_free_[d];
        const int32_t i = kernel_ready_[d].top();
        kernel_ready_[d].pop();
        Start(i);
      }
      while (copy_free_[d] > 0 && !copy_ready_[d].empty()) {
        const int32_t i = copy_ready_[d].top();
        copy_ready_[d].pop();
        if (phase_[i] == Phase::kUnitWait && Peer(i) >= 0 &&
            unit_[i] == UnitKind::kCopy) {
          // A copy between devices takes an engine on both devices at
          // once, or waits (holding neither) for one to free on the peer.
          const int peer = schedule_.peer_device[i];
          if (copy_free_[peer] == 0) {
            parked_[peer].push_back(i);
            continue;
          }
          --copy_free_[peer];
        }
        --copy_free_[d];
        Start(i);
      }
    }
  }

  void FinishNode(int32_t i) {
    phase_[i] = Phase::kDone;
    const int device = schedule_.device[i];
    switch (unit_[i]) {
      case UnitKind::kKernel:
        ++kernel_free_[device];
        break;
      case UnitKind::kCopy:
        FreeCopyEngine(device);
        break;
      case UnitKind::kHost:
        break;
    }
    const int32_t peer = Peer(i);
    if (peer >= 0 && unit_[i] == UnitKind::kCopy) {
      FreeCopyEngine(schedule_.peer_device[i]);
    }
    if (options_.model_transfers) {
      const uint64_t bit = uint64_t{1} << device;
      for (const BufferUse& use : graph_.Uses(schedule_.node[i])) {
        if (Writes(use.access)) {
          where_[use.buffer] = bit;
          latest_[use.buffer] = device;
        }
      }
    }
    const int s = schedule_.stream[i];
    busy_[s] = 0;
    ++head_[s];
    if (peer >= 0) {
      busy_[peer] = 0;
      ++head_[peer];
      TryActivate(peer);
    }
    TryActivate(s);
    const int32_t e = schedule_.signal[i];
    if (e >= 0) {
      for (int32_t k = waiter_offsets_[e]; k < waiter_offsets_[e + 1]; ++k) {
        const int32_t w = waiters_[k];
        if (--pending_[w] == 0) TryActivate(schedule_.stream[w]);
      }
    }
  }

  int32_t Peer(int32_t i) const {
    return schedule_.peer_stream.empty() ? -1 : schedule_.peer_stream[i];
  }

  // Devices where node i finds its inputs without a transfer: its own,
  // and for a copy between devices the one it copies from.
  uint64_t PresentBits(int32_t i) const {
    uint64_t bits = uint64_t{1} << schedule_.device[i];
    if (Peer(i) >= 0) bits |= uint64_t{1} << schedule_.peer_device[i];
    return bits;
  }

  // Returns a copy engine of `device`; copies between devices parked for
  // one go back to their queues.
  void FreeCopyEngine(int device) {
    ++copy_free_[device];
    for (int32_t i : parked_[device]) copy_ready_[schedule_.device[i]].push(i);
    parked_[device].clear();
  }

  const Graph& graph_;
  const Schedule& schedule_;
  const SimulationOptions& options_;
  const Topology& topology_;
  const int n_;
  const int num_devices_;
  double now_ = 0;

  // By issue position.
  std::vector<int32_t> pending_;  // events not yet signalled
  std::vector<UnitKind> unit_;
  std::vector<double> cost_;
  std::vector<Phase> phase_;
  std::vector<double>& start_;
  std::vector<double>& transfer_;
  double& makespan_;

  std::vector<int32_t> stream_offsets_;  // stream -> range of stream_nodes_
  std::vector<int32_t> stream_nodes_;    // positions, by stream
  std::vector<int32_t> waiter_offsets_;  // event -> range of waiters_
  std::vector<int32_t> waiters_;
  std::vector<int32_t> head_;     // by stream: index into stream_nodes_
  std::vector<uint8_t> busy_;     // by stream: its head is on its way
  std::vector<int> kernel_free_;  // by device
  std::vector<int> copy_free_;    // by device
  std::vector<MinHeap> kernel_ready_;
  std::vector<MinHeap> copy_ready_;  // transfers and COPY nodes
  // By device: copies between devices waiting for one of its engines.
  std::vector<std::vector<int32_t>> parked_;
  MinHeap host_ready_;
  // (time, position), earliest first, then lowest position.
  std::priority_queue<std::pair<double, int32_t>,
                      std::vector<std::pair<double, int32_t>>, std::greater<>>
      completions_;

  std::vector<uint64_t> where_;  // by buffer: devices up to date (+ host)
  std::vector<int32_t> latest_;  // by buffer: last writer's device
  std::vector<int32_t> stamp_;   // by buffer: last position counting it
};

}  // namespace

absl::Status SimulateSchedule(const Graph& graph, const Schedule& schedule,
                              const SimulationOptions& options,
                              ScheduleTimes* times) {
  if (schedule.num_devices < 1 || schedule.num_devices > 63) {
    return absl::InvalidArgumentError(
        absl::StrCat("the plan uses ", schedule.num_devices,
                     " devices; the simulation supports 1 to 63"));
  }
  std::unique_ptr<Topology> owned;
  const Topology* topology = options.topology;
  if (topology == nullptr) {
    owned = std::make_unique<Topology>(Topology::Default(schedule.num_devices));
    topology = owned.get();
  } else if (topology->num_devices() < schedule.num_devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.topology: describes ", topology->num_devices(),
        " devices, the plan uses ", schedule.num_devices));
  }
  Simulation sim(graph, schedule, options, *topology, *times);
  return sim.Run();
}

absl::Status SimulatePlan(const Graph& graph, Plan* plan,
                          const SimulationOptions& options) {
  Schedule schedule;
  const int n = static_cast<int>(plan->nodes.size());
  schedule.num_devices = std::max(plan->num_devices, 1);
  for (const PlannedStream& ps : plan->streams) {
    schedule.num_devices = std::max(schedule.num_devices, ps.device + 1);
  }
  schedule.node.reserve(n);
  schedule.device.reserve(n);
  schedule.stream.reserve(n);
  schedule.signal.reserve(n);
  schedule.waits.offsets.reserve(n + 1);
  for (const PlannedNode& pn : plan->nodes) {
    if (pn.peer_stream >= 0 && schedule.peer_stream.empty()) {
      schedule.peer_stream.assign(schedule.node.size(), -1);
      schedule.peer_device.assign(schedule.node.size(), -1);
    }
    if (!schedule.peer_stream.empty()) {
      const bool known = pn.peer_stream >= 0 &&
                         pn.peer_stream < static_cast<int>(plan->streams.size());
      schedule.peer_stream.push_back(pn.peer_stream);
      schedule.peer_device.push_back(
          known ? plan->streams[pn.peer_stream].device : -1);
    }
    schedule.num_devices = std::max(schedule.num_devices, pn.device + 1);
    schedule.node.push_back(pn.node);
    schedule.device.push_back(pn.device);
    schedule.stream.push_back(pn.stream);
    schedule.signal.push_back(pn.signal_event);
    schedule.waits.items.insert(schedule.waits.items.end(),
                                pn.wait_events.begin(), pn.wait_events.end());
    schedule.waits.offsets.push_back(
        static_cast<int32_t>(schedule.waits.items.size()));
  }
  schedule.num_streams = static_cast<int>(plan->streams.size());
  schedule.num_events = plan->num_events;
  ScheduleTimes times;
  WEFT_RETURN_IF_ERROR(SimulateSchedule(graph, schedule, options, &times));
  for (int i = 0; i < n; ++i) {
    PlannedNode& pn = plan->nodes[i];
    pn.estimated_start_us = times.start_us[i];
    pn.estimated_end_us = times.start_us[i] + graph.cost_us(pn.node);
    pn.estimated_transfer_us = times.transfer_us[i];
  }
  plan->estimated_makespan_us = times.makespan_us;
  return absl::OkStatus();
}

}  // namespace weft::scheduler
