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

}  // namespace

absl::Status InsertEventsPass::Run(StreamContext& c) const {
  const int n = c.num_nodes();
  const int num_streams = static_cast<int>(c.streams.size());
  for (NodeId v = 0; v < n; ++v) {
    if (c.stream_of[v] < 0 || c.stream_of[v] >= num_streams) {
      return absl::InternalError(absl::StrCat(
          "node '", c.graph.node(v).name, "' has no valid stream"));
    }
  }
  c.seq.assign(n, 0);
  c.clock_of.assign(n, 0);
  c.signal.assign(n, -1);
  c.clocks = ClockArena();
  c.waits = Csr();
  c.waits.offsets.reserve(n + 1);
  c.num_events = 0;

  std::vector<int32_t> count(num_streams, 0);
  std::vector<int32_t> current(num_streams, 0);  // clock version per stream
  std::vector<NodeId> candidates, chosen;
  std::vector<Entry> merged, scratch, next;
  for (int i = 0; i < n; ++i) {
    const NodeId v = c.dag.order[i];
    const int32_t s = c.stream_of[v];
    c.seq[v] = ++count[s];
    candidates.clear();
    {
      absl::Span<const Entry> known = c.clocks.Get(current[s]);
      for (NodeId p : c.dag.Preds(v)) {
        const int32_t t = c.stream_of[p];
        if (t == s || ClockArena::Known(known, t) >= c.seq[p]) continue;
        candidates.push_back(p);
      }
    }
    if (!candidates.empty()) {
      std::sort(candidates.begin(), candidates.end(), [&](NodeId a, NodeId b) {
        return c.dag.pos(a) > c.dag.pos(b);
      });
      merged.clear();
      chosen.clear();
      for (NodeId p : candidates) {
        const int32_t t = c.stream_of[p];
        if (ClockArena::Known(merged, t) >= c.seq[p]) continue;
        chosen.push_back(p);
        MergeInto(merged, c.clocks.Get(c.clock_of[p]), scratch);
        const Entry self(t, c.seq[p]);
        MergeInto(merged, absl::Span<const Entry>(&self, 1), scratch);
      }
      Merge(c.clocks.Get(current[s]), merged, next);
      current[s] = c.clocks.Add(next);
      for (NodeId p : chosen) {
        if (c.signal[p] < 0) c.signal[p] = c.num_events++;
        c.waits.items.push_back(c.signal[p]);
      }
    }
    c.clock_of[v] = current[s];
    c.waits.offsets.push_back(static_cast<int32_t>(c.waits.items.size()));
  }
  c.events_planned = true;
  return absl::OkStatus();
}

}  // namespace weft::scheduler
