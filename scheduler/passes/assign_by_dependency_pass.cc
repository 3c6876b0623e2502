#include "scheduler/passes/assign_by_dependency_pass.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace weft::scheduler {
namespace {

constexpr int kNumEngines = 4;

// Ancestry of recent nodes (see Walk::Label): each node's ancestors among
// the kWide - 1 positions just before it, as kWideWords words.
constexpr int kWide = 256;
constexpr int kWideWords = kWide / 64;
static_assert(kWide % 64 == 0 && (kWide & (kWide - 1)) == 0);
// Nodes a forward search (Walk::Search) enters before it asks the query.
constexpr int kSearchNodes = 256;

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
// chain start looks at kept by slot, side by side, so that slots are
// compared a block of kBlock at a time. The vectors by slot are padded to
// whole blocks with slots that are never behind and never least.
constexpr int kBlock = 4;
// The first block of slots (and the first word of op_slots) is held
// inline: a small plan's streams allocate nothing.
struct Group {
  absl::InlinedVector<int, kBlock> streams;  // stream ids
  // The issue position of the stream's last node (padding: the largest
  // int32).
  absl::InlinedVector<int32_t, kBlock> last_pos;
  // The bottom_hops of the stream's last node.
  absl::InlinedVector<int32_t, kBlock> last_hops;
  // When its `current` ends on unlimited hardware (padding: infinity).
  absl::InlinedVector<double, kBlock> finish;
  // Bit per op id (the first 64) run on it.
  absl::InlinedVector<uint64_t, kBlock> ops;
  // Bit k of op_slots[w * 64 + op]: slot 64 * w + k ran op.
  absl::InlinedVector<uint64_t, 64> op_slots;
  int size() const { return static_cast<int>(streams.size()); }
};

// Not thread-safe.
class Walk {
 public:
  explicit Walk(StreamContext& context)
      : c_(context),
        top_(context.levels.top_us.data()),
        hops_(context.levels.bottom_hops.data()) {
    for (int d : c_.device) num_devices_ = std::max(num_devices_, d + 1);
    groups_.resize(num_devices_ * kNumEngines);
    // Nodes placed by earlier passes keep their streams; those streams are
    // in no group, so their tracks are never consulted.
    tracks_.resize(c_.streams.size());
    // A row per position, up to kWide (Wide wraps around): a small graph
    // needs only as many as it has nodes.
    const size_t rows = std::min(kWide, std::max(context.num_nodes(), 1));
    wide_.assign(rows * 2 * kWideWords, 0);
    // The finish cut (see Look) needs every path to end no earlier than
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
      if (kWideWords > 1) Label(v, i);
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
    const int s = c_.NewStream(device, engine, LogicalStream::Kind::kShared);
    Group& group = groups_[g];
    Track t;
    t.group = g;
    t.slot = group.size();
    tracks_.push_back(t);
    group.streams.push_back(s);
    if (t.slot % kBlock == 0) {
      group.last_pos.resize(t.slot + kBlock,
                            std::numeric_limits<int32_t>::max());
      group.last_hops.resize(t.slot + kBlock, 0);
      group.finish.resize(t.slot + kBlock,
                          std::numeric_limits<double>::infinity());
      group.ops.resize(t.slot + kBlock, 0);
    }
    if (t.slot % 64 == 0) group.op_slots.resize(group.op_slots.size() + 64);
    group.last_pos[t.slot] = -1;
    group.finish[t.slot] = 0;
    const size_t words = (group.streams.size() + 63) / 64;
    if (may_.size() < words) {
      may_.resize(words);
      idle_.resize(words);
    }
    return s;
  }

  // v, at issue position pv, runs on s.
  void Touch(NodeId v, int32_t pv, int s) {
    Track& t = tracks_[s];
    Group& g = groups_[t.group];
    const int slot = t.slot;
    // The group's storage, looked up once: stores through one would make
    // the others be looked up again.
    int32_t* last_pos = g.last_pos.data();
    int32_t* last_hops = g.last_hops.data();
    uint64_t* ops = g.ops.data();
    uint64_t* op_slots = g.op_slots.data();
    const uint64_t op = OpBit(v);
    if (last_pos[slot] < pv) {
      t.last = v;
      last_pos[slot] = pv;
      last_hops[slot] = hops_[v];
    }
    ops[slot] |= op;
    if (op != 0) {
      op_slots[(slot >> 6) * 64 + __builtin_ctzll(op)] |= uint64_t{1}
                                                          << (slot & 63);
    }
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
    // The streams whose last node comes before v and may, by the levels,
    // be its ancestor (see Reaches); those that ran v's op are asked
    // first, oldest first, up to the first ancestor.
    Look(group, v, pv);
    const int words = (group.size() + 63) / 64;
    const int op_id = op != 0 ? __builtin_ctzll(op) : -1;
    for (const bool with_op : {true, false}) {
      for (int w = 0; w < words; ++w) {
        const uint64_t ran = op_id >= 0 ? group.op_slots[w * 64 + op_id] : 0;
        for (uint64_t bits = may_[w] & (with_op ? ran : ~ran); bits != 0;
             bits &= bits - 1) {
          const int k = w * 64 + __builtin_ctzll(bits);
          const int s = group.streams[k];
          if (Reaches(tracks_[s].last, group.last_pos[k], v, pv)) return s;
        }
      }
    }
    return -1;
  }

  // One look at the slots of `group` for v, at pv, a block at a time:
  // bit k of may_[w], slot 64 * w + k is a stream whose last node comes
  // before v and may be its ancestor by the levels (it has the longer
  // path in edges to a sink and, under the finish cut, it ends no later
  // than v may start); of idle_[w], the slot's node before v ends no
  // later than v may start (or its end is NaN): it delays v by nothing.
  void Look(const Group& group, NodeId v, int32_t pv) {
    const int size = group.size();
    const int32_t* last_pos = group.last_pos.data();
    const int32_t* last_hops = group.last_hops.data();
    const double* finish = group.finish.data();
    const int32_t hops = hops_[v];
    const double ready = top_[v];
    const uint64_t cut_mask = finish_cut_ ? 0 : ~uint64_t{0};
    for (int begin = 0; begin < size; begin += 64) {
      const int end = std::min(begin + 64, size);
      uint64_t ints = 0;  // behind and longer
      uint64_t idle = 0;
#if defined(__SSE2__)
      const __m128i pv4 = _mm_set1_epi32(pv);
      const __m128i hops4 = _mm_set1_epi32(hops);
      const __m128d ready2 = _mm_set1_pd(ready);
      for (int k = begin; k < end; k += kBlock) {
        const __m128i behind = _mm_cmplt_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(last_pos + k)),
            pv4);
        const __m128i longer = _mm_cmpgt_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(last_hops + k)),
            hops4);
        const uint64_t block_ints = static_cast<uint32_t>(
            _mm_movemask_ps(_mm_castsi128_ps(_mm_and_si128(behind, longer))));
        const uint64_t block_idle = static_cast<uint32_t>(
            _mm_movemask_pd(_mm_cmpngt_pd(_mm_loadu_pd(finish + k), ready2)) |
            (_mm_movemask_pd(
                 _mm_cmpngt_pd(_mm_loadu_pd(finish + k + 2), ready2))
             << 2));
        ints |= block_ints << (k - begin);
        idle |= block_idle << (k - begin);
      }
#else
      for (int k = begin; k < end; ++k) {
        ints |=
            static_cast<uint64_t>((last_pos[k] < pv) & (last_hops[k] > hops))
            << (k - begin);
        idle |= static_cast<uint64_t>(!(finish[k] > ready)) << (k - begin);
      }
#endif
      // Padding slots (never behind) may still compare idle.
      const uint64_t real =
          end - begin == 64 ? ~uint64_t{0} : (uint64_t{1} << (end - begin)) - 1;
      may_[begin >> 6] = ints & (idle | cut_mask) & real;
      idle_[begin >> 6] = idle & real;
    }
  }

  // At the cap: the stream of group `g` whose node before v in issue order
  // is expected to finish first (ties: v's op, then the oldest).
  // REQUIRES: Look(group, v, ...) was the last look.
  int Least(NodeId v, int g) {
    const Group& group = groups_[g];
    const int size = group.size();
    const int words = (size + 63) / 64;
    uint64_t* ties = idle_.data();
    bool any = false;
    for (int w = 0; w < words; ++w) any |= ties[w] != 0;
    if (!any) {
      // Every stream delays v: the least delay. (Delays are never NaN
      // here, an idle stream being one whose lateness is NaN.)
      const double ready = top_[v];
      const double* finish = group.finish.data();
      double least = std::numeric_limits<double>::infinity();
      for (int k = 0; k < size; ++k) {
        const double delay = finish[k] - ready;
        least = delay < least ? delay : least;
      }
      for (int w = 0; w < words; ++w) {
        const int begin = w * 64;
        const int end = std::min(begin + 64, size);
        uint64_t bits = 0;
        for (int k = begin; k < end; ++k) {
          bits |= static_cast<uint64_t>(finish[k] - ready == least)
                  << (k - begin);
        }
        ties[w] = bits;
      }
    }
    // The least, preferring v's op, then the oldest stream.
    const uint64_t op = OpBit(v);
    const int op_id = op != 0 ? __builtin_ctzll(op) : -1;
    for (int w = 0; w < words && op_id >= 0; ++w) {
      const uint64_t both = ties[w] & group.op_slots[w * 64 + op_id];
      if (both != 0) return group.streams[w * 64 + __builtin_ctzll(both)];
    }
    for (int w = 0; w < words; ++w) {
      if (ties[w] != 0) return group.streams[w * 64 + __builtin_ctzll(ties[w])];
    }
    return -1;
  }

  // At the cap, v shares `chosen` after its node before v (-1 if none),
  // which is returned; with the choices, the ordering is recorded unless
  // the DAG has it. The streams whose last node comes before v were all
  // found not to be its ancestors.
  NodeId ShareAtCap(NodeId v, int32_t pv, int chosen) {
    const Track& t = tracks_[chosen];
    const NodeId before = t.current;
    if (before < 0 || !c_.options.record_choices) return before;
    const Group& group = groups_[t.group];
    const bool ordered = !(finish_cut_ && group.finish[t.slot] > top_[v]) &&
                         hops_[before] > hops_[v] &&
                         group.last_pos[t.slot] >= pv &&
                         Reaches(before, t.current_pos, v, pv);
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
    if (chosen < 0 && groups_[g].size() < c_.options.max_streams_per_device) {
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
      Place(v, pv, chosen, StreamChoice::Why::kRecycled, tracks_[chosen].last);
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

  // The wide window of the node at issue position `pos`, one of the last
  // kWide positions labelled: kWideWords words, after kWideWords zero
  // words that let shifts read below the first. (With fewer than kWide
  // nodes, pos is below the number of rows.)
  uint64_t* Wide(int32_t pos) {
    return wide_.data() +
           static_cast<size_t>(pos & (kWide - 1)) * (2 * kWideWords) +
           kWideWords;
  }

  // Labels v, at issue position pv, with its wide window: bit k set if the
  // node at position pv - k is v itself (k = 0) or its ancestor, for k
  // below kWide. Bits 1 to 64 are the index's window. A path to v from an
  // ancestor d positions before it enters v from a predecessor p at most
  // d positions before v and stays between the two: so the window is the
  // union of the predecessors' windows, each shifted by its distance.
  // REQUIRES: every position before pv labelled.
  void Label(NodeId v, int32_t pv) {
    uint64_t acc[kWideWords] = {(c_.dag.reach.window(v) << 1) | 1};
    for (NodeId p : c_.dag.Preds(v)) {
      const int32_t d = pv - c_.dag.pos(p);
      if (d >= kWide) continue;
      const uint64_t* in = Wide(pv - d);
      const int ws = d >> 6;
      const int bs = d & 63;
      // Word 0 is the index's; in[-ws..-1] are zeros.
      for (int j = 1; j < kWideWords; ++j) {
        acc[j] |= (in[j - ws] << bs) | ((in[j - ws - 1] >> 1) >> (63 - bs));
      }
    }
    uint64_t* out = Wide(pv);
    for (int j = 0; j < kWideWords; ++j) out[j] = acc[j];
  }

  // Whether u, at issue position pu, reaches v, the node at the walk's
  // position pv. Most questions are about nodes a few hundred positions
  // apart at most, which the wide windows answer exactly; the rest are
  // searched.
  bool Reaches(NodeId u, int32_t pu, NodeId v, int32_t pv) {
    if (pu >= pv) return false;
    const int32_t d = pv - pu;
    if (d < kWide) return Near(v, pv, d);
    return Search(u, v, pv);
  }

  // Whether the node d positions before v (at the walk's position pv, d
  // below kWide) is an ancestor of v.
  bool Near(NodeId v, int32_t pv, int32_t d) {
    if (d <= ReachabilityIndex::kWindow) {
      return (c_.dag.reach.window(v) >> (d - 1)) & 1;
    }
    return (Wide(pv)[d >> 6] >> (d & 63)) & 1;
  }

  // Whether u, at least kWide positions before v (at the walk's position
  // pv), reaches v: a search forward from u that enters only nodes that
  // may still reach v by their levels (an ancestor of v comes before it,
  // is shallower, has a longer path in edges to a sink and, under the
  // finish cut, ends no later than v may start) and asks v's wide window
  // about those close enough. Past kSearchNodes nodes it leaves the
  // question to the query.
  bool Search(NodeId u, NodeId v, int32_t pv) {
    const ReachabilityIndex& reach = c_.dag.reach;
    const int32_t depth = reach.depth(v);
    const int32_t hops = hops_[v];
    const double ready = top_[v];
    const bool cut = finish_cut_;
    if (seen_.empty()) seen_.assign(c_.num_nodes(), 0);
    if (++stamp_ == 0) {  // wrapped: forget every old mark
      std::fill(seen_.begin(), seen_.end(), 0);
      stamp_ = 1;
    }
    stack_.clear();
    stack_.push_back(u);
    for (int entered = 0; !stack_.empty(); ++entered) {
      if (entered == kSearchNodes) return c_.query().Reaches(u, v);
      const NodeId x = stack_.back();
      stack_.pop_back();
      for (NodeId y : c_.dag.Succs(x)) {
        if (y == v) return true;
        if (seen_[y] == stamp_) continue;
        seen_[y] = stamp_;
        const int32_t py = reach.pos(y);
        if (py >= pv || reach.depth(y) >= depth || hops_[y] <= hops ||
            (cut && top_[y] + c_.graph.cost_us(y) > ready)) {
          continue;
        }
        if (const int32_t d = pv - py; d < kWide) {
          if (Near(v, pv, d)) return true;
          continue;
        }
        stack_.push_back(y);
      }
    }
    return false;
  }

  // The first 64 ops get a bit each.
  uint64_t OpBit(NodeId v) const {
    const uint32_t op = static_cast<uint32_t>(c_.graph.op_id(v));
    return op < 64 ? uint64_t{1} << (op & 63) : 0;
  }

  StreamContext& c_;
  const double* top_;    // the levels' top_us
  const int32_t* hops_;  // the levels' bottom_hops
  bool finish_cut_ = false;
  // The last look (see Look), 64 slots a word.
  absl::InlinedVector<uint64_t, 1> may_, idle_;
  std::vector<Track> tracks_;  // by stream
  // By issue position modulo kWide: the wide windows of the last kWide
  // positions labelled (see Wide).
  std::vector<uint64_t> wide_;
  // Search's scratch space: a mark per node, set to stamp_ once entered.
  std::vector<uint32_t> seen_;
  uint32_t stamp_ = 0;
  std::vector<NodeId> stack_;
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
