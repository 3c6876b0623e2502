#include "scheduler/passes/insert_events_pass.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "scheduler/huge_pages.h"

namespace weft::scheduler {
namespace {

using Entry = ClockArena::Entry;

// out = max(a, b), entry by entry.
void Merge(absl::Span<const Entry> a, absl::Span<const Entry> b,
           std::vector<Entry>& out) {
  out.clear();
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].first < b[j].first)) {
      out.push_back(a[i++]);
    } else if (i == a.size() || b[j].first < a[i].first) {
      out.push_back(b[j++]);
    } else {
      out.emplace_back(a[i].first, std::max(a[i].second, b[j].second));
      ++i;
      ++j;
    }
  }
}

// into = max(into, clock); `scratch` is reused storage.
void MergeInto(std::vector<Entry>& into, absl::Span<const Entry> clock,
               std::vector<Entry>& scratch) {
  Merge(into, clock, scratch);
  into.swap(scratch);
}

// The walk shared by both clock forms, and by plans with and without peer
// streams (kPeers). `Clocks` provides the current clock of each stream and
// the snapshots:
//   View Now(s): stream s's current clock, valid until the next change;
//   static int32_t Known(View, t): what that clock knows of stream t,
//                      which if kCheapKnown costs no more than a load;
//   int32_t Version(s): the version of s's current clock;
//   void Begin(): starts collecting the waits of one node;
//   int32_t Collected(chosen, t): what the waits chosen so far (listed in
//                      `chosen`, each passed to Collect) know of t;
//   void Collect(p): adds a chosen wait on node p;
//   void Commit(s, chosen): merges what was collected (at least one wait)
//                      into s;
//   void Join(s, t, seq): s learns what t knows and that t's first `seq`
//                      nodes finished;
//   void Share(s, t, s_seq, t_seq): after a node on both s and t (at those
//                      sequence numbers), both know what s knows and that
//                      it finished.
template <bool kPeers, typename Clocks>
void Walk(StreamContext& c, Clocks& clocks) {
  const int n = c.num_nodes();
  const int num_streams = static_cast<int>(c.streams.size());
  std::vector<int32_t> count_vector(num_streams, 0);
  int32_t* count = count_vector.data();
  // Candidate waits as (issue position, node), room for the longest row of
  // predecessors so far; and the chosen ones.
  std::vector<std::pair<int32_t, NodeId>> candidates;
  std::vector<NodeId> chosen;
  // Raw pointers in locals, so that they need not be reloaded from the
  // vectors after every store and call below.
  const NodeId* order = c.dag.order.data();
  const int32_t* pred_offsets = c.dag.preds.offsets.data();
  const NodeId* pred_items = c.dag.preds.items.data();
  const int32_t* stream_of = c.stream_of.data();
  const int32_t* peer_stream = kPeers ? c.peer_stream.data() : nullptr;
  int32_t* seq = c.seq.data();
  int32_t* peer_seq = kPeers ? c.peer_seq.data() : nullptr;
  int32_t* clock_of = c.clock_of.data();
  int32_t* signal = c.signal.data();
  std::vector<int32_t>& wait_items = c.waits.items;
  std::vector<int32_t>& wait_offsets = c.waits.offsets;
  int32_t num_events = c.num_events;
  // Whether a clock (read through `known`) covers p's completion: p's
  // position on either of its streams (p is on stream tp).
  auto covers = [=](NodeId p, int32_t tp, auto known) {
    if (known(tp) >= seq[p]) return true;
    if (!kPeers) return false;
    const int32_t u = peer_stream[p];
    return u >= 0 && known(u) >= peer_seq[p];
  };
  for (int i = 0; i < n; ++i) {
    const NodeId v = order[i];
    const int32_t s = stream_of[v];
    const int32_t t = kPeers ? peer_stream[v] : -1;
    seq[v] = ++count[s];
    if (kPeers && t >= 0) {
      // v starts once t reaches it too: s learns all that came before.
      peer_seq[v] = ++count[t];
      clocks.Join(s, t, peer_seq[v] - 1);
    }
    const int32_t begin = pred_offsets[v];
    const int32_t end = pred_offsets[v + 1];
    if (static_cast<size_t>(end - begin) > candidates.size()) {
      candidates.resize(end - begin);
    }
    // Every predecessor is written as a candidate and kept only if it is
    // one: no branch to mispredict. Rows are taken from the end, since
    // they usually list predecessors in issue order.
    std::pair<int32_t, NodeId>* cand = candidates.data();
    int num_candidates = 0;
    const auto now = clocks.Now(s);
    for (int32_t k = end - 1; k >= begin; --k) {
      const NodeId p = pred_items[k];
      const int32_t tp = stream_of[p];
      bool known = tp == s;  // stream order
      if (kPeers) {
        // Stream order on s (or on t, through the join).
        const int32_t up = peer_stream[p];
        known = known || up == s || (t >= 0 && (tp == t || up == t));
      }
      if (Clocks::kCheapKnown) {
        known = known |
                covers(p, tp, [&](int32_t x) { return Clocks::Known(now, x); });
      } else if (!known) {
        known = covers(p, tp, [&](int32_t x) { return Clocks::Known(now, x); });
      }
      cand[num_candidates].second = p;
      num_candidates += !known;
    }
    if (num_candidates > 1) {
      // Latest-issued first (insertion: there are few).
      for (int j = 0; j < num_candidates; ++j) {
        const NodeId p = cand[j].second;
        const int32_t pos = c.dag.pos(p);
        int k = j;
        for (; k > 0 && cand[k - 1].first < pos; --k) cand[k] = cand[k - 1];
        cand[k] = {pos, p};
      }
    }
    if (num_candidates > 0) {
      clocks.Begin();
      chosen.clear();
      for (int j = 0; j < num_candidates; ++j) {
        const NodeId p = cand[j].second;
        // Nothing collected yet covers the first.
        if (j > 0 && covers(p, stream_of[p], [&](int32_t x) {
              return clocks.Collected(chosen, x);
            })) {
          continue;
        }
        chosen.push_back(p);
        clocks.Collect(p);
      }
      clocks.Commit(s, chosen);
      for (NodeId p : chosen) {
        // A new event unless p signals one already (no branch).
        const int32_t e = signal[p];
        const bool fresh = e < 0;
        signal[p] = fresh ? num_events : e;
        num_events += fresh;
        wait_items.push_back(signal[p]);
      }
    }
    clock_of[v] = clocks.Version(s);
    if (kPeers && t >= 0) clocks.Share(s, t, seq[v], peer_seq[v]);
    wait_offsets.push_back(static_cast<int32_t>(wait_items.size()));
  }
  c.num_events = num_events;
}

// One counter per stream: each snapshot is a row of the arena, and a
// stream's current clock is its latest snapshot. The waits chosen for a
// node are read through on demand (there are few); only the commit
// combines whole rows. T: the arena's counters (uint16_t if narrow).
template <bool kPeers, typename T>
class DenseClocks {
 public:
  using View = const T*;
  static constexpr bool kCheapKnown = true;

  explicit DenseClocks(StreamContext& c)
      : arena_(c.clocks),
        current_(c.streams.size(), 0),
        stream_of_(c.stream_of.data()),
        peer_stream_(kPeers ? c.peer_stream.data() : nullptr),
        seq_(c.seq.data()),
        peer_seq_(kPeers ? c.peer_seq.data() : nullptr),
        clock_of_(c.clock_of.data()) {}

  View Now(int s) const { return arena_.template RowAs<T>(current_[s]); }
  static int32_t Known(View row, int t) { return row[t]; }
  int32_t Version(int s) const { return current_[s]; }
  void Begin() {}
  int32_t Collected(const std::vector<NodeId>& chosen, int t) const {
    int32_t known = 0;
    for (NodeId q : chosen) {
      known = std::max<int32_t>(known, Row(clock_of_[q])[t]);
      if (stream_of_[q] == t) known = std::max(known, seq_[q]);
      if (kPeers && peer_stream_[q] == t) {
        known = std::max(known, peer_seq_[q]);
      }
    }
    return known;
  }
  void Collect(NodeId) {}
  void Commit(int s, const std::vector<NodeId>& chosen) {
    KeepCurrent();
    // The first wait's clock is combined as the row is written.
    T* row = arena_.template MaxRowAs<T>(current_[s], clock_of_[chosen[0]]);
    for (size_t k = 0; k < chosen.size(); ++k) {
      const NodeId q = chosen[k];
      if (k > 0) arena_.MaxInto(row, Row(clock_of_[q]));
      Raise(row[stream_of_[q]], seq_[q]);
      if (kPeers) {
        if (const int32_t u = peer_stream_[q]; u >= 0) {
          Raise(row[u], peer_seq_[q]);
        }
      }
    }
    current_[s] = arena_.num_versions() - 1;
  }
  void Join(int s, int t, int32_t seq) {
    KeepCurrent();
    T* row = arena_.template CopyRowAs<T>(current_[s]);
    arena_.MaxInto(row, Row(current_[t]));
    Raise(row[t], seq);
    current_[s] = arena_.num_versions() - 1;
  }
  void Share(int s, int t, int32_t s_seq, int32_t t_seq) {
    KeepCurrent();
    T* row = arena_.template CopyRowAs<T>(current_[s]);
    Raise(row[s], s_seq);
    Raise(row[t], t_seq);
    current_[s] = current_[t] = arena_.num_versions() - 1;
  }

 private:
  const T* Row(int32_t version) const {
    return arena_.template RowAs<T>(version);
  }
  // Windowed arena: every eighth of the window, streams whose current
  // clock has grown stale get a fresh copy of it, so that no current
  // clock leaves the ring (an eighth of the window and a copy per stream
  // stay below the quarter that Stale leaves).
  void KeepCurrent() {
    if (arena_.window() == 0 || arena_.num_versions() < next_check_) return;
    for (int32_t& version : current_) {
      if (arena_.Stale(version)) {
        arena_.template CopyRowAs<T>(version);
        version = arena_.num_versions() - 1;
      }
    }
    next_check_ = arena_.num_versions() + arena_.window() / 8;
  }
  // counter = max(counter, seq); seq fits T (the arena is narrow only if
  // every sequence number does).
  static void Raise(T& counter, int32_t seq) {
    counter = std::max(counter, static_cast<T>(seq));
  }

  ClockArena& arena_;
  std::vector<int32_t> current_;  // version per stream
  int32_t next_check_ = 0;        // KeepCurrent's next look
  const int32_t* stream_of_;
  const int32_t* peer_stream_;
  const int32_t* seq_;
  const int32_t* peer_seq_;
  const int32_t* clock_of_;
};

// (stream, seq) lists, for plans with many streams.
class SparseClocks {
 public:
  using View = absl::Span<const Entry>;
  static constexpr bool kCheapKnown = false;

  explicit SparseClocks(StreamContext& c)
      : c_(c), current_(c.streams.size(), 0) {}

  View Now(int s) const { return c_.clocks.Get(current_[s]); }
  static int32_t Known(View clock, int t) {
    return ClockArena::Known(clock, t);
  }
  int32_t Version(int s) const { return current_[s]; }
  void Begin() { collected_.clear(); }
  int32_t Collected(const std::vector<NodeId>&, int t) const {
    return ClockArena::Known(collected_, t);
  }
  void Collect(NodeId p) {
    MergeInto(collected_, c_.clocks.Get(c_.clock_of[p]), scratch_);
    MergeInto(collected_,
              Pair(c_.stream_of[p], c_.seq[p], c_.peer_of(p),
                   c_.peer_of(p) >= 0 ? c_.peer_seq[p] : 0),
              scratch_);
  }
  void Commit(int s, const std::vector<NodeId>&) {
    Merge(c_.clocks.Get(current_[s]), collected_, next_);
    current_[s] = c_.clocks.Add(next_);
  }
  void Join(int s, int t, int32_t seq) {
    Merge(c_.clocks.Get(current_[s]), c_.clocks.Get(current_[t]), next_);
    MergeInto(next_, Pair(t, seq, -1, 0), scratch_);
    current_[s] = c_.clocks.Add(next_);
  }
  void Share(int s, int t, int32_t s_seq, int32_t t_seq) {
    Merge(c_.clocks.Get(current_[s]), Pair(s, s_seq, t, t_seq), next_);
    current_[s] = current_[t] = c_.clocks.Add(next_);
  }

 private:
  // A clock of the entries (s, a) and, if t >= 0, (t, b).
  absl::Span<const Entry> Pair(int32_t s, int32_t a, int32_t t, int32_t b) {
    pair_[0] = Entry(s, a);
    if (t < 0) return absl::Span<const Entry>(pair_, 1);
    pair_[1] = Entry(t, b);
    if (t < s) std::swap(pair_[0], pair_[1]);
    return absl::Span<const Entry>(pair_, 2);
  }

  StreamContext& c_;
  std::vector<int32_t> current_;  // version per stream
  std::vector<Entry> collected_, scratch_, next_;
  Entry pair_[2];
};

}  // namespace

absl::Status InsertEventsPass::Run(StreamContext& c) const {
  const int n = c.num_nodes();
  const int num_streams = static_cast<int>(c.streams.size());
  const bool peers = !c.peer_stream.empty();
  int64_t num_peers = 0;
  // Nodes per stream: its largest sequence number.
  std::vector<int32_t> length(num_streams, 0);
  for (NodeId v = 0; v < n; ++v) {
    const int32_t s = c.stream_of[v];
    if (s < 0 || s >= num_streams) {
      return absl::InternalError(absl::StrCat("node '", c.graph.node(v).name,
                                              "' has no valid stream"));
    }
    const int32_t t = c.peer_of(v);
    if (t == s || t >= num_streams || (c.peer_device_of(v) >= 0 && t < 0)) {
      return absl::InternalError(absl::StrCat("node '", c.graph.node(v).name,
                                              "' has no valid peer stream"));
    }
    ++length[s];
    if (t >= 0) {
      ++num_peers;
      ++length[t];
    }
  }
  const int32_t max_seq =
      num_streams > 0 ? *std::max_element(length.begin(), length.end()) : 0;
  AssignHuge(c.seq, n, 0);
  if (peers) {
    AssignHuge(c.peer_seq, n, 0);
  } else {
    c.peer_seq.clear();
  }
  AssignHuge(c.clock_of, n, 0);
  AssignHuge(c.signal, n, -1);
  c.clocks = ClockArena(num_streams, max_seq);
  // Upper bounds (a snapshot per node with a wait, two per peer; a wait per
  // edge): reserved address space that is only touched as it fills.
  c.clocks.Reserve(n + 2 * num_peers, max_clock_bytes_);
  c.waits = Csr();
  ReserveHuge(c.waits.offsets, n + 1);
  ReserveHuge(c.waits.items, c.dag.preds.items.size());
  c.num_events = 0;
  if (c.clocks.narrow() && peers) {
    DenseClocks<true, uint16_t> clocks(c);
    Walk<true>(c, clocks);
  } else if (c.clocks.narrow()) {
    DenseClocks<false, uint16_t> clocks(c);
    Walk<false>(c, clocks);
  } else if (c.clocks.dense() && peers) {
    DenseClocks<true, int32_t> clocks(c);
    Walk<true>(c, clocks);
  } else if (c.clocks.dense()) {
    DenseClocks<false, int32_t> clocks(c);
    Walk<false>(c, clocks);
  } else if (peers) {
    SparseClocks clocks(c);
    Walk<true>(c, clocks);
  } else {
    SparseClocks clocks(c);
    Walk<false>(c, clocks);
  }
  c.events_planned = true;
  return absl::OkStatus();
}

}  // namespace weft::scheduler
