#include "scheduler/stream_assignment.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "scheduler/reachability.h"

namespace weft::scheduler {
namespace {

constexpr int kNumEngines = 4;

struct LogicalStream {
  int device = 0;
  Engine engine = Engine::kCompute;
  std::string label;
  NodeId last = -1;     // its node issued last so far
  NodeId current = -1;  // its node issued last before the walk's position
  uint64_t ops = 0;     // bit per op id (ids below 64) that ran on it
};

// Pass state shared by the assignment rules. Not thread-safe.
class Assigner {
 public:
  Assigner(const Graph& graph, const Dag& dag, const CostLevels& levels,
           const StreamOptions& options, const Plan& plan)
      : graph_(graph),
        dag_(dag),
        levels_(levels),
        options_(options),
        plan_(plan),
        stream_of_(graph.num_nodes(), -1),
        choice_(graph.num_nodes()),
        op_bit_(graph.num_nodes(), 0) {
    // Ops numbered by first appearance; the first 64 get a bit each.
    absl::flat_hash_map<absl::string_view, int> op_ids;
    for (NodeId v = 0; v < graph.num_nodes(); ++v) {
      auto [it, inserted] =
          op_ids.emplace(graph.node(v).op, static_cast<int>(op_ids.size()));
      if (it->second < 64) op_bit_[v] = uint64_t{1} << it->second;
    }
  }

  absl::Status Run() {
    if (options_.mode == StreamMode::kSingle) return AssignSingle();
    AssignMulti();
    return absl::OkStatus();
  }

  const std::vector<LogicalStream>& streams() const { return streams_; }
  const std::vector<int32_t>& stream_of() const { return stream_of_; }
  std::vector<StreamChoice> TakeChoices() { return std::move(choice_); }

 private:
  int device(NodeId v) const { return plan_.nodes[dag_.pos(v)].device; }

  int NewStream(NodeId v, std::string label) {
    LogicalStream s;
    s.device = device(v);
    s.engine = graph_.node(v).engine;
    s.label = std::move(label);
    streams_.push_back(std::move(s));
    return static_cast<int>(streams_.size()) - 1;
  }

  void Place(NodeId v, int s, StreamChoice::Why why, NodeId related) {
    stream_of_[v] = s;
    choice_[v] = {why, related};
    LogicalStream& stream = streams_[s];
    if (stream.last < 0 || dag_.pos(stream.last) < dag_.pos(v)) {
      stream.last = v;
    }
    stream.ops |= OpBit(v);
  }

  uint64_t OpBit(NodeId v) const { return op_bit_[v]; }

  absl::Status AssignSingle() {
    for (NodeId v = 0; v < graph_.num_nodes(); ++v) {
      if (!graph_.node(v).stream_label.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("graph.nodes[", v, "].stream_label: stream label '",
                         graph_.node(v).stream_label,
                         "' is not allowed in SINGLE stream mode"));
      }
    }
    absl::flat_hash_map<int, int> by_device;
    for (NodeId v : dag_.order) {
      auto [it, inserted] = by_device.emplace(device(v), 0);
      if (inserted) {
        it->second = NewStream(v, "");
        streams_[it->second].engine = Engine::kCompute;
      }
      Place(v, it->second, StreamChoice::Why::kSingle, -1);
    }
    return absl::OkStatus();
  }

  void AssignMulti() {
    ReachabilityQuery query(dag_.reach, dag_.raw_preds);
    for (NodeId v : dag_.order) {
      if (stream_of_[v] < 0) AssignOne(v, query);
      streams_[stream_of_[v]].current = v;
    }
  }

  // Places v, not yet assigned, and the chain that follows it.
  void AssignOne(NodeId v, ReachabilityQuery& query) {
    const NodeSpec& node = graph_.node(v);
    const int dev = device(v);
    if (!node.stream_label.empty()) {
      auto key = std::make_tuple(absl::string_view(node.stream_label), dev,
                                 static_cast<int>(node.engine));
      auto it = labels_.find(key);
      if (it == labels_.end()) {
        it = labels_.emplace(key, NewStream(v, node.stream_label)).first;
      }
      Place(v, it->second, StreamChoice::Why::kLabel, -1);
      return;
    }
    std::vector<int>& group =
        groups_[dev * kNumEngines + static_cast<int>(node.engine)];
    const int32_t pv = dag_.pos(v);
    const uint64_t op = OpBit(v);

    // Recyclable: the stream's last node is an ancestor of v (so nothing
    // is reserved on it beyond v either).
    int chosen = -1;
    bool chosen_has_op = false;
    for (int s : group) {
      const NodeId last = streams_[s].last;
      if (dag_.pos(last) >= pv || !query.Reaches(last, v)) continue;
      const bool has_op = (streams_[s].ops & op) != 0;
      if (chosen < 0 || (has_op && !chosen_has_op)) {
        chosen = s;
        chosen_has_op = has_op;
        if (has_op) break;
      }
    }
    if (chosen >= 0) {
      Place(v, chosen, StreamChoice::Why::kRecycled, streams_[chosen].last);
    } else if (static_cast<int>(group.size()) <
               options_.max_streams_per_device) {
      chosen = NewStream(v, "");
      group.push_back(chosen);
      Place(v, chosen, StreamChoice::Why::kNew, -1);
    } else {
      // Soft cap: v joins the stream whose node just before it in issue
      // order is expected to finish first. Streams run in issue order, so
      // sharing only adds ordering, never a cycle.
      double best_finish = 0;
      for (int s : group) {
        const NodeId before = streams_[s].current;
        const double finish =
            before < 0 ? 0
                       : levels_.top_us[before] + graph_.node(before).cost_us;
        if (chosen < 0 || finish < best_finish) {
          chosen = s;
          best_finish = finish;
        }
      }
      Place(v, chosen, StreamChoice::Why::kSoftCap, streams_[chosen].current);
    }
    FollowChain(v, chosen);
  }

  // Extends stream `s` from `v` down its highest-ranked unassigned
  // successors on the same device and engine.
  void FollowChain(NodeId v, int s) {
    const int dev = streams_[s].device;
    const Engine engine = streams_[s].engine;
    NodeId cur = v;
    while (true) {
      NodeId best = -1;
      bool best_has_op = false;
      for (NodeId x : dag_.Succs(cur)) {
        const NodeSpec& node = graph_.node(x);
        if (stream_of_[x] >= 0 || !node.stream_label.empty() ||
            node.engine != engine || device(x) != dev) {
          continue;
        }
        const bool has_op = (streams_[s].ops & OpBit(x)) != 0;
        if (best < 0 || Better(x, has_op, best, best_has_op)) {
          best = x;
          best_has_op = has_op;
        }
      }
      if (best < 0) return;
      Place(best, s, StreamChoice::Why::kChain, cur);
      cur = best;
    }
  }

  bool Better(NodeId a, bool a_has_op, NodeId b, bool b_has_op) const {
    if (levels_.bottom_us[a] != levels_.bottom_us[b]) {
      return levels_.bottom_us[a] > levels_.bottom_us[b];
    }
    if (levels_.bottom_hops[a] != levels_.bottom_hops[b]) {
      return levels_.bottom_hops[a] > levels_.bottom_hops[b];
    }
    if (a_has_op != b_has_op) return a_has_op;
    return a < b;
  }

  const Graph& graph_;
  const Dag& dag_;
  const CostLevels& levels_;
  const StreamOptions& options_;
  const Plan& plan_;
  std::vector<LogicalStream> streams_;
  std::vector<int32_t> stream_of_;
  std::vector<StreamChoice> choice_;
  std::vector<uint64_t> op_bit_;  // by NodeId
  // (label, device, engine) -> stream.
  absl::flat_hash_map<std::tuple<absl::string_view, int, int>, int> labels_;
  // device * kNumEngines + engine -> unlabelled streams, oldest first.
  absl::flat_hash_map<int, std::vector<int>> groups_;
};

// A vector clock: (stream, last node known finished, as its 1-based
// sequence number on that stream), sorted by stream.
using Clock = std::vector<std::pair<int32_t, int32_t>>;

bool Covers(const Clock& clock, int32_t stream, int32_t seq) {
  auto it = std::lower_bound(clock.begin(), clock.end(),
                             std::make_pair(stream, int32_t{0}));
  return it != clock.end() && it->first == stream && it->second >= seq;
}

// into = max(into, b), entry by entry; `scratch` is reused storage.
void MergeInto(Clock& into, const Clock& b, Clock& scratch) {
  scratch.clear();
  size_t i = 0, j = 0;
  while (i < into.size() || j < b.size()) {
    if (j == b.size() || (i < into.size() && into[i].first < b[j].first)) {
      scratch.push_back(into[i++]);
    } else if (i == into.size() || b[j].first < into[i].first) {
      scratch.push_back(b[j++]);
    } else {
      scratch.emplace_back(into[i].first,
                           std::max(into[i].second, b[j].second));
      ++i;
      ++j;
    }
  }
  into.swap(scratch);
}

// Plans the events of `plan`, whose nodes already have dense streams.
void PlanEvents(const Dag& dag, Plan* plan) {
  const int n = dag.num_nodes();
  const int num_streams = static_cast<int>(plan->streams.size());
  std::vector<int32_t> stream(n), seq(n), version_at(n), event(n, -1);
  std::vector<int32_t> count(num_streams, 0);
  std::vector<Clock> versions(1);  // version 0: knows nothing
  std::vector<int32_t> current(num_streams, 0);
  std::vector<NodeId> candidates, chosen;
  Clock merged, scratch, single(1);
  int num_events = 0;
  for (int i = 0; i < n; ++i) {
    PlannedNode& pn = plan->nodes[i];
    const NodeId v = pn.node;
    const int32_t s = pn.stream;
    stream[v] = s;
    seq[v] = ++count[s];
    candidates.clear();
    for (NodeId p : dag.Preds(v)) {
      if (stream[p] == s) continue;  // stream order
      if (Covers(versions[current[s]], stream[p], seq[p])) continue;
      candidates.push_back(p);
    }
    if (!candidates.empty()) {
      std::sort(candidates.begin(), candidates.end(),
                [&](NodeId a, NodeId b) { return dag.pos(a) > dag.pos(b); });
      merged.clear();
      chosen.clear();
      for (NodeId c : candidates) {
        if (Covers(merged, stream[c], seq[c])) continue;
        chosen.push_back(c);
        MergeInto(merged, versions[version_at[c]], scratch);
        single[0] = {stream[c], seq[c]};
        MergeInto(merged, single, scratch);
      }
      Clock next = versions[current[s]];
      MergeInto(next, merged, scratch);
      versions.push_back(std::move(next));
      current[s] = static_cast<int32_t>(versions.size()) - 1;
      for (NodeId c : chosen) {
        if (event[c] < 0) event[c] = num_events++;
        pn.wait_events.push_back(event[c]);
      }
    }
    version_at[v] = current[s];
  }
  // Renumber events by the issue order of their signalling nodes.
  std::vector<int32_t> renumber(num_events, -1);
  int next_id = 0;
  for (int i = 0; i < n; ++i) {
    PlannedNode& pn = plan->nodes[i];
    if (event[pn.node] >= 0) {
      renumber[event[pn.node]] = next_id;
      pn.signal_event = next_id++;
    } else {
      pn.signal_event = -1;
    }
  }
  for (PlannedNode& pn : plan->nodes) {
    for (int& e : pn.wait_events) e = renumber[e];
    std::sort(pn.wait_events.begin(), pn.wait_events.end());
  }
  plan->num_events = num_events;
}

}  // namespace

absl::StatusOr<std::vector<StreamChoice>> AssignStreams(
    const Graph& graph, const Dag& dag, const CostLevels& levels,
    const StreamOptions& options, Plan* plan) {
  const int n = graph.num_nodes();
  if (static_cast<int>(plan->nodes.size()) != n || dag.num_nodes() != n) {
    return absl::InternalError("plan and graph disagree on the node count");
  }
  for (int i = 0; i < n; ++i) {
    if (plan->nodes[i].node != dag.order[i]) {
      return absl::InternalError("plan nodes are not in the DAG's order");
    }
  }
  if (options.max_streams_per_device < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.max_streams_per_device: must be at least 1, "
                     "got ",
                     options.max_streams_per_device));
  }
  Assigner assigner(graph, dag, levels, options, *plan);
  absl::Status status = assigner.Run();
  if (!status.ok()) return status;

  // Dense stream ids in order of first use.
  const std::vector<LogicalStream>& logical = assigner.streams();
  std::vector<int32_t> dense(logical.size(), -1);
  plan->streams.clear();
  for (int i = 0; i < n; ++i) {
    PlannedNode& pn = plan->nodes[i];
    const int32_t s = assigner.stream_of()[pn.node];
    if (dense[s] < 0) {
      dense[s] = static_cast<int32_t>(plan->streams.size());
      PlannedStream ps;
      ps.id = dense[s];
      ps.device = logical[s].device;
      ps.label = logical[s].label;
      ps.engine = logical[s].engine;
      plan->streams.push_back(std::move(ps));
    }
    pn.stream = dense[s];
    pn.wait_events.clear();
  }
  PlanEvents(dag, plan);
  return assigner.TakeChoices();
}

}  // namespace weft::scheduler
