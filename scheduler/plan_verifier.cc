#include "scheduler/plan_verifier.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace weft::scheduler {
namespace {

// A set of node ids as bits.
class Bits {
 public:
  explicit Bits(int n) : words_((n + 63) / 64, 0) {}
  void Set(int i) { words_[i / 64] |= uint64_t{1} << (i % 64); }
  bool Get(int i) const { return (words_[i / 64] >> (i % 64)) & 1; }
  void Or(const Bits& o) {
    for (size_t k = 0; k < words_.size(); ++k) words_[k] |= o.words_[k];
  }

 private:
  std::vector<uint64_t> words_;
};

absl::Status Fail(const std::string& why) {
  return absl::FailedPreconditionError(why);
}

bool Near(double a, double b) {
  return std::fabs(a - b) <= 1e-6 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

}  // namespace

std::vector<std::vector<NodeId>> ReferenceDependencies(const Graph& graph) {
  const int n = graph.num_nodes();
  std::vector<Bits> reach(n, Bits(n));  // reach[j]: ancestors of j
  std::vector<std::vector<NodeId>> direct(n);
  for (NodeId j = 0; j < n; ++j) {
    const std::vector<BufferUse> uses_j = graph.BufferUses(j);
    for (NodeId i = 0; i < j; ++i) {
      for (const BufferUse& a : graph.BufferUses(i)) {
        for (const BufferUse& b : uses_j) {
          if (a.buffer == b.buffer && (Writes(a.access) || Writes(b.access))) {
            direct[j].push_back(i);
          }
        }
      }
    }
    for (NodeId a : graph.node(j).after) direct[j].push_back(a);
  }
  // Closure by repeated relaxation (edges may point backwards in node order
  // through `after`; the graph is acyclic, so n rounds suffice).
  for (NodeId j = 0; j < n; ++j) {
    for (NodeId i : direct[j]) reach[j].Set(i);
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (NodeId j = 0; j < n; ++j) {
      Bits before = reach[j];
      for (NodeId i : direct[j]) reach[j].Or(reach[i]);
      for (int k = 0; k < n && !changed; ++k) {
        changed = reach[j].Get(k) != before.Get(k);
      }
    }
  }
  std::vector<std::vector<NodeId>> deps(n);
  for (NodeId j = 0; j < n; ++j) {
    for (NodeId i = 0; i < n; ++i) {
      if (!reach[j].Get(i)) continue;
      bool implied = false;
      for (NodeId k = 0; k < n && !implied; ++k) {
        implied = k != i && reach[j].Get(k) && reach[k].Get(i);
      }
      if (!implied) deps[j].push_back(i);
    }
  }
  return deps;
}

absl::Status VerifyPlan(const Graph& graph, const Plan& plan) {
  const int n = graph.num_nodes();
  if (static_cast<int>(plan.nodes.size()) != n) {
    return Fail(
        absl::StrCat("plan has ", plan.nodes.size(), " nodes, graph ", n));
  }
  std::vector<int> pos(n, -1);
  for (int i = 0; i < n; ++i) {
    const NodeId v = plan.nodes[i].node;
    if (v < 0 || v >= n || pos[v] >= 0) {
      return Fail(
          absl::StrCat("plan node ", i, " is ", v, ": not a permutation"));
    }
    pos[v] = i;
  }
  if (plan.deps.rows() != n || plan.waits.rows() != n) {
    return Fail(absl::StrCat("plan has ", plan.deps.rows(),
                             " rows of deps and ", plan.waits.rows(),
                             " of waits for ", n, " nodes"));
  }
  if (!plan.deps.WellFormed() || !plan.waits.WellFormed()) {
    return Fail("plan's rows of deps or waits are malformed");
  }
  if (!plan.estimates.empty() && static_cast<int>(plan.estimates.size()) != n) {
    return Fail(absl::StrCat("plan has ", plan.estimates.size(),
                             " estimates for ", n, " nodes"));
  }
  // Dependencies: exact, and in issue order.
  const std::vector<std::vector<NodeId>> expected =
      ReferenceDependencies(graph);
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan.nodes[i];
    std::vector<NodeId> deps(plan.Deps(i).begin(), plan.Deps(i).end());
    std::sort(deps.begin(), deps.end());
    if (deps != expected[pn.node]) {
      return Fail(absl::StrCat("deps of '", graph.node(pn.node).name, "' are [",
                               absl::StrJoin(deps, ","), "], expected [",
                               absl::StrJoin(expected[pn.node], ","), "]"));
    }
    for (NodeId d : plan.Deps(i)) {
      if (pos[d] >= pos[pn.node]) {
        return Fail(absl::StrCat("'", graph.node(pn.node).name,
                                 "' is issued before its dep '",
                                 graph.node(d).name, "'"));
      }
    }
  }
  // Streams.
  const int num_streams = static_cast<int>(plan.streams.size());
  std::vector<int> stream_use(num_streams, 0);
  for (int s = 0; s < num_streams; ++s) {
    if (plan.streams[s].id != s) {
      return Fail(absl::StrCat("stream ", s, " has id ", plan.streams[s].id));
    }
  }
  for (const PlannedNode& pn : plan.nodes) {
    if (pn.stream < 0 || pn.stream >= num_streams) {
      return Fail(absl::StrCat("bad stream ", pn.stream));
    }
    ++stream_use[pn.stream];
    if (plan.streams[pn.stream].device != pn.device) {
      return Fail(absl::StrCat("'", graph.node(pn.node).name, "' on device ",
                               pn.device, " uses stream ", pn.stream,
                               " of device ", plan.streams[pn.stream].device));
    }
    if (pn.device < 0 || pn.device >= plan.num_devices) {
      return Fail(absl::StrCat("device ", pn.device, " outside the plan"));
    }
    if (pn.peer_stream == -1) continue;
    if (pn.peer_stream < 0 || pn.peer_stream >= num_streams) {
      return Fail(absl::StrCat("bad peer stream ", pn.peer_stream));
    }
    ++stream_use[pn.peer_stream];
    if (plan.streams[pn.peer_stream].device == pn.device) {
      return Fail(absl::StrCat("'", graph.node(pn.node).name,
                               "' has its peer stream ", pn.peer_stream,
                               " on its own device ", pn.device));
    }
    if (graph.node(pn.node).engine != Engine::kCopy) {
      return Fail(absl::StrCat("'", graph.node(pn.node).name,
                               "' has a peer stream but is no COPY node"));
    }
  }
  // Eager copies: ascending by reader, each on a COPY stream of its own
  // device that no node uses, from a device node that writes the buffer
  // on another device, waiting on that node's event, to a node that uses
  // it on the copy's device.
  std::vector<uint8_t> copy_stream(num_streams, 0);
  for (size_t c = 0; c < plan.copies.size(); ++c) {
    const PlannedCopy& copy = plan.copies[c];
    if (copy.after < 0 || copy.before >= n || copy.after >= copy.before ||
        (c > 0 && copy.before < plan.copies[c - 1].before)) {
      return Fail(absl::StrCat("eager copy ", c, " from position ", copy.after,
                               " to ", copy.before, " is out of order"));
    }
    if (copy.stream < 0 || copy.stream >= num_streams ||
        stream_use[copy.stream] != 0 ||
        plan.streams[copy.stream].device != copy.device ||
        plan.streams[copy.stream].engine != Engine::kCopy) {
      return Fail(
          absl::StrCat("eager copy ", c, " on bad stream ", copy.stream));
    }
    copy_stream[copy.stream] = 1;
    const PlannedNode& writer = plan.nodes[copy.after];
    bool writes = false;
    if (copy.buffer >= 0 && copy.buffer < graph.num_buffers()) {
      for (const BufferUse& use : graph.Uses(writer.node)) {
        writes |= use.buffer == copy.buffer && Writes(use.access);
      }
    }
    const PlannedNode& reader = plan.nodes[copy.before];
    bool reads = false;
    if (copy.buffer >= 0 && copy.buffer < graph.num_buffers()) {
      for (const BufferUse& use : graph.Uses(reader.node)) {
        reads |= use.buffer == copy.buffer;
      }
    }
    if (!reads || reader.device != copy.device) {
      return Fail(absl::StrCat("eager copy ", c, " of buffer ", copy.buffer,
                               " is not for a node on device ", copy.device,
                               " that uses it"));
    }
    if (!writes || writer.device == copy.device ||
        writer.signal_event != copy.event || copy.event < 0) {
      return Fail(absl::StrCat("eager copy ", c, " of buffer ", copy.buffer,
                               " does not follow a writer on another device "
                               "that signals its event"));
    }
  }
  for (int s = 0; s < num_streams; ++s) {
    if (stream_use[s] == 0 && copy_stream[s] == 0) {
      return Fail(absl::StrCat("stream ", s, " unused"));
    }
  }
  // Events.
  std::vector<int> signaller(plan.num_events, -1);
  std::vector<int> waits(plan.num_events, 0);
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan.nodes[i];
    if (pn.signal_event >= plan.num_events || pn.signal_event < -1) {
      return Fail(absl::StrCat("bad signal event ", pn.signal_event));
    }
    if (pn.signal_event >= 0) {
      if (signaller[pn.signal_event] >= 0) {
        return Fail(
            absl::StrCat("event ", pn.signal_event, " signalled twice"));
      }
      signaller[pn.signal_event] = i;
    }
  }
  for (int e = 0; e < plan.num_events; ++e) {
    if (signaller[e] < 0) return Fail(absl::StrCat("event ", e, " unused"));
  }
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan.nodes[i];
    std::vector<int> sorted(plan.Waits(i).begin(), plan.Waits(i).end());
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      return Fail("duplicate wait");
    }
    for (int e : plan.Waits(i)) {
      if (e < 0 || e >= plan.num_events) {
        return Fail(absl::StrCat("wait on bad event ", e));
      }
      ++waits[e];
      const int s = signaller[e];
      if (s >= i) {
        return Fail(absl::StrCat("'", graph.node(pn.node).name,
                                 "' waits on event ", e, " signalled later"));
      }
      const PlannedNode& sn = plan.nodes[s];
      auto on = [](const PlannedNode& a, int stream) {
        return stream >= 0 && (a.stream == stream || a.peer_stream == stream);
      };
      if (on(sn, pn.stream) || on(sn, pn.peer_stream)) {
        return Fail(absl::StrCat("'", graph.node(pn.node).name,
                                 "' waits on its own stream"));
      }
    }
  }
  for (const PlannedCopy& copy : plan.copies) ++waits[copy.event];
  for (int e = 0; e < plan.num_events; ++e) {
    if (waits[e] == 0) return Fail(absl::StrCat("event ", e, " never waited"));
  }
  // Happens-before, by issue position.
  std::vector<Bits> hb(n, Bits(n));  // strictly before, including itself? no
  std::vector<int> last_on_stream(num_streams, -1);
  std::vector<int> prev(n, -1);
  std::vector<int> prev_peer(n, -1);  // the node before it on its peer stream
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan.nodes[i];
    prev[i] = last_on_stream[pn.stream];
    last_on_stream[pn.stream] = i;
    if (pn.peer_stream >= 0) {
      prev_peer[i] = last_on_stream[pn.peer_stream];
      last_on_stream[pn.peer_stream] = i;
    }
    auto add_closed = [&](Bits& into, int j) {
      into.Or(hb[j]);
      into.Set(j);
    };
    if (prev[i] >= 0) add_closed(hb[i], prev[i]);
    if (prev_peer[i] >= 0) add_closed(hb[i], prev_peer[i]);
    for (int e : plan.Waits(i)) add_closed(hb[i], signaller[e]);
    for (NodeId d : plan.Deps(i)) {
      if (!hb[i].Get(pos[d])) {
        return Fail(absl::StrCat("dep '", graph.node(d).name, "' -> '",
                                 graph.node(pn.node).name,
                                 "' is neither stream order nor a wait"));
      }
    }
    // Each wait must add something the others and the stream do not.
    for (int e : plan.Waits(i)) {
      Bits without(n);
      if (prev[i] >= 0) add_closed(without, prev[i]);
      if (prev_peer[i] >= 0) add_closed(without, prev_peer[i]);
      for (int f : plan.Waits(i)) {
        if (f != e) add_closed(without, signaller[f]);
      }
      if (without.Get(signaller[e])) {
        return Fail(absl::StrCat("'", graph.node(pn.node).name,
                                 "' has a redundant wait on event ", e));
      }
    }
  }
  // Times: the critical path always; estimates where the plan was
  // simulated (PlannerOptions::simulate; a job's plan has none).
  const bool simulated = !plan.estimates.empty();
  double makespan = 0, device_work = 0;
  std::vector<double> finish(n, 0);  // longest path ending at node, by pos
  double critical_path = 0;
  for (int i = 0; i < n; ++i) {
    const PlannedNode& pn = plan.nodes[i];
    const NodeEstimate est = plan.Estimate(i);
    const NodeSpec& node = graph.node(pn.node);
    if (simulated && !Near(est.end_us, est.start_us + node.cost_us)) {
      return Fail(absl::StrCat("'", node.name, "' end != start + cost"));
    }
    if (simulated && est.transfer_us < 0) {
      return Fail(absl::StrCat("'", node.name, "' has a negative transfer"));
    }
    makespan = std::max(makespan, est.end_us);
    double start = 0;
    for (NodeId d : plan.Deps(i)) {
      if (simulated && est.start_us < plan.Estimate(pos[d]).end_us - 1e-9) {
        return Fail(absl::StrCat("'", node.name, "' starts before its dep '",
                                 graph.node(d).name, "' ends"));
      }
      start = std::max(start, finish[pos[d]]);
    }
    finish[i] = start + node.cost_us;
    critical_path = std::max(critical_path, finish[i]);
    if (simulated && prev[i] >= 0 &&
        est.start_us < plan.Estimate(prev[i]).end_us - 1e-9) {
      return Fail(absl::StrCat("'", node.name,
                               "' overlaps the node before it on its stream"));
    }
    if (simulated && prev_peer[i] >= 0 &&
        est.start_us < plan.Estimate(prev_peer[i]).end_us - 1e-9) {
      return Fail(absl::StrCat(
          "'", node.name, "' overlaps the node before it on its peer stream"));
    }
    if (node.engine == Engine::kCompute || node.engine == Engine::kCollective) {
      device_work += node.cost_us * node.occupancy;
    }
  }
  if (!Near(plan.critical_path_us, critical_path)) {
    return Fail(absl::StrCat("critical path ", plan.critical_path_us,
                             ", expected ", critical_path));
  }
  if (!simulated) return absl::OkStatus();
  if (plan.estimated_makespan_us < makespan - 1e-6) {
    return Fail(absl::StrCat("makespan ", plan.estimated_makespan_us,
                             " but the last node ends at ", makespan));
  }
  const double lower_bound =
      std::max(critical_path, device_work / std::max(plan.num_devices, 1));
  if (plan.lower_bound_us < lower_bound - 1e-6 * std::max(1.0, lower_bound)) {
    return Fail(absl::StrCat("lower bound ", plan.lower_bound_us,
                             ", expected at least ", lower_bound));
  }
  if (plan.estimated_makespan_us < plan.lower_bound_us - 1e-6) {
    return Fail(absl::StrCat("makespan ", plan.estimated_makespan_us,
                             " is below the lower bound ",
                             plan.lower_bound_us));
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
