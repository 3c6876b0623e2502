#include "scheduler/passes/insert_events_pass.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

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
//                      version of s's new clock.
template <typename Clocks>
void Walk(StreamContext& c, Clocks& clocks) {
  const int n = c.num_nodes();
  const int num_streams = static_cast<int>(c.streams.size());
  std::vector<int32_t> count(num_streams, 0);
  std::vector<int32_t> current(num_streams, 0);  // clock version per stream
  std::vector<NodeId> candidates, chosen;
  for (int i = 0; i < n; ++i) {
    const NodeId v = c.dag.order[i];
    const int32_t s = c.stream_of[v];
    c.seq[v] = ++count[s];
    candidates.clear();
    for (NodeId p : c.dag.Preds(v)) {
      const int32_t t = c.stream_of[p];
      if (t == s || clocks.Current(s, t) >= c.seq[p]) continue;
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
        if (clocks.Collected(c.stream_of[p]) >= c.seq[p]) continue;
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
  }
  int32_t Commit(int s) {
    int32_t* row = &current_[static_cast<size_t>(s) * s_];
    for (int t = 0; t < s_; ++t) row[t] = std::max(row[t], collected_[t]);
    return c_.clocks.AddRow(row);
  }

 private:
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
    const Entry self(c_.stream_of[p], c_.seq[p]);
    MergeInto(collected_, absl::Span<const Entry>(&self, 1), scratch_);
  }
  int32_t Commit(int s) {
    Merge(c_.clocks.Get(current_[s]), collected_, next_);
    current_[s] = c_.clocks.Add(next_);
    return current_[s];
  }

 private:
  StreamContext& c_;
  std::vector<int32_t> current_;  // version per stream
  std::vector<Entry> collected_, scratch_, next_;
};

}  // namespace

absl::Status InsertEventsPass::Run(StreamContext& c) const {
  const int n = c.num_nodes();
  const int num_streams = static_cast<int>(c.streams.size());
  int64_t may_wait = 0;  // nodes with a predecessor on another stream
  for (NodeId v = 0; v < n; ++v) {
    const int32_t s = c.stream_of[v];
    if (s < 0 || s >= num_streams) {
      return absl::InternalError(absl::StrCat(
          "node '", c.graph.node(v).name, "' has no valid stream"));
    }
  }
  for (NodeId v = 0; v < n; ++v) {
    for (NodeId p : c.dag.Preds(v)) {
      if (c.stream_of[p] != c.stream_of[v]) {
        ++may_wait;
        break;
      }
    }
  }
  c.seq.assign(n, 0);
  c.clock_of.assign(n, 0);
  c.signal.assign(n, -1);
  c.clocks = ClockArena(num_streams);
  c.clocks.Reserve(may_wait);
  c.waits = Csr();
  c.waits.offsets.reserve(n + 1);
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
