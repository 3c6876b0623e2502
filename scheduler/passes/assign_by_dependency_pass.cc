#include "scheduler/passes/assign_by_dependency_pass.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include <cstdio>
#include <cstdlib>
static long g_st[16];

namespace weft::scheduler {
namespace {

constexpr int kNumEngines = 4;

// Per-stream walk state.
struct Track {
  NodeId last = -1;      // its node issued last so far
  int32_t last_pos = -1;  // the issue position of `last`
  NodeId current = -1;   // its node issued last before the walk's position
  int32_t current_pos = -1;  // the issue position of `current`
  double finish = 0;     // when `current` ends on unlimited hardware
  uint64_t ops = 0;      // bit per op id (the first 64 ops) that ran on it
};

// Not thread-safe.
class Walk {
 public:
  explicit Walk(StreamContext& context)
      : c_(context),
        query_(context.query()) {
    for (int d : c_.device) num_devices_ = std::max(num_devices_, d + 1);
    groups_.resize(num_devices_ * kNumEngines);
    // Nodes placed by earlier passes keep their streams; those streams are
    // in no group, so their tracks are never consulted.
    tracks_.resize(c_.streams.size());
  }

  void Run() {
    if (c_.has_peers()) c_.peer_stream.assign(c_.num_nodes(), -1);
    const int n = c_.num_nodes();
    for (int32_t i = 0; i < n; ++i) {
      const NodeId v = c_.dag.order[i];
      if (c_.stream_of[v] < 0) AssignOne(v, i);
      const double finish = c_.levels.top_us[v] + c_.graph.cost_us(v);
      Track& t = tracks_[c_.stream_of[v]];
      t.current = v;
      t.current_pos = i;
      t.finish = finish;
      if (c_.peer_device_of(v) >= 0) {
        const int p = AssignPeer(v, i);
        tracks_[p].current = v;
        tracks_[p].current_pos = i;
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

  // p is a direct predecessor of v.
  bool IsPred(NodeId p, NodeId v) const {
    for (NodeId q : c_.dag.Preds(v)) {
      if (q == p) return true;
    }
    return false;
  }

  // v, at issue position pv, runs on s.
  void Touch(NodeId v, int32_t pv, int s) {
    Track& t = tracks_[s];
    if (t.last_pos < pv) {
      t.last = v;
      t.last_pos = pv;
    }
    t.ops |= OpBit(v);
  }

  void Place(NodeId v, int32_t pv, int s, StreamChoice::Why why,
             NodeId related) {
    c_.stream_of[v] = s;
    c_.SetChoice(v, {why, related});
    Touch(v, pv, s);
  }

  std::vector<int>& Group(NodeId v) {
    return groups_[c_.device[v] * kNumEngines +
                   static_cast<int>(c_.graph.engine(v))];
  }

  // The two candidates of `group` for v, found in one look at its
  // streams. `recycled`: a stream whose last node is an ancestor of v (one
  // that ran v's op first, then the oldest), -1 if none. `least`: the
  // stream whose node before v in issue order is expected to finish first
  // (ties: v's op, then the oldest), -1 if the group is empty. One pass
  // over the streams takes the least delay and lists the streams whose last
  // node precedes v; ancestry is then asked of those only, and the least
  // delay's first stream is picked.
  struct Candidates {
    int recycled = -1;
    int least = -1;
  };
  Candidates Scan(NodeId v, int32_t pv, const std::vector<int>& group) {
    const double ready = c_.levels.top_us[v];
    const uint64_t op = OpBit(v);
    const int size = static_cast<int>(group.size());
    if (static_cast<int>(delay_.size()) < size) {
      delay_.resize(size);
      has_op_.resize(size);
      behind_.resize(size);
    }
    // Raw pointers in locals: the byte stores below may alias anything
    // reached through members.
    const int* streams = group.data();
    const Track* tracks = tracks_.data();
    double* delays = delay_.data();
    uint8_t* has_ops = has_op_.data();
    int* behind = behind_.data();
    Candidates found;
    double least = std::numeric_limits<double>::infinity();
    int num_behind = 0;  // streams whose last node is before v, listed in
                         // `behind` (appending without branches)
    for (int k = 0; k < size; ++k) {
      const Track& t = tracks[streams[k]];
      const double late = t.finish - ready;
      const double delay = late > 0.0 ? late : 0.0;
      delays[k] = delay;
      has_ops[k] = (t.ops & op) != 0;
      least = delay < least ? delay : least;
      behind[num_behind] = k;
      num_behind += t.last_pos < pv;
    }
    // A stream whose last node is one of v's direct predecessors is
    // recyclable without asking the index (one that ran v's op first, then
    // the oldest); the others are asked only when none is.
    bool recycled_has_op = false;
    for (int j = 0; j < num_behind; ++j) {
      const int k = behind[j];
      if (found.recycled >= 0 && (recycled_has_op || !has_ops[k])) continue;
      const NodeId last = tracks[streams[k]].last;
      if (last >= 0 && c_.stream_of[last] == streams[k] &&
          IsPred(last, v)) {
        found.recycled = streams[k];
        recycled_has_op = has_ops[k];
      }
    }
    const bool pred_found = found.recycled >= 0;
    // Ask about ancestry only where the answer could change the choice.
    for (int j = 0; j < num_behind && !pred_found; ++j) {
      const int k = behind[j];
      if (found.recycled >= 0 && (recycled_has_op || !has_ops[k])) continue;
      const Track& t = tracks[streams[k]];
      g_st[0]++; if (pv - t.last_pos > 64) g_st[1]++;
      if (pv - t.last_pos > 64 && pv - t.last_pos <= 256) g_st[7]++;
      if (pv - t.last_pos > 256 && pv - t.last_pos <= 1024) g_st[8]++;
      const bool cutf = t.finish > ready; if (cutf) g_st[9]++;
      const int dist = pv - t.last_pos;
      if (Reaches(t.last, t.last_pos, v, pv)) {
        if (cutf) g_st[10]++;
        if (dist > 1024) g_st[11]++; else if (dist>256) g_st[12]++; else if (dist > 64) g_st[13]++;
        if (pv - t.last_pos > 64) g_st[2]++;
        found.recycled = streams[k];
        recycled_has_op = has_ops[k];
      }
    }
    // Delays are never NaN: the least, preferring v's op, then the oldest
    // stream.
    int first = -1;
    for (int k = 0; k < size; ++k) {
      if (delays[k] != least) continue;
      if (has_ops[k]) {
        found.least = streams[k];
        break;
      }
      if (first < 0) first = streams[k];
    }
    if (found.least < 0) found.least = first;
    return found;
  }

  // Gives v, a copy between devices, its peer stream: a COPY stream of its
  // source device, chosen as a node's stream is (recycled, new, or at the
  // cap the one that delays it least). Chains do not follow peers.
  int AssignPeer(NodeId v, int32_t pv) {
    const int device = c_.peer_device[v];
    if (device >= num_devices_) {
      num_devices_ = device + 1;
      groups_.resize(num_devices_ * kNumEngines);
    }
    std::vector<int>& group =
        groups_[device * kNumEngines + static_cast<int>(Engine::kCopy)];
    const Candidates found = Scan(v, pv, group);
    int chosen = found.recycled;
    if (chosen < 0 &&
        static_cast<int>(group.size()) < c_.options.max_streams_per_device) {
      chosen = c_.NewStream(device, Engine::kCopy,
                            LogicalStream::Kind::kShared);
      tracks_.emplace_back();
      group.push_back(chosen);
    } else if (chosen < 0) {
      chosen = found.least;
      const NodeId before = tracks_[chosen].current;
      if (before >= 0 &&
          !Reaches(before, tracks_[chosen].current_pos, v, pv)) {
        c_.added_orderings.emplace_back(before, v);
      }
    }
    c_.peer_stream[v] = chosen;
    Touch(v, pv, chosen);
    return chosen;
  }

  // Places v, not yet assigned, and the chain that follows it.
  void AssignOne(NodeId v, int32_t pv) {
    std::vector<int>& group = Group(v);
    const Candidates found = Scan(v, pv, group);
    int chosen = found.recycled;
    g_st[3]++; if (chosen>=0) g_st[4]++; else if ((int)group.size() < c_.options.max_streams_per_device) g_st[5]++; else g_st[6]++;
    if (chosen >= 0) {
      Place(v, pv, chosen, StreamChoice::Why::kRecycled,
            tracks_[chosen].last);
    } else if (static_cast<int>(group.size()) <
               c_.options.max_streams_per_device) {
      chosen = NewStream(v);
      group.push_back(chosen);
      Place(v, pv, chosen, StreamChoice::Why::kNew, -1);
    } else {
      chosen = SoftCap(v, pv, found.least);
    }
    FollowChain(v, chosen);
  }

  // At the cap: the stream that delays v least, `chosen`.
  int SoftCap(NodeId v, int32_t pv, int chosen) {
    const NodeId before = tracks_[chosen].current;
    if (before >= 0 && !Reaches(before, tracks_[chosen].current_pos, v, pv)) {
      c_.added_orderings.emplace_back(before, v);
    }
    Place(v, pv, chosen, StreamChoice::Why::kSoftCap, before);
    return chosen;
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
      const uint64_t ops = tracks_[s].ops;
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
    return query_.Reaches(u, v);
  }

  // The first 64 ops get a bit each.
  uint64_t OpBit(NodeId v) const {
    const uint32_t op = static_cast<uint32_t>(c_.graph.op_id(v));
    return op < 64 ? uint64_t{1} << (op & 63) : 0;
  }

  StreamContext& c_;
  ReachabilityQuery& query_;
  // Scan's scratch space, by position in a group.
  std::vector<double> delay_;
  std::vector<uint8_t> has_op_;
  std::vector<int> behind_;
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
  if (getenv("WEFT_STATS")) { fprintf(stderr, "queries %ld far %ld faryes %ld | starts %ld recyc %ld new %ld cap %ld | 64-256 %ld 256-1024 %ld searched %ld intervals %d\n", g_st[0],g_st[1],g_st[2],g_st[3],g_st[4],g_st[5],g_st[6],g_st[7],g_st[8],(long)context.query().nodes_searched(), (int)context.query().built_intervals()); fprintf(stderr, "cutf %ld cutf_yes(bad) %ld yes>1024 %ld yes256-1024 %ld yes64-256 %ld\n", g_st[9], g_st[10], g_st[11], g_st[12], g_st[13]); for (auto&x:g_st) x=0;}
  return absl::OkStatus();
}

}  // namespace weft::scheduler
