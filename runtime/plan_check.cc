#include "runtime/plan_check.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::runtime {

using scheduler::NodeId;
using scheduler::PlannedNode;

absl::Status ValidatePlan(const scheduler::Graph& graph,
                          const scheduler::Plan& plan, int num_devices) {
  const int n = graph.num_nodes();
  if (static_cast<int>(plan.nodes.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan lists ", plan.nodes.size(), " nodes but graph '",
                     graph.name(), "' has ", n));
  }
  if (plan.deps.rows() != n || plan.waits.rows() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan.deps and plan.waits have ", plan.deps.rows(), " and ",
        plan.waits.rows(), " rows; the plan lists ", n, " nodes"));
  }
  if (!plan.deps.WellFormed() || !plan.waits.WellFormed()) {
    return absl::InvalidArgumentError(
        "plan.deps or plan.waits: offsets must start at 0, never go down "
        "and end at the item count");
  }
  if (plan.num_events < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.num_events is negative (", plan.num_events, ")"));
  }
  const int num_streams = static_cast<int>(plan.streams.size());
  for (int s = 0; s < num_streams; ++s) {
    const int device = plan.streams[s].device;
    if (device < 0 || device >= num_devices) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.streams[", s, "]: device ", device,
                       " is outside the machine (", num_devices, " devices)"));
    }
  }
  std::vector<int> position(n, -1);
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan.nodes[i];
    // Error contexts, built only on the error path (this loop is hot).
    auto where = [i] { return absl::StrCat("plan.nodes[", i, "]"); };
    auto named = [&] {
      return absl::StrCat(where(), " (node '", graph.node(pn.node).name, "')");
    };
    if (pn.node < 0 || pn.node >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), ": node id ", pn.node, " is out of range"));
    }
    if (position[pn.node] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ": node '", graph.node(pn.node).name, "' is listed twice"));
    }
    position[pn.node] = i;
    if (pn.device < 0 || pn.device >= num_devices) {
      return absl::InvalidArgumentError(
          absl::StrCat(named(), ": device ", pn.device,
                       " is outside the machine (", num_devices, " devices)"));
    }
    if (pn.stream < 0 || pn.stream >= num_streams) {
      return absl::InvalidArgumentError(
          absl::StrCat(named(), ": stream ", pn.stream, " does not exist (",
                       num_streams, " streams)"));
    }
    if (plan.streams[pn.stream].device != pn.device) {
      return absl::InvalidArgumentError(absl::StrCat(
          named(), ": runs on device ", pn.device, " but its stream ",
          pn.stream, " is on device ", plan.streams[pn.stream].device));
    }
    if (pn.peer_stream != -1 &&
        (pn.peer_stream < 0 || pn.peer_stream >= num_streams ||
         plan.streams[pn.peer_stream].device == pn.device)) {
      return absl::InvalidArgumentError(absl::StrCat(
          named(), ": peer stream ", pn.peer_stream,
          " is not a stream of another device (", num_streams, " streams)"));
    }
    for (int e : plan.Waits(i)) {
      if (e < 0 || e >= plan.num_events) {
        return absl::InvalidArgumentError(absl::StrCat(
            named(), ": waits on event ", e, " of ", plan.num_events));
      }
    }
    if (pn.signal_event < -1 || pn.signal_event >= plan.num_events) {
      return absl::InvalidArgumentError(
          absl::StrCat(named(), ": signals event ", pn.signal_event, " of ",
                       plan.num_events));
    }
    // In the same pass (the plan is large): a dependency issued before this
    // node has its position already, below i.
    for (NodeId dep : plan.Deps(i)) {
      if (dep < 0 || dep >= n || position[dep] < 0 || position[dep] >= i) {
        return absl::InvalidArgumentError(absl::StrCat(
            named(), ": dependency ", dep, " is not issued before it"));
      }
    }
  }
  // Eager copies: in issue order of their readers, each from an earlier
  // node that signals the event it waits on, onto a stream of its own
  // device.
  for (size_t c = 0; c < plan.copies.size(); ++c) {
    const scheduler::PlannedCopy& copy = plan.copies[c];
    const bool ordered = c == 0 || plan.copies[c - 1].before <= copy.before;
    if (!ordered || copy.after < 0 || copy.before >= n ||
        copy.after >= copy.before || copy.buffer < 0 ||
        copy.buffer >= graph.num_buffers() || copy.device < 0 ||
        copy.device >= num_devices || copy.stream < 0 ||
        copy.stream >= num_streams ||
        plan.streams[copy.stream].device != copy.device || copy.event < 0 ||
        plan.nodes[copy.after].signal_event != copy.event) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan's eager copy ", c, " (buffer ", copy.buffer, " to device ",
          copy.device, " on stream ", copy.stream, " from position ",
          copy.after, " to ", copy.before, ", event ", copy.event,
          ") is out of order or refers to what the plan does not have"));
    }
  }
  // Control nodes: a plan per body, each checked against its body.
  if (!graph.has_control()) return absl::OkStatus();
  if (static_cast<int>(plan.bodies.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan has body plans for ", plan.bodies.size(),
                     " nodes but graph '", graph.name(), "' has ", n));
  }
  for (NodeId v = 0; v < n; ++v) {
    const scheduler::NodeSpec& node = graph.node(v);
    const size_t want = node.control ? node.control->bodies.size() : 0;
    if (plan.bodies[v].size() != want) {
      return absl::InvalidArgumentError(
          absl::StrCat("node '", node.name, "' has ", want,
                       " bodies but the plan plans ", plan.bodies[v].size()));
    }
    for (size_t b = 0; b < want; ++b) {
      if (plan.bodies[v][b] == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", node.name, "': body ", b, " has no plan"));
      }
      absl::Status s = ValidatePlan(*node.control->bodies[b],
                                    *plan.bodies[v][b], num_devices);
      if (!s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node '", node.name, "' body ", b, ": ", s.message()));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckedPlan> CheckPlan(
    std::shared_ptr<const scheduler::Graph> graph,
    std::shared_ptr<const scheduler::Plan> plan, int num_devices) {
  if (graph == nullptr || plan == nullptr) {
    return absl::InvalidArgumentError("graph and plan are required");
  }
  if (absl::Status s = ValidatePlan(*graph, *plan, num_devices); !s.ok()) {
    return s;
  }
  return CheckedPlan(std::move(graph), std::move(plan), num_devices);
}

}  // namespace weft::runtime
