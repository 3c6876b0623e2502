// Runs a plan on a fresh simulated machine and measures it
// (measured_run.h).
#include "runtime/measured_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/timed_job.h"
#include "runtime/trace.h"
#include "runtime/warm_up.h"

namespace weft::runtime {

// Where a run parts from its plan: the node that ends earliest in the
// plan's estimate among those whose traced end differs from it by more
// than a nanosecond.
std::string FirstDivergence(const scheduler::Graph& graph,
                            const scheduler::Plan& plan,
                            const MeasuredRun& measured) {
  int first = -1;
  int compared = 0;
  for (int i = 0; i < static_cast<int>(plan.nodes.size()); ++i) {
    const scheduler::NodeId node = plan.nodes[i].node;
    if (i >= static_cast<int>(plan.estimates.size()) ||
        node >= static_cast<int>(measured.node_end_us.size()) ||
        measured.node_end_us[node] < 0) {
      continue;
    }
    ++compared;
    if (std::abs(measured.node_end_us[node] - plan.estimates[i].end_us) >
            1e-3 &&
        (first < 0 ||
         plan.estimates[i].end_us < plan.estimates[first].end_us)) {
      first = i;
    }
  }
  if (compared == 0) {
    return "no node has a span of its own (device graphs are traced per "
           "graph): nothing to compare node by node";
  }
  if (first < 0) {
    return "every node ends as estimated: the difference is in the copies "
           "after them (downloads) or rounding";
  }
  const scheduler::PlannedNode& pn = plan.nodes[first];
  const scheduler::NodeSpec& spec = graph.node(pn.node);
  const scheduler::NodeEstimate& estimate = plan.estimates[first];
  return absl::StrCat(
      "first divergence: node ", spec.name, " (issue position ", first,
      ", device ", pn.device, ", stream ", pn.stream, ", cost ", spec.cost_us,
      " us, occupancy ", spec.occupancy, ") estimated ", estimate.start_us,
      "..", estimate.end_us, " us (transfers ", estimate.transfer_us,
      " us), traced end ", measured.node_end_us[pn.node], " us");
}

// A fresh machine; `warm_up`: warmed up as weftd warms its executor at
// start (warm_up.h), false: untouched.
SimMachine MakeSimMachine(const scheduler::Topology& topology, int kernel_slots,
                          bool paced, bool warm_up) {
  SimBackend::Options sim;
  sim.num_devices = topology.num_devices();
  sim.bandwidth_gbps = topology.Matrix();
  sim.max_concurrent_kernels = kernel_slots;
  sim.time_scale = paced ? 1.0 : 0;
  sim.memory_bytes = uint64_t{64} << 30;  // accounted only; see host_bytes
  SimMachine machine;
  machine.backend = SimBackend::Create(sim).value();
  Executor::Options options;
  options.backend = machine.backend.get();
  machine.executor = Executor::Create(options).value();
  if (warm_up) {
    WarmUpOptions warm;
    warm.planner.topology = topology;
    warm.planner.max_concurrent_kernels = kernel_slots;
    warm.planner.plan_memory = true;
    const absl::Status status = WarmUp(*machine.executor, warm);
    if (!status.ok()) {
      std::fprintf(stderr, "warm-up failed: %s\n", status.ToString().c_str());
    }
  }
  return machine;
}

// See measured_run.h.
MeasuredRun RunMeasured(std::shared_ptr<const scheduler::Graph> graph,
                        std::shared_ptr<const scheduler::Plan> plan,
                        const scheduler::Topology& topology, int kernel_slots,
                        bool paced, const std::string& trace_path) {
  const SimMachine machine =
      MakeSimMachine(topology, kernel_slots, paced, /*warm_up=*/paced);
  const char* mode = std::getenv("WEFT_BENCH_LAUNCH_MODE");
  const bool graphs = mode != nullptr && std::string(mode) == "graphs";
  JobOptions job_options;
  job_options.launch_mode =
      graphs ? LaunchMode::kDeviceGraphs : LaunchMode::kStreams;
  // Runs the job once on `executor`: its wall time in us, -1 if it failed.
  auto run = [&](Executor& executor, JobTrace* trace) {
    return RunTimedJob(executor, graph, plan, job_options, trace);
  };
  JobTrace trace;
  MeasuredRun measured;
  measured.wall_us = run(*machine.executor, &trace);
  if (measured.wall_us < 0) return MeasuredRun();
  for (int d = 0; d < topology.num_devices(); ++d) {
    measured.host_bytes += machine.backend->materialized_bytes(d);
  }
  if (paced) {
    JobTrace again;
    measured.warm_wall_us = run(*machine.executor, &again);
    if (measured.warm_wall_us < 0) return MeasuredRun();
    const SimMachine cold =
        MakeSimMachine(topology, kernel_slots, paced, /*warm_up=*/false);
    JobTrace first;
    measured.cold_wall_us = run(*cold.executor, &first);
    if (measured.cold_wall_us < 0) return MeasuredRun();
  }
  // The trace starts (0) at the job's first work, uploads included, and
  // has a span for every piece of device work: nodes, uploads, copies
  // between devices, fills and the output downloads that end the job.
  double last = 0;
  measured.node_end_us.assign(graph->num_nodes(), -1);
  for (const TraceSpan& span : trace.spans) {
    last = std::max(last, span.end_us);
    if (span.node >= 0 || span.op == "graph") {
      measured.last_node_us = std::max(measured.last_node_us, span.end_us);
    }
    if (span.node >= 0 && span.node < graph->num_nodes()) {
      measured.node_end_us[span.node] = span.end_us;
    }
  }
  measured.makespan_us = last;
  if (!trace_path.empty()) {
    std::ofstream out(trace_path);
    out << ToTraceEventJson(trace);
    if (!out) std::fprintf(stderr, "cannot write %s\n", trace_path.c_str());
  }
  return measured;
}

}  // namespace weft::runtime
