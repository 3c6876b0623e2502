// A plan run on a fresh simulated machine that matches the planner's
// model (same topology, same kernel slots per device), and what the run
// measured against the plan's estimate: the device timeline from its
// trace and the job's wall time, as weftd reports it. For the benchmarks
// that compare executed jobs with their plans (makespan_bench).
//
// Thread-compatible.
#ifndef WEFT_RUNTIME_MEASURED_RUN_H_
#define WEFT_RUNTIME_MEASURED_RUN_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/executor.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"
#include "scheduler/topology.h"

namespace weft::runtime {

struct MeasuredRun {
  // From the job's first piece of work to the end of its last, output
  // downloads included; -1: the job failed.
  double makespan_us = -1;
  double last_node_us = 0;  // the end of the last graph node (or graph)
  // Wall time from starting the job to its end being reported, as a
  // daemon times a job (what `weftctl get` shows): as the first job of a
  // fresh simulated machine warmed up as weftd's is, (paced) for the same
  // job run again on that machine once the first has ended, as a daemon's
  // long-lived executor runs it, and (paced) as the first job of a fresh
  // machine not warmed up (weftd --warm_up=false).
  double wall_us = 0;
  double warm_wall_us = 0;
  double cold_wall_us = 0;
  uint64_t host_bytes = 0;  // materialised simulated memory at the end
  // Each node's end in the trace, by NodeId (-1: no span of its own).
  std::vector<double> node_end_us;
};

// A simulated machine matching the planner's model: the backend and an
// executor over it.
struct SimMachine {
  std::unique_ptr<SimBackend> backend;
  std::unique_ptr<Executor> executor;
};

// A fresh machine; `warm_up`: warmed up as weftd warms its executor at
// start (warm_up.h), false: untouched.
SimMachine MakeSimMachine(const scheduler::Topology& topology, int kernel_slots,
                          bool paced, bool warm_up);

// Runs `plan` on a fresh simulated machine. Paced (time_scale 1):
// simulated work takes its time in real time, as in weftd, and the machine
// is warmed up first as weftd's is; else as fast as the host can, on a
// machine that has run nothing: an unpaced device books work from where
// its engines' last work ended, so work left over from an earlier job
// would shift this one's start on some devices and not others. A non-empty
// `trace_path` receives the first run's trace (Trace Event JSON). Jobs issue
// node by node (LaunchMode::kStreams), or as device graphs where the
// environment sets WEFT_BENCH_LAUNCH_MODE=graphs. A failed job is said on
// stderr and measured as makespan_us -1.
MeasuredRun RunMeasured(std::shared_ptr<const scheduler::Graph> graph,
                        std::shared_ptr<const scheduler::Plan> plan,
                        const scheduler::Topology& topology, int kernel_slots,
                        bool paced, const std::string& trace_path);

// Where a run parts from its plan: the node that ends earliest in the
// plan's estimate among those whose traced end differs from it by more
// than a nanosecond.
std::string FirstDivergence(const scheduler::Graph& graph,
                            const scheduler::Plan& plan,
                            const MeasuredRun& measured);

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_MEASURED_RUN_H_
