// Runs Plans on a Backend.
//
// For each job the executor allocates the graph's buffers on the devices the
// plan chose (from a per-device caching MemoryPool, so that a warmed-up
// executor does no device allocation per job), uploads initial contents,
// maps the plan's logical streams onto backend streams, issues every node in
// plan order with the plan's event waits and signals, reports each node as it
// starts and finishes, copies output buffers back to the host and reports the
// job's outcome exactly once. A buffer used on several devices is kept coherent
// by device-to-device copies the executor inserts. Device work never blocks an
// executor thread: completions arrive as host callbacks. Host-engine nodes run
// on a small host worker pool, gated into their streams (see job.h). Many jobs
// run at once on shared devices; a fault of one job's work fails that job only.
// On request a job records a trace of where and when its work ran
// (trace.h).
//
// Thread-safe.
#ifndef WEFT_RUNTIME_EXECUTOR_H_
#define WEFT_RUNTIME_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/host_buffer.h"
#include "runtime/memory_pool.h"
#include "runtime/plan_check.h"
#include "runtime/recorded_trace.h"
#include "runtime/trace.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::runtime {

class CpuKernelTable;

enum class NodeEventKind { kStarted, kFinished, kFailed };

// Progress of a control node (control_run.h): a loop begins iteration
// `value` (1 for the first), or a case..of chose branch `value` (-1: none).
enum class ControlEventKind { kIteration, kBranch };

// Output buffers of a finished job, by buffer name (host_buffer.h: a zero
// tail takes no memory).
using HostBuffers = absl::flat_hash_map<std::string, HostBuffer>;

struct JobCallbacks {
  // Per-node progress, called in order per node from the thread running
  // the executor's turn: its scheduling thread, or the thread that reported
  // a completion (a backend's callback thread, a host worker), which runs
  // the turn itself when no other does; on_done likewise. So a callback
  // must not wait for the backend's work to complete. The first nodes of a
  // job may report kStarted on Start's caller, before Start returns (Start
  // begins a job on its caller when no other job exists); on_done too,
  // where the job fails before issuing anything.
  std::function<void(scheduler::NodeId node, NodeEventKind kind,
                     const absl::Status& status)>
      on_node;
  // Called exactly once. On success `outputs` holds every output buffer.
  // On failure `failed_node` is the node that failed, or -1.
  std::function<void(absl::Status status, scheduler::NodeId failed_node,
                     HostBuffers outputs)>
      on_done;
  // Optional. When set, the job records a trace (two device stamps or
  // marker events per span; no cost when unset) and delivers it here once,
  // just before on_done, for failed and cancelled jobs too: as recorded,
  // for the receiver to Build when it is wanted (recorded_trace.h).
  std::function<void(std::shared_ptr<const RecordedTrace> trace)> on_trace;
  // Optional. Progress of control nodes, by node name (control nodes
  // nested in bodies included), from the executor's turn.
  std::function<void(const std::string& node, ControlEventKind kind,
                     int64_t value, const std::string& message)>
      on_control;
};

// How a job's device work is issued. kStreams: node by node on pooled
// streams, as the plan lays out. kDeviceGraphs: each device's share as
// device graphs (job_graph.h), built once per structure and relaunched
// with new parameters by the backend (Backend::LaunchDeviceGraph); used
// where the backend supports graphs and the job fits (device nodes only,
// built-in ops), node by node otherwise. kAuto: graphs where the backend
// prefers them (CUDA), streams elsewhere (the simulator). kDefault (per
// job only): the executor's Options::launch_mode.
//
// A job issued as graphs reports its nodes started when their graph is
// launched and finished when the whole graph has completed; a failure
// fails the job without naming a node (failed_node -1), the status names
// the device; its trace has one span per graph (and per upload), not per
// node.
enum class LaunchMode { kDefault, kAuto, kStreams, kDeviceGraphs };

// Where loops evaluate their conditions (weft.v1.ControlMode). kHost: on
// the host, a nested job per iteration (job.h). kDevice: on the device
// (Backend::LaunchDeviceLoop), for loops whose body plan is on one device
// with device ops only; a loop that cannot fails the job with
// FAILED_PRECONDITION naming it. kAuto: on the device wherever the backend
// and the body allow it, on the host elsewhere. case..of reads its
// selector on the host in every mode.
enum class ControlMode { kAuto, kHost, kDevice };

// Per-job settings.
struct JobOptions {
  LaunchMode launch_mode = LaunchMode::kDefault;
  ControlMode control_mode = ControlMode::kAuto;
};

// Per-device counters for metrics and ListDevices.
struct DeviceLoad {
  int streams_busy = 0;
  int streams_total = 0;
  // The device's memory pool: bytes held by jobs, bytes cached, counters.
  MemoryPoolStats memory;
  // Busy streams held by cancelled runs until the device finishes their
  // work (Executor::Cancel); counted in streams_busy too.
  int streams_fenced = 0;
};

class Executor {
 public:
  struct Options {
    Backend* backend = nullptr;  // not owned; outlives the executor
    // 64: a job's plan uses up to 32 streams per device by default (as
    // many as a device runs kernels at once), plus its upload stream,
    // with room for a second job beside it.
    int max_streams_per_device = 64;
    // Threads of the host worker pool that runs host-engine nodes; 0 runs
    // them on the scheduling thread.
    int host_threads = 2;
    // Kernels of host-engine nodes; not owned, must outlive the executor.
    // Null: the built-in ops.
    const CpuKernelTable* host_kernels = nullptr;
    // Most nodes of one job issued and not yet finished. A failure stops
    // issuing; what is in flight still drains first (work queued on a
    // device cannot be recalled; on the simulator, work of a failed job
    // behind its failure is skipped). Cancelling: see Cancel.
    int max_in_flight_per_job = 4096;
    // Most bytes each device's memory pool keeps cached for reuse once jobs
    // give their buffers back (MemoryPool::Options). The default keeps them
    // until the device runs out of memory, when the cache is released
    // before an allocation fails; 0 disables caching.
    uint64_t memory_pool_max_cached_bytes = MemoryPool::kUnlimited;
    // For jobs that leave it to the executor (JobOptions).
    LaunchMode launch_mode = LaunchMode::kAuto;
    // Where a job's plan has a memory plan (Plan::memory, Plan::buffers),
    // take one arena per device from the memory pool for the job and put
    // each planned buffer at its offset there, so buffers whose lifetimes
    // do not overlap share memory. False allocates every buffer by itself
    // for the whole job. Results are the same either way.
    bool place_buffers = true;
    // Spans a traced job records at most (JobCallbacks::on_trace): a loop
    // of many iterations records the first ones and counts the rest
    // (RecordedTrace::spans_dropped). At least 1.
    int64_t trace_max_spans = int64_t{1} << 19;
  };

  static absl::StatusOr<std::unique_ptr<Executor>> Create(Options options);
  virtual ~Executor() = default;

  // Starts a job whose plan was checked for this executor's devices
  // (CheckPlan with device_count(); INVALID_ARGUMENT if checked for
  // another count). The graph and plan stay alive until on_done returns.
  // Returns a handle for Cancel.
  virtual absl::StatusOr<uint64_t> Start(CheckedPlan plan,
                                         JobCallbacks callbacks,
                                         const JobOptions& options) = 0;
  // Checks the plan on the caller's thread, then starts it as above.
  absl::StatusOr<uint64_t> Start(std::shared_ptr<const scheduler::Graph> graph,
                                 std::shared_ptr<const scheduler::Plan> plan,
                                 JobCallbacks callbacks,
                                 const JobOptions& options) {
    absl::StatusOr<CheckedPlan> checked =
        CheckPlan(std::move(graph), std::move(plan), device_count());
    if (!checked.ok()) return checked.status();
    return Start(*std::move(checked), std::move(callbacks), options);
  }
  // The same with the default JobOptions.
  absl::StatusOr<uint64_t> Start(std::shared_ptr<const scheduler::Graph> graph,
                                 std::shared_ptr<const scheduler::Plan> plan,
                                 JobCallbacks callbacks) {
    return Start(std::move(graph), std::move(plan), std::move(callbacks),
                 JobOptions{});
  }

  // Stops issuing work for the run and abandons what it issued; on_done
  // reports CANCELLED within milliseconds. Where the backend interrupts
  // running work (Backend::interrupts_aborted_work, the simulator), the
  // run's streams and memory are free by then. Elsewhere (CUDA) the run is
  // reported at once while the device finishes what was running, and its
  // streams and memory stay held, away from other runs, until it has
  // (DeviceLoad::streams_fenced counts those streams; job.h). No-op for
  // unknown or finished runs.
  virtual void Cancel(uint64_t run) = 0;

  virtual std::vector<DeviceLoad> Load() const = 0;
  // The devices of the backend, which plans are checked for.
  virtual int device_count() const = 0;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_EXECUTOR_H_
