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
//   int32_t Commit(s): merges what was collected into s; returns the
//                      version of s's new clock;
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
  std::vector<NodeId> candidates, chosen;
  // Whether a clock (read through `known`) covers p's completion: p's
  // position on either of its streams.
  auto covers = [&c](NodeId p, auto known) {
    if (known(c.stream_of[p]) >= c.seq[p]) return true;
    const int32_t u = c.peer_of(p);
    return u >= 0 && known(u) >= c.peer_seq[p];
  };
  for (int i = 0; i < n; ++i) {
    const NodeId v = c.dag.order[i];
    const int32_t s = c.stream_of[v];
    const int32_t t = c.peer_of(v);
    c.seq[v] = ++count[s];
    if (t >= 0) {
      // v starts once t reaches it too: s learns all that came before.
      c.peer_seq[v] = ++count[t];
      current[s] = clocks.Join(s, t, c.peer_seq[v] - 1);
    }
    candidates.clear();
    for (NodeId p : c.dag.Preds(v)) {
      const int32_t tp = c.stream_of[p];
      const int32_t up = c.peer_of(p);
      // Stream order on s (or on t, through the join).
      if (tp == s || up == s || (t >= 0 && (tp == t || up == t))) continue;
      if (covers(p, [&](int32_t x) { return clocks.Current(s, x); })) {
        continue;
      }
      candidates.push_back(p);
    }
    if (!candidates.empty()) {
      if (candidates.size() > 1) {
        std::sort(candidates.begin(), candidates.end(),
                  [&](NodeId a, NodeId b) { return c.dag.pos(a) > c.dag.pos(b); });
      }
      clocks.Begin();
      chosen.clear();
      for (NodeId p : candidates) {
        if (covers(p, [&](int32_t x) { return clocks.Collected(x); })) {
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
    c.clock_of[v] = current[s];
    if (t >= 0) {
      current[s] = current[t] = clocks.Share(s, t, c.seq[v], c.peer_seq[v]);
    }
    c.waits.offsets.push_back(static_cast<int32_t>(c.waits.items.size()));
  }
}

// One counter per stream: the current clocks are a streams x streams
// matrix and a snapshot is a row.
class DenseClocks {
 public:
  explicit DenseClocks(StreamContext& c)
      : c_(c),
        s_(static_cast<int>(c.streams.size())),
        current_(static_cast<size_t>(s_) * s_, 0),
        collected_(s_, 0) {}

  int32_t Current(int s, int t) const {
    return current_[static_cast<size_t>(s) * s_ + t];
  }
  void Begin() { std::fill(collected_.begin(), collected_.end(), 0); }
  int32_t Collected(int t) const { return collected_[t]; }
  void Collect(NodeId p) {
    const int32_t* row = c_.clocks.Row(c_.clock_of[p]);
    for (int t = 0; t < s_; ++t) collected_[t] = std::max(collected_[t], row[t]);
    int32_t& own = collected_[c_.stream_of[p]];
    own = std::max(own, c_.seq[p]);
    if (const int32_t u = c_.peer_of(p); u >= 0) {
      collected_[u] = std::max(collected_[u], c_.peer_seq[p]);
    }
  }
  int32_t Commit(int s) {
    int32_t* row = Mutable(s);
    for (int t = 0; t < s_; ++t) row[t] = std::max(row[t], collected_[t]);
    return c_.clocks.AddRow(row);
  }
  int32_t Join(int s, int t, int32_t seq) {
    int32_t* row = Mutable(s);
    const int32_t* other = Mutable(t);
    for (int k = 0; k < s_; ++k) row[k] = std::max(row[k], other[k]);
    row[t] = std::max(row[t], seq);
    return c_.clocks.AddRow(row);
  }
  int32_t Share(int s, int t, int32_t s_seq, int32_t t_seq) {
    int32_t* row = Mutable(s);
    row[s] = std::max(row[s], s_seq);
    row[t] = std::max(row[t], t_seq);
    std::copy(row, row + s_, Mutable(t));
    return c_.clocks.AddRow(row);
  }

 private:
  int32_t* Mutable(int s) { return &current_[static_cast<size_t>(s) * s_]; }

  StreamContext& c_;
  const int s_;
  std::vector<int32_t> current_;
  std::vector<int32_t> collected_;
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
  int64_t may_wait = 0;  // nodes with a predecessor on another stream
  int64_t cross_edges = 0;  // an upper bound on the waits
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
    int64_t cross = 0;
    for (NodeId p : c.dag.Preds(v)) cross += c.stream_of[p] != s;
    may_wait += cross > 0 ? 1 : 0;
    cross_edges += cross;
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
  c.clocks.Reserve(may_wait + 2 * num_peers);
  c.waits = Csr();
  c.waits.offsets.reserve(n + 1);
  ReserveHuge(c.waits.items, cross_edges);
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
