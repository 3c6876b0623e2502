#include "server/job_run.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace weft::server {
namespace {

// What the callbacks of one run need to describe nodes.
struct RunContext {
  std::shared_ptr<const scheduler::Graph> graph;
  std::vector<int> device;  // by node id
  std::vector<int> stream;  // by node id
  std::function<absl::Time()> clock;
  // By loop: the iteration it reported last (on_control runs on the
  // executor's scheduling thread only).
  absl::flat_hash_map<std::string, int64_t> last_iteration;
};

}  // namespace

runtime::JobCallbacks MakeRunCallbacks(
    std::shared_ptr<JobRecord> job,
    std::shared_ptr<const scheduler::Graph> graph,
    std::shared_ptr<const scheduler::Plan> plan, Metrics* metrics,
    std::function<absl::Time()> clock, RunFinishFn finish) {
  auto ctx = std::make_shared<RunContext>();
  ctx->device.assign(graph->num_nodes(), -1);
  ctx->stream.assign(graph->num_nodes(), -1);
  for (const scheduler::PlannedNode& n : plan->nodes) {
    if (n.node >= 0 && n.node < graph->num_nodes()) {
      ctx->device[n.node] = n.device;
      ctx->stream[n.node] = n.stream;
    }
  }
  ctx->graph = std::move(graph);
  ctx->clock = std::move(clock);

  runtime::JobCallbacks callbacks;
  callbacks.on_node = [job, ctx, metrics](scheduler::NodeId node,
                                          runtime::NodeEventKind kind,
                                          const absl::Status& status) {
    if (node < 0 || node >= ctx->graph->num_nodes()) return;
    const scheduler::NodeSpec& spec = ctx->graph->node(node);
    NodeEventInfo event;
    event.node = spec.name;
    event.kind = kind;
    event.device = ctx->device[node];
    event.stream = ctx->stream[node];
    event.time = ctx->clock();
    if (!status.ok()) event.message = status.ToString();
    {
      absl::MutexLock lock(&job->mu);
      if (IsTerminal(job->state)) return;
      if (kind == runtime::NodeEventKind::kFinished) ++job->nodes_done;
      job->events.Add(std::move(event));
      job->Changed();
    }
    if (kind == runtime::NodeEventKind::kFinished) {
      metrics->NodeExecuted(spec.op, ctx->device[node]);
    }
  };
  callbacks.on_control = [job, ctx, metrics](const std::string& node,
                                             runtime::ControlEventKind kind,
                                             int64_t value,
                                             const std::string& message) {
    NodeEventInfo event;
    event.node = node;
    event.control = kind;
    event.value = value;
    event.message = message;
    const scheduler::NodeId id = ctx->graph->FindNode(node);
    if (id >= 0) {
      event.device = ctx->device[id];
      event.stream = ctx->stream[id];
    }
    event.time = ctx->clock();
    {
      absl::MutexLock lock(&job->mu);
      if (IsTerminal(job->state)) return;
      job->events.Add(std::move(event));
      job->Changed();
    }
    if (kind == runtime::ControlEventKind::kIteration) {
      // One event per iteration from the host; one with the count from a
      // loop run on the device; a nested loop starts again from 1.
      int64_t& last = ctx->last_iteration[node];
      metrics->LoopIterations(value > last ? value - last : value);
      last = value;
    } else {
      metrics->CaseBranch();
    }
  };
  callbacks.on_done = [ctx, finish = std::move(finish)](
                          absl::Status status, scheduler::NodeId failed_node,
                          runtime::HostBuffers outputs) {
    std::string failed;
    if (failed_node >= 0 && failed_node < ctx->graph->num_nodes()) {
      failed = ctx->graph->node(failed_node).name;
    }
    finish(std::move(status), std::move(failed), std::move(outputs));
  };
  if (job->untraced_reason.empty()) {
    callbacks.on_trace =
        [job](std::shared_ptr<const runtime::RecordedTrace> trace) {
          const int64_t bytes = trace != nullptr ? trace->ApproxBytes() : 0;
          absl::MutexLock lock(&job->mu);
          job->trace = std::move(trace);
          job->trace_bytes = bytes;
        };
  }
  return callbacks;
}

}  // namespace weft::server
