#include "scheduler/cost_model.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/huge_pages.h"
#include "scheduler/occupancy.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler {

namespace {

// Execution units: per device, kernel capacity and copy engines.
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

// A device's copy engines, by the direction they move bytes in.
enum CopyEngine : int {
  kHostToDevice = 0,
  kDeviceToHost = 1,
  kDeviceToDevice = 2
};
constexpr int kCopyEngines = 3;

constexpr int32_t kNowhere = -1;  // a buffer not created anywhere yet
constexpr int32_t kNotPending = -1;

// One run of the simulation over a compact schedule, in issue order (see
// the header): each position is issued as the executor issues it, its
// transfers and then the node itself booked on their units. Writes the
// times into a ScheduleTimes. Not thread-safe.
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
        host_(schedule.num_devices),
        start_(times.start_us),
        transfer_(times.transfer_us),
        makespan_(times.makespan_us) {}

  absl::Status Run() {
    WEFT_RETURN_IF_ERROR(Check());
    Setup();
    if (options_.model_transfers) PrefetchUploads();
    double makespan = 0;
    const std::vector<PlannedCopy>& copies = schedule_.copies;
    size_t next_copy = 0;
    for (int32_t i = 0; i < n_; ++i) {
      for (; next_copy < copies.size() && copies[next_copy].before == i;
           ++next_copy) {
        IssueCopy(copies[next_copy]);
      }
      WEFT_ASSIGN_OR_RETURN(const double end, Issue(i));
      makespan = std::max(makespan, end);
    }
    if (options_.model_transfers) {
      makespan = std::max(makespan, DownloadOutputs());
    }
    makespan_ = makespan;
    return absl::OkStatus();
  }

 private:
  // The last transfer time computed between two memories, and for what
  // size (0 bytes take no time).
  struct TransferMemo {
    uint64_t bytes = 0;
    double us = 0;
  };

  // Checks every reference of the schedule, naming the first bad one.
  absl::Status Check() {
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
    const bool peers = !sc.peer_stream.empty();
    // Signallers per event: 0 unclaimed, 1 claimed.
    std::vector<uint8_t> claimed(num_events, 0);
    const int num_nodes = graph_.num_nodes();
    for (int i = 0; i < n_; ++i) {
      const NodeId v = sc.node[i];
      if (v < 0 || v >= num_nodes) {
        return absl::InternalError(
            absl::StrCat("plan node ", i, " refers to unknown node ", v));
      }
      const int32_t s = sc.stream[i];
      if (s < 0 || s >= num_streams) {
        return absl::InternalError(
            absl::StrCat("plan node ", i, " is on unknown stream ", s));
      }
      if (sc.device[i] < 0 || sc.device[i] >= num_devices_) {
        return absl::InternalError(
            absl::StrCat("plan node ", i, " is on device ", sc.device[i]));
      }
      const int32_t e = sc.signal[i];
      if (e >= 0) {
        if (e >= num_events || claimed[e]) {
          return absl::InternalError(
              absl::StrCat("plan node ", i, " signals bad event ", e));
        }
        claimed[e] = 1;
      }
      for (int32_t w : sc.waits.Row(i)) {
        if (w < 0 || w >= num_events) {
          return absl::InternalError(
              absl::StrCat("plan node ", i, " waits on unknown event ", w));
        }
      }
      if (peers) {
        const int32_t t = sc.peer_stream[i];
        if (t >= 0 && (t >= num_streams || t == s || sc.peer_device[i] < 0 ||
                       sc.peer_device[i] >= num_devices_ ||
                       sc.peer_device[i] == sc.device[i])) {
          return absl::InternalError(
              absl::StrCat("plan node ", i, " has a bad peer stream ", t,
                           " (device ", sc.peer_device[i], ")"));
        }
      }
    }
    for (int e = 0; e < num_events; ++e) {
      if (!claimed[e]) {
        return absl::InternalError(
            absl::StrCat("event ", e, " is never signalled"));
      }
    }
    int32_t before = 0;
    for (const PlannedCopy& copy : sc.copies) {
      if (copy.before < before || copy.before >= n_ || copy.after < 0 ||
          copy.after >= copy.before || copy.buffer < 0 ||
          copy.buffer >= graph_.num_buffers() || copy.device < 0 ||
          copy.device >= num_devices_ || copy.stream < 0 ||
          copy.stream >= num_streams || copy.event < 0 ||
          copy.event >= num_events || sc.signal[copy.after] != copy.event) {
        return absl::InternalError(absl::StrCat(
            "eager copy of buffer ", copy.buffer, " from plan node ",
            copy.after, " to plan node ", copy.before, " on device ",
            copy.device, " on stream ", copy.stream, " waiting on event ",
            copy.event, " is malformed"));
      }
      before = copy.before;
    }
    return absl::OkStatus();
  }

  void Setup() {
    ReserveHuge(start_, n_);
    ReserveHuge(transfer_, n_);
    start_.assign(n_, 0);
    transfer_.assign(n_, 0);
    // The plan's streams, then one upload stream per device.
    stream_time_.assign(schedule_.num_streams + num_devices_, 0);
    event_time_.assign(schedule_.num_events, -1);
    kernels_.reserve(num_devices_);
    for (int d = 0; d < num_devices_; ++d) {
      kernels_.emplace_back(std::max(options_.max_concurrent_kernels, 1));
    }
    const int lanes = std::max(options_.copy_engines_per_device, 1);
    copy_units_ = std::max<int32_t>(1, kOccupancyUnits / lanes);
    engines_.reserve(num_devices_ * kCopyEngines);
    for (int k = 0; k < num_devices_ * kCopyEngines; ++k) {
      engines_.emplace_back(lanes);
    }
    memories_ = num_devices_ + 1;
    transfer_memo_.assign(memories_ * memories_, TransferMemo());
    if (!options_.model_transfers) return;
    const int num_buffers = graph_.num_buffers();
    latest_.assign(num_buffers, kNowhere);
    where_.assign(num_buffers, 0);
    writer_.assign(num_buffers, -1);
    written_.assign(num_buffers, 0);
    ready_.assign(static_cast<size_t>(num_buffers) * memories_, 0);
    ready_stream_.assign(static_cast<size_t>(num_buffers) * memories_,
                         kNotPending);
  }

  // From the job's start, as the executor issues them (the model has no
  // host time): every buffer with initial data whose first use in issue
  // order is on a device goes up to that device, in that order, on the
  // device's upload stream.
  void PrefetchUploads() {
    std::vector<uint8_t> seen(graph_.num_buffers(), 0);
    double ignored = 0;
    for (int32_t i = 0; i < n_; ++i) {
      const NodeId v = schedule_.node[i];
      const bool on_host = graph_.engine(v) == Engine::kHost;
      for (const BufferUse& use : graph_.Uses(v)) {
        const BufferId b = use.buffer;
        if (seen[b]) continue;
        seen[b] = 1;
        if (on_host || !graph_.has_initial_data(b)) continue;
        const int device = schedule_.device[i];
        const int32_t upload = schedule_.num_streams + device;
        MakeCurrent(b, device, upload, &stream_time_[upload], &ignored);
      }
    }
  }

  // Issues position i: its waits, its transfers, then the node. Returns
  // its end.
  absl::StatusOr<double> Issue(int32_t i) {
    const Schedule& sc = schedule_;
    const NodeId v = sc.node[i];
    const int32_t s = sc.stream[i];
    const int device = sc.device[i];
    double t = stream_time_[s];
    for (int32_t e : sc.waits.Row(i)) {
      if (event_time_[e] < 0) {
        return absl::InternalError(
            absl::StrCat("plan node ", i, " waits on event ", e,
                         " before the node that signals it is issued"));
      }
      t = std::max(t, event_time_[e]);
    }
    const int32_t peer = sc.peer_stream.empty() ? -1 : sc.peer_stream[i];
    if (peer >= 0) t = std::max(t, stream_time_[peer]);
    // A control node's bodies run their kernels over its buffers on its
    // device.
    const UnitKind unit =
        graph_.is_control(v) ? UnitKind::kKernel : UnitOf(graph_.engine(v));
    const int where = unit == UnitKind::kHost ? host_ : device;
    double transfer = 0;
    if (options_.model_transfers) {
      for (const BufferUse& use : graph_.Uses(v)) {
        MakeCurrent(use.buffer, where, s, &t, &transfer);
      }
    }
    const double cost = graph_.cost_us(v);
    double start = t;
    switch (unit) {
      case UnitKind::kKernel:
        start = kernels_[device].Book(t, cost, graph_.occupancy_units(v));
        break;
      case UnitKind::kCopy:
        start = engine(device, kDeviceToDevice).Book(t, cost, copy_units_);
        break;
      case UnitKind::kHost:
        break;
    }
    const double end = start + std::max(cost, 0.0);
    stream_time_[s] = end;
    if (peer >= 0) stream_time_[peer] = std::max(stream_time_[peer], end);
    if (options_.model_transfers) MarkWritten(v, where, s);
    if (sc.signal[i] >= 0) event_time_[sc.signal[i]] = end;
    start_[i] = start;
    transfer_[i] = transfer;
    return end;
  }

  // Issues an eager copy (its writer is issued, its reader is next).
  void IssueCopy(const PlannedCopy& copy) {
    double t = std::max(stream_time_[copy.stream], event_time_[copy.event]);
    double ignored = 0;
    if (options_.model_transfers) {
      MakeCurrent(copy.buffer, copy.device, copy.stream, &t, &ignored);
    }
    stream_time_[copy.stream] = t;
  }

  // Brings buffer b up to date in memory `where` for work on stream s
  // whose stream is free at *t, as the executor does: creates it there
  // if it exists nowhere yet (an upload for initial data), else waits
  // for the copy there to be ready, or copies it from its latest writer's
  // memory on the engine of that direction.
  void MakeCurrent(BufferId b, int where, int32_t s, double* t,
                   double* transfer) {
    const size_t copy = Slot(b, where);
    if (latest_[b] == kNowhere) {
      latest_[b] = where;
      where_[b] = Bit(where);
      writer_[b] = s;
      if (where == host_) return;  // on the host, at once
      if (graph_.has_initial_data(b)) {
        const double us =
            TransferUs(graph_.buffer_bytes(b), Topology::kHost, where);
        *t = engine(where, kHostToDevice).Book(*t, us, copy_units_) + us;
        *transfer += us;
      }
      ready_[copy] = *t;
      ready_stream_[copy] = s;
      return;
    }
    if (where_[b] & Bit(where)) {
      WaitReady(copy, s, t);
      return;
    }
    if (!written_[b] && !graph_.has_initial_data(b)) {
      // Still its initial zeros or fill: created here too, for free.
      where_[b] |= Bit(where);
      ready_[copy] = *t;
      ready_stream_[copy] = s;
      return;
    }
    const int from = latest_[b];
    WaitReady(Slot(b, from), s, t);
    const double us = TransferUs(graph_.buffer_bytes(b),
                                 from == host_ ? Topology::kHost : from,
                                 where == host_ ? Topology::kHost : where);
    OccupancyTimeline& unit = where == host_  ? engine(from, kDeviceToHost)
                              : from == host_ ? engine(where, kHostToDevice)
                                              : engine(where, kDeviceToDevice);
    *t = unit.Book(*t, us, copy_units_) + std::max(us, 0.0);
    *transfer += us;
    where_[b] |= Bit(where);
    ready_[copy] = *t;
    ready_stream_[copy] = s;
  }

  // Work on stream s waits for a copy made ready on another stream.
  void WaitReady(size_t copy, int32_t s, double* t) const {
    const int32_t from = ready_stream_[copy];
    if (from != kNotPending && from != s) *t = std::max(*t, ready_[copy]);
  }

  // Node v wrote its buffers in memory `where` on stream s: that copy is
  // the only current one, and the plan orders every later use.
  void MarkWritten(NodeId v, int where, int32_t s) {
    for (const BufferUse& use : graph_.Uses(v)) {
      if (!Writes(use.access)) continue;
      const BufferId b = use.buffer;
      latest_[b] = where;
      where_[b] = Bit(where);
      writer_[b] = s;
      written_[b] = 1;
      std::fill_n(ready_stream_.begin() + Slot(b, 0), memories_, kNotPending);
    }
  }

  // Output buffers last written on a device go back to the host, each
  // after everything issued on the stream that wrote it, in buffer order.
  // Returns the last end.
  double DownloadOutputs() {
    double last = 0;
    for (BufferId b = 0; b < graph_.num_buffers(); ++b) {
      if (!graph_.buffer(b).output) continue;
      const int from = latest_[b];
      if (from == kNowhere || from == host_) continue;
      const int32_t s = writer_[b];
      const double us =
          TransferUs(graph_.buffer_bytes(b), from, Topology::kHost);
      const double end =
          engine(from, kDeviceToHost).Book(stream_time_[s], us, copy_units_) +
          std::max(us, 0.0);
      stream_time_[s] = end;
      last = std::max(last, end);
    }
    return last;
  }

  // Topology::TransferUs, remembering the last answer for each pair of
  // memories (buffers often share a size).
  double TransferUs(uint64_t bytes, int from, int to) {
    const int f = from == Topology::kHost ? host_ : from;
    const int g = to == Topology::kHost ? host_ : to;
    TransferMemo& memo = transfer_memo_[f * memories_ + g];
    if (memo.bytes != bytes) {
      memo.bytes = bytes;
      memo.us = topology_.TransferUs(bytes, from, to);
    }
    return memo.us;
  }

  OccupancyTimeline& engine(int device, CopyEngine kind) {
    return engines_[device * kCopyEngines + kind];
  }
  size_t Slot(BufferId b, int memory) const {
    return static_cast<size_t>(b) * memories_ + memory;
  }
  static uint64_t Bit(int memory) { return uint64_t{1} << memory; }

  const Graph& graph_;
  const Schedule& schedule_;
  const SimulationOptions& options_;
  const Topology& topology_;
  const int n_;
  const int num_devices_;
  const int host_;  // the host's memory index
  int memories_ = 0;

  std::vector<double>& start_;
  std::vector<double>& transfer_;
  double& makespan_;

  std::vector<double> stream_time_;         // by stream: its work so far ends
  std::vector<double> event_time_;          // by event: signalled at, or -1
  std::vector<OccupancyTimeline> kernels_;  // by device
  std::vector<OccupancyTimeline> engines_;  // by device and CopyEngine
  int32_t copy_units_ = kOccupancyUnits;    // one copy's share of an engine

  // By buffer: the memory of its latest version (kNowhere: not created
  // yet), the memories holding it up to date (bit per memory, the host
  // last) and the stream that made its latest version.
  std::vector<int32_t> latest_;
  std::vector<uint64_t> where_;
  std::vector<int32_t> writer_;
  std::vector<uint8_t> written_;  // some node has written it
  // By buffer and memory: when the copy there is ready, and the stream
  // that readies it (kNotPending: the plan orders its uses).
  std::vector<double> ready_;
  std::vector<int32_t> ready_stream_;
  std::vector<TransferMemo> transfer_memo_;  // by pair of memories
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
  if (schedule.num_streams < 0 || schedule.num_events < 0) {
    return absl::InternalError(
        absl::StrCat("the plan has ", schedule.num_streams, " streams and ",
                     schedule.num_events, " events"));
  }
  if (!schedule.waits.WellFormed()) {
    return absl::InternalError("the plan's rows of waits are malformed");
  }
  std::unique_ptr<Topology> owned;
  const Topology* topology = options.topology;
  if (topology == nullptr) {
    owned = std::make_unique<Topology>(Topology::Default(schedule.num_devices));
    topology = owned.get();
  } else if (topology->num_devices() < schedule.num_devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.topology: describes ", topology->num_devices(),
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
  if (plan->waits.rows() != n) {
    return absl::InternalError(absl::StrCat(
        "plan has ", plan->waits.rows(), " rows of waits for ", n, " nodes"));
  }
  schedule.waits = plan->waits;
  for (const PlannedNode& pn : plan->nodes) {
    if (pn.peer_stream >= 0 && schedule.peer_stream.empty()) {
      schedule.peer_stream.assign(schedule.node.size(), -1);
      schedule.peer_device.assign(schedule.node.size(), -1);
    }
    if (!schedule.peer_stream.empty()) {
      const bool known =
          pn.peer_stream >= 0 &&
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
  }
  schedule.copies = plan->copies;
  schedule.num_streams = static_cast<int>(plan->streams.size());
  schedule.num_events = plan->num_events;
  ScheduleTimes times;
  WEFT_RETURN_IF_ERROR(SimulateSchedule(graph, schedule, options, &times));
  plan->estimates.resize(n);
  for (int i = 0; i < n; ++i) {
    const double start = times.start_us[i];
    plan->estimates[i] = {start, start + graph.cost_us(plan->nodes[i].node),
                          times.transfer_us[i]};
  }
  plan->estimated_makespan_us = times.makespan_us;
  return absl::OkStatus();
}

}  // namespace weft::scheduler
