#include "scheduler/passes/assign_by_dependency_pass.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {
namespace {

constexpr int kNumEngines = 4;

// Per-stream walk state that chain starts do not scan (see Group for the
// rest).
struct Track {
  NodeId last = -1;          // its node issued last so far
  NodeId current = -1;       // its node issued last before the walk's position
  int32_t current_pos = -1;  // the issue position of `current`
  int32_t group = -1;        // its group, -1 for streams of earlier passes
  int32_t slot = -1;         // its position in the group
};

// A device and engine's streams, oldest first, with the state that each
// chain start looks at kept by slot, side by side.
struct Group {
  std::vector<int> streams;      // stream ids
  std::vector<int32_t> last_pos;  // the issue position of the stream's last
  std::vector<double> finish;    // when its `current` ends, unlimited hardware
  std::vector<uint64_t> ops;     // bit per op id (the first 64) that ran on it
  int size() const { return static_cast<int>(streams.size()); }
};

// Not thread-safe.
class Walk {
 public:
  explicit Walk(StreamContext& context)
      : c_(context),
        top_(context.levels.top_us.data()) {
    for (int d : c_.device) num_devices_ = std::max(num_devices_, d + 1);
    groups_.resize(num_devices_ * kNumEngines);
    // Nodes placed by earlier passes keep their streams; those streams are
    // in no group, so their tracks are never consulted.
    tracks_.resize(c_.streams.size());
    // The finish cut (see Reaches) needs every path to end no earlier than
    // its first node does: costs neither negative nor NaN.
    finish_cut_ = true;
    for (NodeId v = 0; v < c_.num_nodes(); ++v) {
      finish_cut_ &= c_.graph.cost_us(v) >= 0;
    }
  }

  void Run() {
    if (c_.has_peers()) c_.peer_stream.assign(c_.num_nodes(), -1);
    const int n = c_.num_nodes();
    for (int32_t i = 0; i < n; ++i) {
      const NodeId v = c_.dag.order[i];
      if (c_.stream_of[v] < 0) AssignOne(v, i);
      const double finish = top_[v] + c_.graph.cost_us(v);
      SetCurrent(c_.stream_of[v], v, i, finish);
      if (c_.peer_device_of(v) >= 0) SetCurrent(AssignPeer(v, i), v, i, finish);
    }
  }

 private:
  // v, at issue position pv and ending at `finish`, is the node of s issued
  // last before the walk's position.
  void SetCurrent(int s, NodeId v, int32_t pv, double finish) {
    Track& t = tracks_[s];
    t.current = v;
    t.current_pos = pv;
    if (t.group >= 0) groups_[t.group].finish[t.slot] = finish;
  }

  // A new stream of `device` and `engine`, appended to group `g`.
  int NewStream(int device, Engine engine, int g) {
    const int s =
        c_.NewStream(device, engine, LogicalStream::Kind::kShared);
    Group& group = groups_[g];
    Track t;
    t.group = g;
    t.slot = group.size();
    tracks_.push_back(t);
    group.streams.push_back(s);
    group.last_pos.push_back(-1);
    group.finish.push_back(0);
    group.ops.push_back(0);
    const size_t words = (group.streams.size() + 63) / 64;
    if (candidates_with_op_.size() < words) {
      candidates_with_op_.resize(words);
      candidates_without_op_.resize(words);
    }
    return s;
  }

  // v, at issue position pv, runs on s.
  void Touch(NodeId v, int32_t pv, int s) {
    Track& t = tracks_[s];
    Group& g = groups_[t.group];
    if (g.last_pos[t.slot] < pv) {
      t.last = v;
      g.last_pos[t.slot] = pv;
    }
    g.ops[t.slot] |= OpBit(v);
  }

  void Place(NodeId v, int32_t pv, int s, StreamChoice::Why why,
             NodeId related) {
    c_.stream_of[v] = s;
    c_.SetChoice(v, {why, related});
    Touch(v, pv, s);
  }

  int GroupOf(int device, Engine engine) {
    if (device >= num_devices_) {
      num_devices_ = device + 1;
      groups_.resize(num_devices_ * kNumEngines);
    }
    return device * kNumEngines + static_cast<int>(engine);
  }

  // A recyclable stream of group `g` for v: one whose last node is an
  // ancestor of v, -1 if none. A stream whose last node is one of v's
  // direct predecessors first (found from the predecessors, without
  // asking the index), then any; among either, one that ran v's op first,
  // then the oldest.
  int Recyclable(NodeId v, int32_t pv, int g) {
    const Group& group = groups_[g];
    const uint64_t op = OpBit(v);
    int best = -1;  // a slot
    bool best_has_op = false;
    for (NodeId p : c_.dag.Preds(v)) {
      const Track& t = tracks_[c_.stream_of[p]];
      if (t.group != g || t.last != p) continue;
      const bool has_op = (group.ops[t.slot] & op) != 0;
      if (best < 0 || (has_op && !best_has_op) ||
          (has_op == best_has_op && t.slot < best)) {
        best = t.slot;
        best_has_op = has_op;
      }
    }
    if (best >= 0) return group.streams[best];
    // The streams whose last node comes before v and, by the finish cut,
    // may be its ancestor; those that ran v's op are asked first, oldest
    // first, up to the first ancestor.
    const double ready = top_[v];
    const int size = group.size();
    const int32_t* last_pos = group.last_pos.data();
    const double* finish = group.finish.data();
    const uint64_t* ops = group.ops.data();
    const bool cut = finish_cut_;
    for (int base = 0; base < size; base += 64) {
      const int end = std::min(size, base + 64);
      uint64_t with_op = 0, without_op = 0;
      for (int k = base; k < end; ++k) {
        const bool may = (last_pos[k] < pv) & !(cut & (finish[k] > ready));
        const bool has_op = (ops[k] & op) != 0;
        with_op |= static_cast<uint64_t>(may & has_op) << (k - base);
        without_op |= static_cast<uint64_t>(may & !has_op) << (k - base);
      }
      candidates_with_op_[base >> 6] = with_op;
      candidates_without_op_[base >> 6] = without_op;
    }
    for (const std::vector<uint64_t>* masks :
         {&candidates_with_op_, &candidates_without_op_}) {
      for (int base = 0; base < size; base += 64) {
        for (uint64_t bits = (*masks)[base >> 6]; bits != 0;
             bits &= bits - 1) {
          const int k = base + __builtin_ctzll(bits);
          const int s = group.streams[k];
          if (Reaches(tracks_[s].last, last_pos[k], v, pv)) return s;
        }
      }
    }
    return -1;
  }

  // At the cap: the stream of group `g` whose node before v in issue order
  // is expected to finish first (ties: v's op, then the oldest).
  int Least(NodeId v, int g) {
    const Group& group = groups_[g];
    const double ready = top_[v];
    const uint64_t op = OpBit(v);
    const int size = group.size();
    const double* finish = group.finish.data();
    // Delays are never NaN.
    double least = std::numeric_limits<double>::infinity();
    for (int k = 0; k < size; ++k) {
      const double late = finish[k] - ready;
      const double delay = late > 0.0 ? late : 0.0;
      least = delay < least ? delay : least;
    }
    int first = -1;
    for (int k = 0; k < size; ++k) {
      const double late = finish[k] - ready;
      const double delay = late > 0.0 ? late : 0.0;
      if (delay != least) continue;
      if ((group.ops[k] & op) != 0) return group.streams[k];
      if (first < 0) first = group.streams[k];
    }
    return first;
  }

  // At the cap, v shares `chosen` after its node before v (-1 if none),
  // which is returned; the ordering is recorded unless the DAG has it.
  // The streams whose last node comes before v were all found not to be
  // its ancestors.
  NodeId ShareAtCap(NodeId v, int32_t pv, int chosen) {
    const Track& t = tracks_[chosen];
    const NodeId before = t.current;
    if (before < 0) return before;
    const Group& group = groups_[t.group];
    const bool ordered =
        !(finish_cut_ && group.finish[t.slot] > top_[v]) &&
        group.last_pos[t.slot] >= pv && Reaches(before, t.current_pos, v, pv);
    if (!ordered) c_.added_orderings.emplace_back(before, v);
    return before;
  }

  // Gives v, a copy between devices, its peer stream: a COPY stream of its
  // source device, chosen as a node's stream is (recycled, new, or at the
  // cap the one that delays it least). Chains do not follow peers.
  int AssignPeer(NodeId v, int32_t pv) {
    const int device = c_.peer_device[v];
    const int g = GroupOf(device, Engine::kCopy);
    int chosen = Recyclable(v, pv, g);
    if (chosen < 0 &&
        groups_[g].size() < c_.options.max_streams_per_device) {
      chosen = NewStream(device, Engine::kCopy, g);
    } else if (chosen < 0) {
      chosen = Least(v, g);
      ShareAtCap(v, pv, chosen);
    }
    c_.peer_stream[v] = chosen;
    Touch(v, pv, chosen);
    return chosen;
  }

  // Places v, not yet assigned, and the chain that follows it.
  void AssignOne(NodeId v, int32_t pv) {
    const int g = GroupOf(c_.device[v], c_.graph.engine(v));
    int chosen = Recyclable(v, pv, g);
    if (chosen >= 0) {
      Place(v, pv, chosen, StreamChoice::Why::kRecycled,
            tracks_[chosen].last);
    } else if (groups_[g].size() < c_.options.max_streams_per_device) {
      chosen = NewStream(c_.device[v], c_.graph.engine(v), g);
      Place(v, pv, chosen, StreamChoice::Why::kNew, -1);
    } else {
      chosen = Least(v, g);
      const NodeId before = ShareAtCap(v, pv, chosen);
      Place(v, pv, chosen, StreamChoice::Why::kSoftCap, before);
    }
    FollowChain(v, chosen);
  }

  // Extends stream `s` from `v` down its highest-ranked unassigned
  // successors on the same device and engine. Successors are compared
  // without branches (which of them qualifies and which ranks higher is
  // unpredictable): the best so far is kept in locals, starting from a
  // rank below every node's.
  void FollowChain(NodeId v, int s) {
    const int device = c_.streams[s].device;
    const Engine engine = c_.streams[s].engine;
    const int32_t* stream_of = c_.stream_of.data();
    const int* devices = c_.device.data();
    const double* bottom = c_.levels.bottom_us.data();
    const int32_t* hops = c_.levels.bottom_hops.data();
    NodeId cur = v;
    while (true) {
      NodeId best = -1;
      double best_bottom = -std::numeric_limits<double>::infinity();
      int32_t best_hops = 0;
      bool best_has_op = false;
      const uint64_t ops = groups_[tracks_[s].group].ops[tracks_[s].slot];
      for (NodeId x : c_.dag.Succs(cur)) {
        const bool eligible = (stream_of[x] < 0) & (devices[x] == device) &
                              (c_.graph.engine(x) == engine);
        const double b = bottom[x];
        const int32_t h = hops[x];
        const bool has_op = (ops & OpBit(x)) != 0;
        // Ranked above best: rank, then hops, then the op, then the lower
        // id (successors come in ascending id, so a later one never wins
        // a full tie).
        const bool above =
            (b > best_bottom) |
            ((b == best_bottom) &
             ((h > best_hops) | ((h == best_hops) & has_op & !best_has_op)));
        const bool take = eligible & above;
        best = take ? x : best;
        best_bottom = take ? b : best_bottom;
        best_hops = take ? h : best_hops;
        best_has_op = take ? has_op : best_has_op;
      }
      if (best < 0) return;
      Place(best, c_.dag.pos(best), s, StreamChoice::Why::kChain, cur);
      cur = best;
    }
  }

  // Whether u, at issue position pu, reaches v, at pv. Most questions are
  // about nodes a few positions apart, which the index's window answers
  // exactly; the rest go to the query.
  bool Reaches(NodeId u, int32_t pu, NodeId v, int32_t pv) {
    if (pu >= pv) return false;
    if (pv - pu <= ReachabilityIndex::kWindow) {
      return (c_.dag.reach.window(v) >> (pv - pu - 1)) & 1;
    }
    return c_.query().Reaches(u, v);
  }

  // The first 64 ops get a bit each.
  uint64_t OpBit(NodeId v) const {
    const uint32_t op = static_cast<uint32_t>(c_.graph.op_id(v));
    return op < 64 ? uint64_t{1} << (op & 63) : 0;
  }

  StreamContext& c_;
  const double* top_;  // the levels' top_us
  bool finish_cut_ = false;
  // Recyclable's scratch space: candidate slots, 64 a word.
  std::vector<uint64_t> candidates_with_op_, candidates_without_op_;
  std::vector<Track> tracks_;  // by stream
  int num_devices_ = 1;
  // device * kNumEngines + engine -> this pass's streams.
  std::vector<Group> groups_;
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
