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

// The walk shared by both clock forms. `Clocks` provides the current clock
// of each stream and the snapshots:
//   int32_t Current(s, t): what stream s knows of stream t now;
//   void Begin(): starts collecting the waits of one node;
//   int32_t Collected(t): what the waits chosen so far know of t;
//   void Collect(p): adds a chosen wait on node p;
//   int32_t Commit(s): merges what was collected (at least one wait) into
//                      s; returns the version of s's new clock;
//   int32_t Join(s, t, seq): s learns what t knows and that t's first
//                      `seq` nodes finished; returns s's new version;
//   int32_t Share(s, t, s_seq, t_seq): after a node on both s and t (at
//                      those sequence numbers), both know what s knows and
//                      that it finished; returns their common version.
template <typename Clocks>
void Walk(StreamContext& c, Clocks& clocks) {
  const int n = c.num_nodes();
  const int num_streams = static_cast<int>(c.streams.size());
  std::vector<int32_t> count(num_streams, 0);
  std::vector<int32_t> current(num_streams, 0);  // clock version per stream
  // Candidate waits as (issue position, node), and the chosen ones.
  std::vector<std::pair<int32_t, NodeId>> candidates;
  std::vector<NodeId> chosen;
  const bool peers = !c.peer_stream.empty();
  // Raw pointers in locals, so that they need not be reloaded from the
  // vectors after every store and call below.
  const NodeId* order = c.dag.order.data();
  const int32_t* pred_offsets = c.dag.preds.offsets.data();
  const NodeId* pred_items = c.dag.preds.items.data();
  const int32_t* stream_of = c.stream_of.data();
  const int32_t* peer_stream = peers ? c.peer_stream.data() : nullptr;
  int32_t* seq = c.seq.data();
  int32_t* peer_seq = peers ? c.peer_seq.data() : nullptr;
  int32_t* clock_of = c.clock_of.data();
  // Whether a clock (read through `known`) covers p's completion: p's
  // position on either of its streams.
  auto covers = [=](NodeId p, auto known) {
    if (known(stream_of[p]) >= seq[p]) return true;
    if (!peers) return false;
    const int32_t u = peer_stream[p];
    return u >= 0 && known(u) >= peer_seq[p];
  };
  for (int i = 0; i < n; ++i) {
    const NodeId v = order[i];
    const int32_t s = stream_of[v];
    const int32_t t = peers ? peer_stream[v] : -1;
    seq[v] = ++count[s];
    if (t >= 0) {
      // v starts once t reaches it too: s learns all that came before.
      peer_seq[v] = ++count[t];
      current[s] = clocks.Join(s, t, peer_seq[v] - 1);
    }
    candidates.clear();
    for (int32_t k = pred_offsets[v]; k < pred_offsets[v + 1]; ++k) {
      const NodeId p = pred_items[k];
      const int32_t tp = stream_of[p];
      if (tp == s) continue;  // stream order
      if (peers) {
        // Stream order on s (or on t, through the join).
        const int32_t up = peer_stream[p];
        if (up == s || (t >= 0 && (tp == t || up == t))) continue;
      }
      if (covers(p, [&](int32_t x) { return clocks.Current(s, x); })) {
        continue;
      }
      // Latest-issued first (insertion: there are few).
      const int32_t pos = c.dag.pos(p);
      candidates.emplace_back(pos, p);
      for (size_t j = candidates.size() - 1;
           j > 0 && candidates[j - 1].first < pos; --j) {
        std::swap(candidates[j - 1], candidates[j]);
      }
    }
    if (!candidates.empty()) {
      clocks.Begin();
      chosen.clear();
      for (const auto& [pos, p] : candidates) {
        // Nothing collected yet covers the first.
        if (!chosen.empty() &&
            covers(p, [&](int32_t x) { return clocks.Collected(x); })) {
          continue;
        }
        chosen.push_back(p);
        clocks.Collect(p);
      }
      current[s] = clocks.Commit(s);
      for (NodeId p : chosen) {
        if (c.signal[p] < 0) c.signal[p] = c.num_events++;
        c.waits.items.push_back(c.signal[p]);
      }
    }
    clock_of[v] = current[s];
    if (t >= 0) {
      current[s] = current[t] = clocks.Share(s, t, seq[v], peer_seq[v]);
    }
    c.waits.offsets.push_back(static_cast<int32_t>(c.waits.items.size()));
  }
}

// One counter per stream: each snapshot is a row of the arena, and a
// stream's current clock is its latest snapshot. The waits chosen for a
// node are kept as a list (there are few) and read through on demand;
// only the commit combines whole rows.
class DenseClocks {
 public:
  explicit DenseClocks(StreamContext& c)
      : c_(c), arena_(c.clocks), current_(c.streams.size(), 0) {}

  int32_t Current(int s, int t) const { return arena_.Row(current_[s])[t]; }
  void Begin() { chosen_.clear(); }
  int32_t Collected(int t) const {
    int32_t known = 0;
    for (NodeId q : chosen_) {
      known = std::max(known, arena_.Row(c_.clock_of[q])[t]);
      if (c_.stream_of[q] == t) known = std::max(known, c_.seq[q]);
      if (c_.peer_of(q) == t) known = std::max(known, c_.peer_seq[q]);
    }
    return known;
  }
  void Collect(NodeId p) { chosen_.push_back(p); }
  int32_t Commit(int s) {
    // The first wait's clock is combined as the row is written.
    int32_t* row = arena_.MaxRow(current_[s], c_.clock_of[chosen_[0]]);
    for (size_t k = 0; k < chosen_.size(); ++k) {
      const NodeId q = chosen_[k];
      if (k > 0) arena_.MaxInto(row, arena_.Row(c_.clock_of[q]));
      int32_t& own = row[c_.stream_of[q]];
      own = std::max(own, c_.seq[q]);
      if (const int32_t u = c_.peer_of(q); u >= 0) {
        row[u] = std::max(row[u], c_.peer_seq[q]);
      }
    }
    return current_[s] = arena_.num_versions() - 1;
  }
  int32_t Join(int s, int t, int32_t seq) {
    int32_t* row = arena_.CopyRow(current_[s]);
    arena_.MaxInto(row, arena_.Row(current_[t]));
    row[t] = std::max(row[t], seq);
    return current_[s] = arena_.num_versions() - 1;
  }
  int32_t Share(int s, int t, int32_t s_seq, int32_t t_seq) {
    int32_t* row = arena_.CopyRow(current_[s]);
    row[s] = std::max(row[s], s_seq);
    row[t] = std::max(row[t], t_seq);
    return current_[s] = current_[t] = arena_.num_versions() - 1;
  }

 private:
  StreamContext& c_;
  ClockArena& arena_;
  std::vector<int32_t> current_;  // version per stream
  std::vector<NodeId> chosen_;
};

// (stream, seq) lists, for plans with many streams.
class SparseClocks {
 public:
  explicit SparseClocks(StreamContext& c)
      : c_(c), current_(c.streams.size(), 0) {}

  int32_t Current(int s, int t) const {
    return ClockArena::Known(c_.clocks.Get(current_[s]), t);
  }
  void Begin() { collected_.clear(); }
  int32_t Collected(int t) const { return ClockArena::Known(collected_, t); }
  void Collect(NodeId p) {
    MergeInto(collected_, c_.clocks.Get(c_.clock_of[p]), scratch_);
    MergeInto(collected_, Pair(c_.stream_of[p], c_.seq[p], c_.peer_of(p),
                               c_.peer_of(p) >= 0 ? c_.peer_seq[p] : 0),
              scratch_);
  }
  int32_t Commit(int s) {
    Merge(c_.clocks.Get(current_[s]), collected_, next_);
    current_[s] = c_.clocks.Add(next_);
    return current_[s];
  }
  int32_t Join(int s, int t, int32_t seq) {
    Merge(c_.clocks.Get(current_[s]), c_.clocks.Get(current_[t]), next_);
    MergeInto(next_, Pair(t, seq, -1, 0), scratch_);
    current_[s] = c_.clocks.Add(next_);
    return current_[s];
  }
  int32_t Share(int s, int t, int32_t s_seq, int32_t t_seq) {
    Merge(c_.clocks.Get(current_[s]), Pair(s, s_seq, t, t_seq), next_);
    current_[s] = current_[t] = c_.clocks.Add(next_);
    return current_[s];
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
  for (NodeId v = 0; v < n; ++v) {
    const int32_t s = c.stream_of[v];
    if (s < 0 || s >= num_streams) {
      return absl::InternalError(absl::StrCat(
          "node '", c.graph.node(v).name, "' has no valid stream"));
    }
    const int32_t t = c.peer_of(v);
    if (t == s || t >= num_streams || (c.peer_device_of(v) >= 0 && t < 0)) {
      return absl::InternalError(absl::StrCat(
          "node '", c.graph.node(v).name, "' has no valid peer stream"));
    }
    if (t >= 0) ++num_peers;
  }
  c.seq.assign(n, 0);
  if (peers) {
    c.peer_seq.assign(n, 0);
  } else {
    c.peer_seq.clear();
  }
  c.clock_of.assign(n, 0);
  c.signal.assign(n, -1);
  c.clocks = ClockArena(num_streams);
  // Upper bounds (a snapshot per node with a wait, two per peer; a wait per
  // edge): reserved address space that is only touched as it fills.
  c.clocks.Reserve(n + 2 * num_peers);
  c.waits = Csr();
  ReserveHuge(c.waits.offsets, n + 1);
  ReserveHuge(c.waits.items, c.dag.preds.items.size());
  c.num_events = 0;
  if (c.clocks.dense()) {
    DenseClocks clocks(c);
    Walk(c, clocks);
  } else {
    SparseClocks clocks(c);
    Walk(c, clocks);
  }
  c.events_planned = true;
  return absl::OkStatus();
}

}  // namespace weft::scheduler
