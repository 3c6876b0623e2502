#include "scheduler/cost_model.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/numeric/bits.h"
#include "absl/strings/str_cat.h"
#include "scheduler/huge_pages.h"
#include "scheduler/min_heap.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler {

double LowerBound(const CostLevels& levels, int num_devices,
                  int kernels_per_device) {
  return std::max(levels.critical_path_us,
                  levels.device_work_us / std::max(num_devices, 1) /
                      std::max(kernels_per_device, 1));
}

namespace {

constexpr int32_t kNowhere = -2;  // a buffer not created anywhere yet

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

// A node's issue position with one bit for what it is queued or running
// for: its transfer (fetching its inputs) or the node itself. A node is in
// at most one queue, and has at most one completion pending, at a time, so
// tags order like positions wherever they meet.
inline uint32_t Tag(int32_t position, bool transfer) {
  return (static_cast<uint32_t>(position) << 1) |
         static_cast<uint32_t>(transfer);
}
inline int32_t PositionOf(uint32_t tag) {
  return static_cast<int32_t>(tag >> 1);
}
inline bool IsTransfer(uint32_t tag) { return (tag & 1) != 0; }

// A node's completion (or its transfer's): earliest first, then lowest
// issue position. No two are equal.
struct Completion {
  double time;
  uint32_t tag;
};

inline bool operator<(const Completion& a, const Completion& b) {
  // Non-short-circuit on purpose: the heap's comparisons then compile to
  // flag arithmetic instead of hard-to-predict branches.
  return (a.time < b.time) | ((a.time == b.time) & (a.tag < b.tag));
}

// Per buffer: the devices holding it up to date (bit d; kHostBit for the
// host), the device of its last writer (kNowhere: not created yet) and the
// last position whose transfer counted it.
struct BufferState {
  uint64_t where = 0;
  int32_t latest = kNowhere;
  int32_t stamp = -1;
};

// Per event: the head of the list of streams whose head node waits for it
// (linked through Simulation::next_blocked_), or one of these states.
constexpr int32_t kUnclaimed = -3;    // no node signals it (while indexing)
constexpr int32_t kUnsignalled = -1;  // signaller pending, nobody blocked
constexpr int32_t kSignalled = -2;    // its signaller has finished

// One run of the simulation over a compact schedule; writes the times
// into a ScheduleTimes.
//
// Each stream is a linked list through the positions on it (next_ and,
// for copies between devices, peer_next_). A stream whose head waits for
// an unsignalled event is parked on that event's list; when the event's
// signaller finishes, the parked heads are retried in issue order, so
// nodes reach their units in the same order as if every waiter were
// counted down. Not thread-safe.
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
        node_(schedule.node.data()),
        device_(schedule.device.data()),
        stream_(schedule.stream.data()),
        signal_(schedule.signal.data()),
        peer_stream_(schedule.peer_stream.empty() ? nullptr
                                                  : schedule.peer_stream.data()),
        peer_device_(schedule.peer_device.data()),
        wait_offsets_(schedule.waits.offsets.data()),
        wait_items_(schedule.waits.items.data()),
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
      now_ = completions_.top().time;
      // Apply everything ending now before starting anything new.
      while (!completions_.empty() && completions_.top().time == now_) {
        const uint32_t tag = completions_.top().tag;
        completions_.pop();
        const int32_t i = PositionOf(tag);
        if (IsTransfer(tag)) {
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

  // The last transfer time computed between two memories, and for what
  // size (0 bytes take no time).
  struct TransferMemo {
    uint64_t bytes = 0;
    double us = 0;
  };

  // Checks the schedule's references and links the streams. Without
  // copies between devices, IndexQuickly does it in a few tight passes
  // that do not branch on the data; only a schedule that fails them (or
  // has such copies) is walked node by node, by IndexByNode, which also
  // finds the first bad reference for the message.
  absl::Status Index() {
    const Schedule& sc = schedule_;
    if (!sc.peer_stream.empty() || !sc.peer_device.empty() ||
        static_cast<int>(sc.device.size()) != n_ ||
        static_cast<int>(sc.stream.size()) != n_ ||
        static_cast<int>(sc.signal.size()) != n_ || sc.waits.rows() != n_ ||
        !IndexQuickly()) {
      return IndexByNode();
    }
    return absl::OkStatus();
  }

  // Links the streams of a schedule without copies between devices; true
  // if every reference is in range and every event has exactly one
  // signaller.
  bool IndexQuickly() {
    const Schedule& sc = schedule_;
    const uint32_t num_nodes = graph_.num_nodes();
    const uint32_t num_streams = sc.num_streams;
    const uint32_t num_devices = num_devices_;
    const uint32_t num_events = sc.num_events;
    ReserveHuge(next_, n_);
    next_.resize(n_);
    head_.assign(num_streams, -1);
    next_blocked_.assign(num_streams, -1);
    // Per stream, where its next position goes: its head, then the next_
    // of its last position so far. Out-of-range streams link into `spare`.
    int32_t spare = -1;
    std::vector<int32_t*> tail(num_streams + 1, &spare);
    for (uint32_t s = 0; s < num_streams; ++s) tail[s] = &head_[s];
    // Signallers per event; nodes that signal nothing (or out of range)
    // count in kSpareClaims spare slots after the events, spread so that
    // consecutive increments do not wait on each other.
    constexpr uint32_t kSpareClaims = 8;
    event_.assign(num_events + kSpareClaims, 0);
    int32_t* const claims = event_.data();
    int32_t* const next = next_.data();
    int32_t** const tails = tail.data();
    bool ok = true;
    for (int32_t i = 0; i < n_; ++i) {
      const uint32_t s = stream_[i];
      const bool known = s < num_streams;
      ok &= known;
      const uint32_t t = known ? s : num_streams;
      *tails[t] = i;
      tails[t] = &next[i];
      ok &= static_cast<uint32_t>(node_[i]) < num_nodes;
      ok &= static_cast<uint32_t>(device_[i]) < num_devices;
      const int32_t e = signal_[i];
      ok &= e < static_cast<int32_t>(num_events);
      const uint32_t c = static_cast<uint32_t>(e) < num_events
                             ? static_cast<uint32_t>(e)
                             : num_events + (i & (kSpareClaims - 1));
      ++claims[c];
    }
    for (uint32_t s = 0; s < num_streams; ++s) *tail[s] = -1;
    const int32_t first = wait_offsets_[0];
    const int32_t end = wait_offsets_[n_];
    for (int32_t k = first; k < end; ++k) {
      ok &= static_cast<uint32_t>(wait_items_[k]) < num_events;
    }
    for (uint32_t e = 0; e < num_events; ++e) ok &= claims[e] == 1;
    event_.resize(num_events);
    std::fill(event_.begin(), event_.end(), kUnsignalled);
    return ok;
  }

  // Checks the schedule's references and links the streams, in one pass.
  absl::Status IndexByNode() {
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
    event_.assign(num_events, kUnclaimed);
    head_.assign(num_streams, -1);
    next_blocked_.assign(num_streams, -1);
    std::vector<int32_t> last(num_streams, -1);
    ReserveHuge(next_, n_);
    next_.resize(n_);
    if (peers) peer_next_.resize(n_);
    // Appends position i to stream s.
    auto append = [&](int32_t i, int32_t s) {
      const int32_t j = last[s];
      if (j < 0) {
        head_[s] = i;
      } else if (sc.stream[j] == s) {
        next_[j] = i;
      } else {
        peer_next_[j] = i;
      }
      last[s] = i;
    };
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
        if (e >= num_events || event_[e] != kUnclaimed) {
          return absl::InternalError(
              absl::StrCat("plan node ", i, " signals bad event ", e));
        }
        event_[e] = kUnsignalled;
      }
      for (int32_t w : sc.waits.Row(i)) {
        if (w < 0 || w >= num_events) {
          return absl::InternalError(
              absl::StrCat("plan node ", i, " waits on unknown event ", w));
        }
      }
      next_[i] = -1;
      append(i, s);
      if (peers) {
        const int32_t t = sc.peer_stream[i];
        peer_next_[i] = -1;
        if (t >= 0) {
          if (t >= num_streams || t == s || sc.peer_device[i] < 0 ||
              sc.peer_device[i] >= num_devices_ ||
              sc.peer_device[i] == sc.device[i]) {
            return absl::InternalError(absl::StrCat(
                "plan node ", i, " has a bad peer stream ", t, " (device ",
                sc.peer_device[i], ")"));
          }
          append(i, t);
        }
      }
    }
    for (int e = 0; e < num_events; ++e) {
      if (event_[e] == kUnclaimed) {
        return absl::InternalError(
            absl::StrCat("event ", e, " is never signalled"));
      }
    }
    return absl::OkStatus();
  }

  void Setup() {
    const int num_streams = schedule_.num_streams;
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
    transfer_memo_.assign((num_devices_ + 1) * num_devices_, TransferMemo());
    if (!options_.model_transfers) return;
    const int num_buffers = graph_.num_buffers();
    ReserveHuge(buffers_, num_buffers);
    buffers_.resize(num_buffers);
    for (BufferId b = 0; b < num_buffers; ++b) {
      if (graph_.has_initial_data(b)) {
        buffers_[b].latest = Topology::kHost;
        buffers_[b].where = kHostBit;
      }
    }
  }

  // Starts the node at the head of stream s on its way to its unit once
  // its events allow; parks the stream on the first event still missing.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void TryActivate(int s) {
    if (busy_[s]) return;
    const int32_t i = head_[s];
    if (i < 0) return;
    for (int32_t k = wait_offsets_[i]; k < wait_offsets_[i + 1]; ++k) {
      const int32_t e = wait_items_[k];
      const int32_t state = event_[e];
      if (state == kSignalled) continue;
      next_blocked_[s] = state;  // kUnsignalled ends the list
      event_[e] = s;
      return;
    }
    // A copy between devices also waits for the head of its other stream.
    const int32_t peer = Peer(i);
    if (peer >= 0) {
      const int32_t o = stream_[i] == s ? peer : stream_[i];
      if (busy_[o] || head_[o] != i) return;
      busy_[o] = 1;
    }
    busy_[s] = 1;
    if (options_.model_transfers && NeedsTransfer(i)) {
      PushCopy(Tag(i, /*transfer=*/true));
    } else {
      EnqueueForUnit(i);
    }
  }

  // The signaller of event e finished: retries the streams parked on it,
  // lowest head position first.
  void Signal(int32_t e) {
    int32_t s = event_[e];
    event_[e] = kSignalled;
    if (s < 0) return;
    if (next_blocked_[s] < 0) {  // the common case: one waiter
      TryActivate(s);
      return;
    }
    woken_.clear();
    for (; s >= 0; s = next_blocked_[s]) woken_.push_back(s);
    std::sort(woken_.begin(), woken_.end(), [this](int32_t a, int32_t b) {
      return head_[a] != head_[b] ? head_[a] < head_[b] : a < b;
    });
    for (int32_t t : woken_) TryActivate(t);
  }

  // Creates never-written buffers in place; true if some input must be
  // copied to the node's device.
  bool NeedsTransfer(int32_t i) {
    const int device = device_[i];
    const uint64_t bit = PresentBits(i);
    bool needed = false;
    for (const BufferUse& use : graph_.Uses(node_[i])) {
      if (!Reads(use.access)) continue;
      BufferState& b = buffers_[use.buffer];
      if (b.latest == kNowhere) {
        b.latest = device;
        b.where = uint64_t{1} << device;
      }
      if (!(b.where & bit)) needed = true;
    }
    return needed;
  }

  double TransferTime(int32_t i) {
    const int device = device_[i];
    const uint64_t bit = PresentBits(i);
    double total = 0;
    for (const BufferUse& use : graph_.Uses(node_[i])) {
      if (!Reads(use.access)) continue;
      BufferState& b = buffers_[use.buffer];
      if ((b.where & bit) || b.stamp == i) continue;
      b.stamp = i;
      total += TransferUs(graph_.buffer_bytes(use.buffer), b.latest, device);
    }
    return total;
  }

  // Topology::TransferUs, remembering the last answer for each pair of
  // memories (buffers often share a size).
  double TransferUs(uint64_t bytes, int from, int to) {
    TransferMemo& memo = transfer_memo_[(from + 1) * num_devices_ + to];
    if (memo.bytes != bytes) {
      memo.bytes = bytes;
      memo.us = topology_.TransferUs(bytes, from, to);
    }
    return memo.us;
  }

  void FinishTransfer(int32_t i) {
    FreeCopyEngine(device_[i]);
    const uint64_t bit = uint64_t{1} << device_[i];
    for (const BufferUse& use : graph_.Uses(node_[i])) {
      if (Reads(use.access)) buffers_[use.buffer].where |= bit;
    }
    EnqueueForUnit(i);
  }

  void EnqueueForUnit(int32_t i) {
    switch (Unit(i)) {
      case UnitKind::kKernel:
        kernel_ready_[device_[i]].push(i);
        Touch(device_[i]);
        break;
      case UnitKind::kCopy:
        PushCopy(Tag(i, /*transfer=*/false));
        break;
      case UnitKind::kHost:
        host_ready_.push(i);
        break;
    }
  }

  void StartTransfer(int32_t i) {
    const double t = TransferTime(i);
    transfer_[i] = t;
    completions_.push({now_ + t, Tag(i, /*transfer=*/true)});
  }

  void StartNode(int32_t i) {
    start_[i] = now_;
    completions_.push(
        {now_ + graph_.cost_us(node_[i]), Tag(i, /*transfer=*/false)});
  }

  ABSL_ATTRIBUTE_ALWAYS_INLINE void Dispatch() {
    while (!host_ready_.empty()) {
      const int32_t i = host_ready_.top();
      host_ready_.pop();
      StartNode(i);
    }
    // Only devices whose queues or free units changed can start anything.
    for (uint64_t todo = std::exchange(touched_, 0); todo != 0;
         todo &= todo - 1) {
      const int d = absl::countr_zero(todo);
      while (kernel_free_[d] > 0 && !kernel_ready_[d].empty()) {
        --kernel_free_[d];
        const int32_t i = kernel_ready_[d].top();
        kernel_ready_[d].pop();
        StartNode(i);
      }
      while (copy_free_[d] > 0 && !copy_ready_[d].empty()) {
        const uint32_t tag = copy_ready_[d].top();
        copy_ready_[d].pop();
        const int32_t i = PositionOf(tag);
        if (IsTransfer(tag)) {
          --copy_free_[d];
          StartTransfer(i);
          continue;
        }
        if (Peer(i) >= 0) {
          // A copy between devices takes an engine on both devices at
          // once, or waits (holding neither) for one to free on the peer.
          const int peer = peer_device_[i];
          if (copy_free_[peer] == 0) {
            parked_[peer].push_back(i);
            continue;
          }
          --copy_free_[peer];
        }
        --copy_free_[d];
        StartNode(i);
      }
    }
  }

  void FinishNode(int32_t i) {
    const int device = device_[i];
    const UnitKind unit = Unit(i);
    switch (unit) {
      case UnitKind::kKernel:
        ++kernel_free_[device];
        Touch(device);
        break;
      case UnitKind::kCopy:
        FreeCopyEngine(device);
        break;
      case UnitKind::kHost:
        break;
    }
    const int32_t peer = Peer(i);
    if (peer >= 0 && unit == UnitKind::kCopy) {
      FreeCopyEngine(peer_device_[i]);
    }
    if (options_.model_transfers) {
      const uint64_t bit = uint64_t{1} << device;
      for (const BufferUse& use : graph_.Uses(node_[i])) {
        if (Writes(use.access)) {
          BufferState& b = buffers_[use.buffer];
          b.where = bit;
          b.latest = device;
        }
      }
    }
    const int s = stream_[i];
    busy_[s] = 0;
    head_[s] = next_[i];
    if (peer >= 0) {
      busy_[peer] = 0;
      head_[peer] = peer_next_[i];
      TryActivate(peer);
    }
    TryActivate(s);
    const int32_t e = signal_[i];
    if (e >= 0) Signal(e);
  }

  UnitKind Unit(int32_t i) const { return UnitOf(graph_.engine(node_[i])); }

  int32_t Peer(int32_t i) const {
    return peer_stream_ == nullptr ? -1 : peer_stream_[i];
  }

  // Devices where node i finds its inputs without a transfer: its own,
  // and for a copy between devices the one it copies from.
  uint64_t PresentBits(int32_t i) const {
    uint64_t bits = uint64_t{1} << device_[i];
    if (Peer(i) >= 0) bits |= uint64_t{1} << peer_device_[i];
    return bits;
  }

  // Returns a copy engine of `device`; copies between devices parked for
  // one go back to their queues.
  void FreeCopyEngine(int device) {
    ++copy_free_[device];
    Touch(device);
    for (int32_t i : parked_[device]) PushCopy(Tag(i, /*transfer=*/false));
    parked_[device].clear();
  }

  // Queues a transfer or a copy (by tag) for a copy engine.
  void PushCopy(uint32_t tag) {
    const int device = device_[PositionOf(tag)];
    copy_ready_[device].push(tag);
    Touch(device);
  }

  // Marks `device` for the next Dispatch.
  void Touch(int device) { touched_ |= uint64_t{1} << device; }

  const Graph& graph_;
  const Schedule& schedule_;
  const SimulationOptions& options_;
  const Topology& topology_;
  const int n_;
  const int num_devices_;
  // The schedule's arrays, by issue position (peer_stream_ null: no
  // peers), read through plain pointers in the hot loops.
  const NodeId* const node_;
  const int32_t* const device_;
  const int32_t* const stream_;
  const int32_t* const signal_;
  const int32_t* const peer_stream_;
  const int32_t* const peer_device_;
  const int32_t* const wait_offsets_;
  const int32_t* const wait_items_;
  double now_ = 0;

  // By issue position.
  std::vector<int32_t> next_;       // next position on its stream, or -1
  std::vector<int32_t> peer_next_;  // on its peer stream (empty: no peers)
  std::vector<double>& start_;
  std::vector<double>& transfer_;
  double& makespan_;

  std::vector<int32_t> event_;         // by event: see kSignalled
  std::vector<int32_t> head_;          // by stream: its head position or -1
  std::vector<int32_t> next_blocked_;  // by stream: next parked on the event
  std::vector<int32_t> woken_;         // scratch for Signal
  // By stream: its head is on its way. Not a byte type, whose stores the
  // compiler must assume may change any other member.
  std::vector<int32_t> busy_;
  std::vector<int> kernel_free_;  // by device
  std::vector<int> copy_free_;    // by device
  std::vector<MinHeap<int32_t>> kernel_ready_;
  std::vector<MinHeap<uint32_t>> copy_ready_;  // tags: transfers and copies
  // By device: copies between devices waiting for one of its engines.
  std::vector<std::vector<int32_t>> parked_;
  MinHeap<int32_t> host_ready_;
  uint64_t touched_ = 0;  // bit d: device d has new work or a freed unit
  MinHeap<Completion> completions_;

  std::vector<BufferState> buffers_;  // by buffer
  // By (source memory + 1) * num_devices_ + device.
  std::vector<TransferMemo> transfer_memo_;
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
    return absl::InternalError(absl::StrCat(
        "the plan has ", schedule.num_streams, " streams and ",
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
  if (plan->waits.rows() != n) {
    return absl::InternalError(absl::StrCat("plan has ", plan->waits.rows(),
                                            " rows of waits for ", n,
                                            " nodes"));
  }
  schedule.waits = plan->waits;
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
  }
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
