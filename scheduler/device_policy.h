// Device selection: which device runs each node.
//
// DevicePolicy::Assign walks the nodes in issue order (Dag::order, the order
// in which an online scheduler such as GrCUDA would meet them, unless
// DeviceContext::walk_order gives another topological order) and places
// each one:
//
//   1. a pinned node (NodeSpec::device) keeps its pin;
//   2. an unpinned node with a stream label goes to the device of the first
//      node (in issue order) carrying that label, so a label names one
//      stream;
//   3. any other node goes where the policy says, among all devices. With
//      DeviceContext::restrict_to_parent_devices (GrCUDA's
//      "multigpu-disjoint", made safe), a node with predecessors stays on
//      one of its predecessors' devices when the policy rates the best of
//      them no worse than its overall choice.
//
// After each placement the walk updates a plan-time model of the machine
// (PlacementState): where each buffer is up to date (data_location.h) and,
// where a transfer brought it, from when (a node using it there, or
// copying it from there, waits for that), the streams this job has opened
// per device, and when each device's kernel slots and copy engines free
// up.
//
// The policies follow GrCUDA's DeviceSelectionPolicy rules. Candidates are
// sorted by device id and every "first wins" tie goes to the lowest id.
//
//   ROUND_ROBIN: one counter, starting at 0: take candidates[counter %
//     |candidates|], then counter = (counter + 1) % num_devices (modulo the
//     machine, even for a subset). Pinned and label-bound nodes do not take
//     a turn. Each data-aware policy falls back on its own counter.
//   STREAM_AWARE: fewest busy streams: DeviceContext::busy_streams (other
//     running jobs) plus the streams this job has opened on the device so
//     far. As in GrCUDA a stream stays busy until the host synchronizes
//     with it, which a plan never does, and a node opens a stream unless it
//     inherits one from a predecessor on the same device that has not
//     handed its stream to another node yet (GrCUDA's "disjoint" rule).
//   MIN_TRANSFER_SIZE: present[d] = bytes of the node's buffer arguments
//     (each argument counts, repeats too) already up to date on device d;
//     if some candidate holds more than data_threshold of the total
//     (strictly), the candidate with the most bytes present; else round
//     robin.
//   MINMIN_TRANSFER_TIME / MINMAX_TRANSFER_TIME: time[d] = sum over the
//     arguments of bytes / bandwidth, where an argument up to date on d is
//     free and otherwise the bandwidth is that of the best (MINMIN) or the
//     worst (MINMAX) link from a place holding it (no direct link: no
//     bandwidth, an infinite time). If some argument is up to date on a
//     device, the candidates holding more than data_threshold of the bytes
//     compete on time; if there is none, or no argument is on a device,
//     round robin.
//   MIN_FINISH_TIME (beyond GrCUDA; HEFT's earliest finish time with
//     insertion): the device where the node would finish first on the
//     cost model's machine (cost_model.h): after its predecessors'
//     estimated finish, the transfers of the inputs not up to date there
//     (from their fastest source, on that device's upload or
//     device-to-device engine), and the earliest time the device has room
//     for it by occupancy (its device-to-device engine for COPY nodes;
//     HOST nodes wait for nothing), plus its cost. Each placement books
//     the node and its transfers on the model.
//   LOOKAHEAD_FINISH_TIME (the default; PEFT): MIN_FINISH_TIME's finish
//     plus an optimistic estimate of the rest of the graph after the node
//     on that device: the longest path through its successors, each on its
//     best device, paying the transfer of what the node wrote where a
//     successor moves to another device. So a chain stays on its device
//     unless splitting it pays, and the next kernel's data needs decide
//     ties. A graph of more than kMaxModelledPlacementNodes nodes is
//     placed by a linear-time estimate instead: each node where it would
//     finish first if every device ran its kernels back to back at their
//     occupancy, after its inputs' copies from their fastest holder (no
//     gaps filled, no look ahead, no estimated starts).
//
// Cost per node: O(arguments x devices) for the data-aware policies, plus
// O(in-degree) for the model and O(out-degree x devices) for the
// lookahead.
#ifndef WEFT_SCHEDULER_DEVICE_POLICY_H_
#define WEFT_SCHEDULER_DEVICE_POLICY_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "scheduler/data_location.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/occupancy.h"
#include "scheduler/planner_options.h"
#include "scheduler/topology.h"

namespace weft::scheduler {

// LOOKAHEAD_FINISH_TIME places a graph of more than this many nodes by
// its linear-time estimate (see the file comment).
inline constexpr int kMaxModelledPlacementNodes = 1 << 16;

// Why a node went to its device.
struct DeviceChoice {
  enum class Why : uint8_t {
    kPinned,
    kLabel,              // the device of `related`, the label's first node
    kRoundRobin,         // its turn (`fallback`: a data-aware policy's)
    kFewestBusyStreams,  // STREAM_AWARE; `value` busy streams
    kMostDataPresent,    // MIN_TRANSFER_SIZE; `value` of `total` bytes
    kMinTransferTime,    // MINMIN/MINMAX; `value` us of transfers
    kMinFinishTime,      // MIN_FINISH_TIME; finishes at `value` us
    // LOOKAHEAD_FINISH_TIME; finishes at `value` us, the graph at best
    // `total` us later.
    kLookaheadFinishTime,
  };
  Why why = Why::kRoundRobin;
  bool fallback = false;      // kRoundRobin for lack of data on a device
  bool parents_only = false;  // kept on a predecessor's device
  NodeId related = -1;
  double value = 0;
  double total = 0;
};

struct DeviceAssignment {
  std::vector<int> device;           // by NodeId
  std::vector<DeviceChoice> choice;  // by NodeId; empty unless recorded
  // By NodeId: the estimated start on the walk's model (MIN_FINISH_TIME
  // and LOOKAHEAD_FINISH_TIME, up to kMaxModelledPlacementNodes nodes);
  // empty otherwise. Never
  // before a predecessor's start.
  std::vector<double> start_us;
};

// What a policy may look at besides the graph.
struct DeviceContext {
  int num_devices = 1;
  // Busy streams per device from other running jobs; empty: all idle.
  std::vector<int> busy_streams;
  // Not owned; null: Topology::Default(num_devices).
  const Topology* topology = nullptr;
  // MIN_TRANSFER_SIZE and the transfer-time policies: a device must hold
  // more than this fraction of a node's argument bytes to be preferred.
  double data_threshold = 0.1;
  bool restrict_to_parent_devices = false;
  // MIN_FINISH_TIME's and LOOKAHEAD_FINISH_TIME's model of a device (the
  // cost model's, cost_model.h).
  int max_concurrent_kernels = 32;
  int copy_engines_per_device = 1;
  // The plan copies data between devices as soon as it is written
  // (PlannerOptions::eager_copies): such copies start when their writer
  // ends rather than when the reader is ready.
  bool eager_copies = false;
  // Control nodes' bodies run on the control node's device, unless they
  // pin nodes (PlannerOptions::bodies_on_one_device, BodiesRunOnItsDevice).
  bool bodies_on_one_device = true;
  // Fill DeviceAssignment::choice (for explanations).
  bool record_choices = true;
  // The order the walk places nodes in; not owned; null: dag.order.
  // REQUIRES: a topological order of the dag.
  const std::vector<NodeId>* walk_order = nullptr;
  // By NodeId, the device each node goes to, or -1 where the policy
  // decides; not owned; null: the policy decides everywhere. Pins and
  // labels still come first. The policy's model books a fixed node on its
  // device as it would any other (its estimated start and choice are the
  // policy's verdict for that one device).
  const std::vector<int>* fixed_devices = nullptr;
};

class PlacementState;

// A policy's verdict for one node over a set of candidates.
struct DeviceDecision {
  int device = 0;
  DeviceChoice choice;
  // False when the policy had no preference (round robin): any candidate
  // is as good. Otherwise `score` ranks the choice, lower being better.
  bool decisive = false;
  double score = 0;
};

// One device-selection policy. Implementations keep no state between calls
// (the walk's state lives in a PlacementState) and are thread-safe.
class DevicePolicy {
 public:
  virtual ~DevicePolicy() = default;
  virtual DevicePolicyKind kind() const = 0;

  // Places every node (see the file comment). REQUIRES: every pin in
  // `graph` is below context.num_devices, and context.num_devices <=
  // DataLocations::kMaxDevices.
  absl::StatusOr<DeviceAssignment> Assign(const Graph& graph, const Dag& dag,
                                          const DeviceContext& context) const;

  // The policy's verdict for node `v` among `candidates` (sorted, not
  // empty). Has no side effects: the walk commits it.
  virtual DeviceDecision Decide(NodeId v, absl::Span<const int> candidates,
                                const PlacementState& state) const = 0;
};

// The walk's model of the machine as nodes are placed. Not thread-safe.
class PlacementState {
 public:
  // `track_locations`: keep the data locations up to date (the data-aware
  // policies need them); `track_finish_times`: keep MIN_FINISH_TIME's
  // estimates up to date; `track_streams`: keep STREAM_AWARE's count of
  // opened streams (BusyStreams) up to date. Other policies skip that work.
  PlacementState(const Graph& graph, const Dag& dag,
                 const DeviceContext& context, const Topology& topology,
                 bool track_finish_times, bool track_locations = true,
                 bool track_streams = true, bool lookahead = false);

  const Graph& graph() const { return graph_; }
  const Dag& dag() const { return dag_; }
  const DeviceContext& context() const { return context_; }
  const Topology& topology() const { return topology_; }
  const DataLocations& locations() const { return locations_; }
  int device(NodeId v) const { return device_[v]; }
  // Hands over every node's device (by NodeId); the state is spent.
  std::vector<int> TakeDevices() { return std::move(device_); }
  // Hands over every node's estimated start (by NodeId; empty unless
  // finish times are tracked).
  std::vector<double> TakeStartTimes() { return std::move(start_); }

  // ROUND_ROBIN: the candidate whose turn it is; Advance takes the turn.
  int PeekRoundRobin(absl::Span<const int> candidates) const;
  void AdvanceRoundRobin() {
    // next_ stays below num_devices: no division on this per-node path.
    next_ = next_ + 1 < context_.num_devices ? next_ + 1 : 0;
  }

  // STREAM_AWARE: busy streams on `device` (other jobs and this one).
  int BusyStreams(int device) const;
  // MIN_FINISH_TIME: when `v` would finish on `device`.
  double EstimateFinish(NodeId v, int device) const;
  // LOOKAHEAD_FINISH_TIME: an optimistic time from the end of `v` on
  // `device` to the end of the graph (PEFT's optimistic cost table).
  double Lookahead(NodeId v, int device) const {
    return lookahead_.empty()
               ? 0
               : lookahead_[static_cast<size_t>(v) * context_.num_devices +
                            device];
  }

  // Commits node `v` to `device` and updates the model.
  void Place(NodeId v, int device);

 private:
  // The timeline of the unit `v` runs on, on `device`; null for HOST
  // nodes.
  // Whether v reads and writes its buffers on its device for eager
  // copies: any node but a control node whose bodies run elsewhere
  // (BodiesRunOnItsDevice).
  bool EagerCopiesReach(NodeId v) const;
  OccupancyTimeline* UnitOf(NodeId v, int device);
  const OccupancyTimeline* UnitOf(NodeId v, int device) const;
  // Where node v's inputs come from and when they are on `device`, from
  // `ready` on, as the cost model moves them (each buffer not there from
  // its fastest source, one after another on the node's stream); books
  // the copies when `book`.
  double Transfers(NodeId v, int device, double ready, bool book);
  double Transfers(NodeId v, int device, double ready) const;
  // The latest estimated finish of v's predecessors.
  double Ready(NodeId v) const;
  // Fills lookahead_ (PEFT's optimistic cost table), backwards.
  void ComputeLookahead();

  const Graph& graph_;
  const Dag& dag_;
  const DeviceContext& context_;
  const Topology& topology_;
  DataLocations locations_;
  std::vector<int> device_;  // by NodeId; -1 until placed
  int next_ = 0;             // round-robin counter
  // STREAM_AWARE model.
  std::vector<int> opened_;      // by device
  std::vector<uint8_t> handed_;  // by NodeId: its stream was inherited
  bool track_streams_;
  bool track_locations_;
  // MIN_FINISH_TIME model: the cost model's machine, booked in issue
  // order.
  bool track_finish_;
  std::vector<double> finish_;              // by NodeId
  std::vector<double> start_;               // by NodeId
  std::vector<OccupancyTimeline> kernels_;  // by device
  // By device: its host-to-device and device-to-device copy engines.
  std::vector<OccupancyTimeline> uploads_;
  std::vector<OccupancyTimeline> peer_copies_;
  int32_t copy_units_ = kOccupancyUnits;
  // By buffer: some node has written it (before, it holds its initial
  // zeros or fill wherever it is needed, for free).
  std::vector<uint8_t> written_;
  // By buffer: when the device node that wrote its latest version ends
  // (its eager copies leave then), or -1.
  std::vector<double> written_at_;
  // By buffer: some node has used it (host data is uploaded for its first
  // use from the job's start); by device: when its upload stream is free.
  std::vector<uint8_t> used_;
  std::vector<double> upload_stream_;
  // By (buffer, device), for data a transfer brought there: when it
  // arrived. A later user there, or a copy from there, waits for it.
  absl::flat_hash_map<int64_t, double> arrival_;
  // The ready time of the last node asked about (its predecessors'
  // latest estimated finish), which every device's estimate shares.
  mutable NodeId ready_node_ = -1;
  mutable double ready_us_ = 0;
  // LOOKAHEAD_FINISH_TIME: by NodeId * num_devices + device.
  std::vector<double> lookahead_;
};

// Per-argument bytes present on a device, and the total (each buffer
// argument counts, repeats too): what MIN_TRANSFER_SIZE and the
// transfer-time policies weigh.
struct DataPresence {
  double total = 0;
  std::vector<double> present;  // by candidate index
  bool on_some_device = false;  // some argument is up to date on a device
};
DataPresence MeasurePresence(NodeId v, absl::Span<const int> candidates,
                             const PlacementState& state);

// GrCUDA's per-argument link bandwidth to `target` (GB/s): infinite if the
// buffer is up to date there, else the best (`best` = true, MINMIN) or
// worst (MINMAX) link from a place holding it; 0 if there is no link.
double LinkBandwidth(const Topology& topology, DataLocations::Mask where,
                     int target, bool best);

class RoundRobinPolicy final : public DevicePolicy {
 public:
  DevicePolicyKind kind() const override {
    return DevicePolicyKind::kRoundRobin;
  }
  DeviceDecision Decide(NodeId v, absl::Span<const int> candidates,
                        const PlacementState& state) const override;
};

class StreamAwarePolicy final : public DevicePolicy {
 public:
  DevicePolicyKind kind() const override {
    return DevicePolicyKind::kStreamAware;
  }
  DeviceDecision Decide(NodeId v, absl::Span<const int> candidates,
                        const PlacementState& state) const override;
};

class MinTransferSizePolicy final : public DevicePolicy {
 public:
  DevicePolicyKind kind() const override {
    return DevicePolicyKind::kMinTransferSize;
  }
  DeviceDecision Decide(NodeId v, absl::Span<const int> candidates,
                        const PlacementState& state) const override;
};

// MINMIN_TRANSFER_TIME (best source link) or MINMAX_TRANSFER_TIME (worst).
class TransferTimePolicy final : public DevicePolicy {
 public:
  explicit TransferTimePolicy(bool best_link) : best_link_(best_link) {}
  DevicePolicyKind kind() const override {
    return best_link_ ? DevicePolicyKind::kMinMinTransferTime
                      : DevicePolicyKind::kMinMaxTransferTime;
  }
  DeviceDecision Decide(NodeId v, absl::Span<const int> candidates,
                        const PlacementState& state) const override;

 private:
  bool best_link_;
};

class MinFinishTimePolicy final : public DevicePolicy {
 public:
  DevicePolicyKind kind() const override {
    return DevicePolicyKind::kMinFinishTime;
  }
  DeviceDecision Decide(NodeId v, absl::Span<const int> candidates,
                        const PlacementState& state) const override;
};

class LookaheadFinishTimePolicy final : public DevicePolicy {
 public:
  DevicePolicyKind kind() const override {
    return DevicePolicyKind::kLookaheadFinishTime;
  }
  DeviceDecision Decide(NodeId v, absl::Span<const int> candidates,
                        const PlacementState& state) const override;
};

absl::StatusOr<std::unique_ptr<DevicePolicy>> CreateDevicePolicy(
    DevicePolicyKind kind);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_DEVICE_POLICY_H_
