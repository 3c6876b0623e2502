// The warm-up job: built, planned, run and waited for (warm_up.h).
#include "runtime/warm_up.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "scheduler/planner.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

scheduler::BufferId AddBuffer(std::vector<scheduler::BufferSpec>& buffers,
                              std::string name,
                              scheduler::BufferSpec::Init init) {
  scheduler::BufferSpec buffer;
  buffer.name = std::move(name);
  buffer.size_bytes = kWarmUpBufferBytes;
  buffer.init = init;
  if (init == scheduler::BufferSpec::Init::kData) buffer.data = "warm-up";
  buffers.push_back(std::move(buffer));
  return static_cast<scheduler::BufferId>(buffers.size() - 1);
}

scheduler::NodeSpec Spin(std::string name, int device) {
  scheduler::NodeSpec node;
  node.name = std::move(name);
  node.op = "spin";
  node.cost_us = kWarmUpSpinUs;
  node.device = device;
  return node;
}

// What the job's callbacks report, shared with them so that a job that
// outlives a timed-out wait touches nothing of WarmUp's frame.
struct Outcome {
  absl::Notification done;
  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);
};

}  // namespace

scheduler::Graph WarmUpGraph(int devices, int streams_per_device) {
  using scheduler::Access;
  using scheduler::BufferSpec;
  using scheduler::BufferUse;
  std::vector<BufferSpec> buffers;
  std::vector<scheduler::NodeSpec> nodes;
  const scheduler::BufferId in =
      AddBuffer(buffers, "in", BufferSpec::Init::kData);
  scheduler::NodeSpec join = Spin("join", 0);
  for (int d = 0; d < devices; ++d) {
    for (int s = 0; s < streams_per_device; ++s) {
      const std::string name = absl::StrCat("warm_", d, "_", s);
      const scheduler::BufferId out =
          AddBuffer(buffers, name, BufferSpec::Init::kZero);
      scheduler::NodeSpec node = Spin(name, d);
      node.args.push_back(BufferUse{in, Access::kRead});
      node.args.push_back(BufferUse{out, Access::kWrite});
      nodes.push_back(std::move(node));
      join.args.push_back(BufferUse{out, Access::kRead});
    }
  }
  const scheduler::BufferId result =
      AddBuffer(buffers, "out", BufferSpec::Init::kZero);
  buffers[result].output = true;
  join.args.push_back(BufferUse{result, Access::kWrite});
  nodes.push_back(std::move(join));
  return scheduler::Graph("warm-up", std::move(buffers), std::move(nodes));
}

absl::Status WarmUp(Executor& executor, const WarmUpOptions& options) {
  if (options.streams_per_device < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("streams_per_device must be at least 1, not ",
                     options.streams_per_device));
  }
  const int devices = executor.device_count();
  auto graph = std::make_shared<const scheduler::Graph>(
      WarmUpGraph(devices, options.streams_per_device));
  scheduler::PlannerOptions planner = options.planner;
  planner.num_devices = devices;
  planner.explain = false;
  WEFT_ASSIGN_OR_RETURN(scheduler::Plan plan,
                        scheduler::PlanGraph(*graph, planner));
  // A plan that spills runs its own graph (Plan::graph).
  if (plan.graph != nullptr) graph = plan.graph;
  auto outcome = std::make_shared<Outcome>();
  JobCallbacks callbacks;
  callbacks.on_done = [outcome](absl::Status status, scheduler::NodeId,
                                HostBuffers) {
    {
      absl::MutexLock lock(&outcome->mu);
      outcome->status = std::move(status);
    }
    outcome->done.Notify();
  };
  if (options.trace) {
    // Recorded as a traced job's is; nobody reads it.
    callbacks.on_trace = [](std::shared_ptr<const RecordedTrace>) {};
  }
  WEFT_ASSIGN_OR_RETURN(
      const uint64_t id,
      executor.Start(graph,
                     std::make_shared<const scheduler::Plan>(std::move(plan)),
                     std::move(callbacks), options.job));
  if (!outcome->done.WaitForNotificationWithTimeout(options.timeout)) {
    executor.Cancel(id);
    return absl::DeadlineExceededError(
        absl::StrCat("the warm-up job did not finish in ",
                     absl::FormatDuration(options.timeout)));
  }
  absl::MutexLock lock(&outcome->mu);
  if (!outcome->status.ok()) {
    return absl::Status(
        outcome->status.code(),
        absl::StrCat("warm-up job: ", outcome->status.message()));
  }
  return absl::OkStatus();
}

}  // namespace weft::runtime
