// Options of the planner (planner.h), in a header of their own so that the
// planner's stages can take them without depending on the planner.
#ifndef WEFT_SCHEDULER_PLANNER_OPTIONS_H_
#define WEFT_SCHEDULER_PLANNER_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "scheduler/topology.h"

namespace weft::scheduler {

enum class DevicePolicyKind {
  kRoundRobin,
  kStreamAware,
  kMinTransferSize,
  kMinMinTransferTime,
  kMinMaxTransferTime,
  kMinFinishTime,
  kLookaheadFinishTime,
};

// The wire name of a policy, e.g. "ROUND_ROBIN".
constexpr absl::string_view DevicePolicyName(DevicePolicyKind kind) {
  switch (kind) {
    case DevicePolicyKind::kRoundRobin:
      return "ROUND_ROBIN";
    case DevicePolicyKind::kStreamAware:
      return "STREAM_AWARE";
    case DevicePolicyKind::kMinTransferSize:
      return "MIN_TRANSFER_SIZE";
    case DevicePolicyKind::kMinMinTransferTime:
      return "MINMIN_TRANSFER_TIME";
    case DevicePolicyKind::kMinMaxTransferTime:
      return "MINMAX_TRANSFER_TIME";
    case DevicePolicyKind::kMinFinishTime:
      return "MIN_FINISH_TIME";
    case DevicePolicyKind::kLookaheadFinishTime:
      return "LOOKAHEAD_FINISH_TIME";
  }
  return "UNKNOWN";
}

enum class StreamMode { kMulti, kSingle };

// The issue order (scheduler/memory/memory_order.h): the submitted node
// order wherever dependencies allow, or one that keeps fewer bytes live;
// kAuto is the submitted order unless a device's arena would exceed its
// budget, where the memory-aware order is tried before spilling
// (spill_fitting.h).
enum class MemoryOrderKind { kAuto, kSubmitted, kMemoryAware };

struct PlannerOptions {
  int num_devices = 1;
  DevicePolicyKind device_policy = DevicePolicyKind::kLookaheadFinishTime;
  StreamMode stream_mode = StreamMode::kMulti;
  // Soft cap; by default as many as a device runs kernels at once
  // (max_concurrent_kernels), so streams never serialize what the device
  // could run side by side.
  int max_streams_per_device = 32;
  // Busy streams per device from other running jobs (STREAM_AWARE); empty
  // means all idle.
  std::vector<int> busy_streams;

  // Copy bandwidths between the host and the devices; unset: the default
  // for num_devices simulated devices (Topology::Default).
  std::optional<Topology> topology;
  // MIN_TRANSFER_SIZE and the transfer-time policies prefer a device only
  // if it holds more than this fraction of a node's argument bytes
  // (GrCUDA's DataThreshold).
  double data_threshold = 0.1;
  // Keep a node on one of its predecessors' devices when the policy rates
  // that no worse than its overall choice (GrCUDA's "multigpu-disjoint",
  // without ever accepting a worse device).
  bool restrict_to_parent_devices = false;
  // Physical stream splitting: tasks (a node, plus one per event it
  // records or waits on) per stream before the rest moves to a new stream;
  // 0: no limit, else at least 3.
  int max_nodes_per_stream = 65536;
  // The cost model's machine (cost_model.h): kernels one device runs at
  // once, however small their occupancy (the simulated device's kernel
  // slots), and copies each copy engine of a device runs at once.
  int max_concurrent_kernels = 32;
  int copy_engines_per_device = 1;
  // Fill Plan::reasons (one line per node on why its device and stream).
  // Costs a string per node; planning is faster without.
  bool explain = true;
  // Run the cost model's simulation (cost_model.h): fills every node's
  // estimated start, end and transfer time and the estimated makespan.
  // Executing a plan needs none of them, and planning takes about a third
  // less time without; false leaves them and the lower bound (which only
  // means something beside them) 0. The critical path is filled either
  // way.
  bool simulate = true;
  MemoryOrderKind memory_order = MemoryOrderKind::kAuto;
  // Copy data between devices as soon as it is written, on a COPY stream
  // of the reading device, instead of on the reader's stream once all its
  // inputs are ready (eager_copies.h; Plan::copies). Not in SINGLE stream
  // mode, which keeps one stream per device.
  bool eager_copies = true;
  // Control nodes' bodies are planned on the device of their control node,
  // as a loop the device runs by itself needs (unless a body pins nodes to
  // devices); false plans them over every device like a graph of their
  // own (ScheduleOptions.control_mode CONTROL_HOST).
  bool bodies_on_one_device = true;
  // Device memory this job's buffers may take, by device (0 or missing:
  // the device's memory, where known; else no budget). A node whose own
  // arguments exceed its device's budget is refused (RESOURCE_EXHAUSTED);
  // reported in Plan::memory.
  std::vector<int64_t> memory_budget_bytes;
  // Each device's memory, by device (0 or missing: unknown); budgets above
  // it are clamped to it.
  std::vector<int64_t> device_memory_bytes;
  // Plan memory (Plan::memory, Plan::buffers) even when not simulating, as
  // the executor needs it to place buffers (job plans).
  bool plan_memory = false;
  // Plan memory, whatever else is asked, where the plan's buffers each
  // allocated by itself (memory::BytesWithoutReuse) would exceed a device's
  // budget: without a memory plan such a job cannot run.
  bool plan_memory_over_budget = false;
  // Where memory is planned and an arena exceeds its device's budget, add
  // spills and fills until it fits (spill_fitting.h; Plan::graph).
  bool fit_memory = true;
  // Rounds of re-placing the best arena assignment while it shrinks
  // (memory::ArenaOptions::improve_rounds) for the plan returned. Spill
  // fitting places its candidate plans without them and the plan it keeps
  // with them, where that makes no arena larger.
  int arena_improve_rounds = 4;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PLANNER_OPTIONS_H_
