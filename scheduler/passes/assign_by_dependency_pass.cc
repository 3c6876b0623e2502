#include "scheduler/passes/assign_by_dependency_pass.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {
namespace {

constexpr int kNumEngines = 4;

// Per-stream walk state.
struct Track {
  NodeId last = -1;     // its node issued last so far
  NodeId current = -1;  // its node issued last before the walk's position
  double finish = 0;    // when `current` ends on unlimited hardware
  uint64_t ops = 0;     // bit per op id (the first 64 ops) that ran on it
};

// Not thread-safe.
class Walk {
 public:
  explicit Walk(StreamContext& context)
      : c_(context),
        query_(context.dag.reach, context.dag.raw_preds) {
    for (int d : c_.device) num_devices_ = std::max(num_devices_, d + 1);
    groups_.resize(num_devices_ * kNumEngines);
    tracks_.resize(c_.streams.size());
    // Nodes already placed by earlier passes keep their streams.
    for (NodeId v : c_.dag.order) {
      if (c_.stream_of[v] >= 0) Touch(v, c_.stream_of[v]);
    }
  }

  void Run() {
    if (c_.has_peers()) c_.peer_stream.assign(c_.num_nodes(), -1);
    for (NodeId v : c_.dag.order) {
      if (c_.stream_of[v] < 0) AssignOne(v);
      const double finish = c_.levels.top_us[v] + c_.graph.cost_us(v);
      Track& t = tracks_[c_.stream_of[v]];
      t.current = v;
      t.finish = finish;
      if (c_.peer_device_of(v) >= 0) {
        const int p = AssignPeer(v);
        tracks_[p].current = v;
        tracks_[p].finish = finish;
      }
    }
  }

 private:
  int NewStream(NodeId v) {
    const int s = c_.NewStream(c_.device[v], c_.graph.engine(v),
                               LogicalStream::Kind::kShared);
    tracks_.emplace_back();
    return s;
  }

  void Touch(NodeId v, int s) {
    Track& t = tracks_[s];
    if (t.last < 0 || c_.dag.pos(t.last) < c_.dag.pos(v)) t.last = v;
    t.ops |= OpBit(v);
  }

  void Place(NodeId v, int s, StreamChoice::Why why, NodeId related) {
    c_.stream_of[v] = s;
    c_.choice[v] = {why, related};
    Touch(v, s);
  }

  std::vector<int>& Group(NodeId v) {
    return groups_[c_.device[v] * kNumEngines +
                   static_cast<int>(c_.graph.engine(v))];
  }

  // A recyclable stream of `group` for v: its last node is an ancestor of
  // v (a stream that ran v's op first, then the oldest); -1 if none.
  int Recyclable(NodeId v, const std::vector<int>& group) {
    const int32_t pv = c_.dag.pos(v);
    const uint64_t op = OpBit(v);
    int chosen = -1;
    bool chosen_has_op = false;
    for (int s : group) {
      const NodeId last = tracks_[s].last;
      if (c_.dag.pos(last) >= pv || !query_.Reaches(last, v)) continue;
      const bool has_op = (tracks_[s].ops & op) != 0;
      if (chosen < 0 || (has_op && !chosen_has_op)) {
        chosen = s;
        chosen_has_op = has_op;
        if (has_op) break;
      }
    }
    return chosen;
  }

  // Gives v, a copy between devices, its peer stream: a COPY stream of its
  // source device, chosen as a node's stream is (recycled, new, or at the
  // cap the one that delays it least). Chains do not follow peers.
  int AssignPeer(NodeId v) {
    const int device = c_.peer_device[v];
    if (device >= num_devices_) {
      num_devices_ = device + 1;
      groups_.resize(num_devices_ * kNumEngines);
    }
    std::vector<int>& group =
        groups_[device * kNumEngines + static_cast<int>(Engine::kCopy)];
    int chosen = Recyclable(v, group);
    if (chosen < 0 &&
        static_cast<int>(group.size()) < c_.options.max_streams_per_device) {
      chosen = c_.NewStream(device, Engine::kCopy,
                            LogicalStream::Kind::kShared);
      tracks_.emplace_back();
      group.push_back(chosen);
    } else if (chosen < 0) {
      chosen = LeastDelay(v, group);
      const NodeId before = tracks_[chosen].current;
      if (before >= 0 && !query_.Reaches(before, v)) {
        c_.added_orderings.emplace_back(before, v);
      }
    }
    c_.peer_stream[v] = chosen;
    Touch(v, chosen);
    return chosen;
  }

  // Places v, not yet assigned, and the chain that follows it.
  void AssignOne(NodeId v) {
    std::vector<int>& group = Group(v);
    int chosen = Recyclable(v, group);
    if (chosen >= 0) {
      Place(v, chosen, StreamChoice::Why::kRecycled, tracks_[chosen].last);
    } else if (static_cast<int>(group.size()) <
               c_.options.max_streams_per_device) {
      chosen = NewStream(v);
      group.push_back(chosen);
      Place(v, chosen, StreamChoice::Why::kNew, -1);
    } else {
      chosen = SoftCap(v, group);
    }
    FollowChain(v, chosen);
  }

  // At the cap: the stream that delays v least.
  int SoftCap(NodeId v, const std::vector<int>& group) {
    const int chosen = LeastDelay(v, group);
    const NodeId before = tracks_[chosen].current;
    if (before >= 0 && !query_.Reaches(before, v)) {
      c_.added_orderings.emplace_back(before, v);
    }
    Place(v, chosen, StreamChoice::Why::kSoftCap, before);
    return chosen;
  }

  // The stream of `group` (not empty) whose node before v in issue order
  // is expected to finish first (ties: v's op, then the oldest).
  int LeastDelay(NodeId v, const std::vector<int>& group) {
    const double ready = c_.levels.top_us[v];
    int chosen = -1;
    double best_delay = 0;
    bool best_has_op = false;
    const uint64_t op = OpBit(v);
    for (int s : group) {
      const Track& t = tracks_[s];
      const double delay = std::max(0.0, t.finish - ready);
      const bool has_op = (t.ops & op) != 0;
      if (chosen < 0 || delay < best_delay ||
          (delay == best_delay && has_op && !best_has_op)) {
        chosen = s;
        best_delay = delay;
        best_has_op = has_op;
      }
    }
    return chosen;
  }

  // Extends stream `s` from `v` down its highest-ranked unassigned
  // successors on the same device and engine.
  void FollowChain(NodeId v, int s) {
    const int device = c_.streams[s].device;
    const Engine engine = c_.streams[s].engine;
    NodeId cur = v;
    while (true) {
      NodeId best = -1;
      bool best_has_op = false;
      for (NodeId x : c_.dag.Succs(cur)) {
        if (c_.stream_of[x] >= 0 || c_.device[x] != device ||
            c_.graph.engine(x) != engine) {
          continue;
        }
        const bool has_op = (tracks_[s].ops & OpBit(x)) != 0;
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
    const CostLevels& l = c_.levels;
    if (l.bottom_us[a] != l.bottom_us[b]) return l.bottom_us[a] > l.bottom_us[b];
    if (l.bottom_hops[a] != l.bottom_hops[b]) {
      return l.bottom_hops[a] > l.bottom_hops[b];
    }
    if (a_has_op != b_has_op) return a_has_op;
    return a < b;
  }

  // The first 64 ops get a bit each.
  uint64_t OpBit(NodeId v) const {
    const uint32_t op = static_cast<uint32_t>(c_.graph.op_id(v));
    return op < 64 ? uint64_t{1} << op : 0;
  }

  StreamContext& c_;
  ReachabilityQuery query_;
  std::vector<Track> tracks_;     // by stream
  int num_devices_ = 1;
  // device * kNumEngines + engine -> this pass's streams, oldest first.
  std::vector<std::vector<int>> groups_;
};

}  // namespace

absl::Status AssignByDependencyPass::Run(StreamContext& context) const {
  if (context.options.max_streams_per_device < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.max_streams_per_device: must be at least 1, "
                     "got ",
                     context.options.max_streams_per_device));
  }
  Walk(context).Run();
  return absl::OkStatus();
}

}  // namespace weft::scheduler
