// The check a plan passes before the executor runs it.
//
// A plan comes from the planner or from a client, so it is checked against
// the graph it claims to run and the machine it runs on before anything is
// allocated or enqueued: every node listed exactly once, every stream,
// device and event in range, each node on its stream's device, a peer
// stream on another device, and every dependency issued before its node.
// Everything the job's issue loop indexes with a plan's number is covered,
// so a plan that passes cannot make it read out of bounds. The check is one
// pass over the plan (plans are large) and builds error messages only on
// the error path.
#ifndef WEFT_RUNTIME_PLAN_CHECK_H_
#define WEFT_RUNTIME_PLAN_CHECK_H_

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::runtime {

// Checks that `plan` can run `graph` on `num_devices` devices.
// INVALID_ARGUMENT naming the first problem (e.g. "plan.nodes[1] (node 'b'):
// stream 5 does not exist (2 streams)").
absl::Status ValidatePlan(const scheduler::Graph& graph,
                          const scheduler::Plan& plan, int num_devices);

class CheckedPlan;

// ValidatePlan, kept as proof: the graph and plan, checked for
// `num_devices` devices. INVALID_ARGUMENT as ValidatePlan, or for a
// missing graph or plan.
absl::StatusOr<CheckedPlan> CheckPlan(
    std::shared_ptr<const scheduler::Graph> graph,
    std::shared_ptr<const scheduler::Plan> plan, int num_devices);

// A graph and a plan that passed the check for a number of devices. Only
// CheckPlan makes one (both are immutable behind their pointers), so the
// executor starts it without checking again: a caller can check a plan
// where it is made (weftd, at admission) rather than where the job starts.
class CheckedPlan {
 public:
  const std::shared_ptr<const scheduler::Graph>& graph() const {
    return graph_;
  }
  const std::shared_ptr<const scheduler::Plan>& plan() const { return plan_; }
  int num_devices() const { return num_devices_; }

 private:
  friend absl::StatusOr<CheckedPlan> CheckPlan(
      std::shared_ptr<const scheduler::Graph> graph,
      std::shared_ptr<const scheduler::Plan> plan, int num_devices);
  CheckedPlan(std::shared_ptr<const scheduler::Graph> graph,
              std::shared_ptr<const scheduler::Plan> plan, int num_devices)
      : graph_(std::move(graph)),
        plan_(std::move(plan)),
        num_devices_(num_devices) {}

  std::shared_ptr<const scheduler::Graph> graph_;
  std::shared_ptr<const scheduler::Plan> plan_;
  int num_devices_ = 0;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_PLAN_CHECK_H_
