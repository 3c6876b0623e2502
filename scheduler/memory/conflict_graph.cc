// The sweep over issue order that finds which copies of a device may be
// live together (conflict_graph.h).
#include "scheduler/memory/conflict_graph.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

namespace weft::scheduler::memory {
namespace {

// Pairs (later, earlier) of local indices into a symmetric Csr.
Csr Symmetric(int n, const std::vector<std::pair<int32_t, int32_t>>& pairs) {
  Csr csr;
  csr.offsets.assign(n + 1, 0);
  for (const auto& [a, b] : pairs) {
    ++csr.offsets[a + 1];
    ++csr.offsets[b + 1];
  }
  for (int k = 0; k < n; ++k) csr.offsets[k + 1] += csr.offsets[k];
  csr.items.resize(csr.offsets[n]);
  std::vector<int32_t> fill(csr.offsets.begin(), csr.offsets.end() - 1);
  for (const auto& [a, b] : pairs) {
    csr.items[fill[a]++] = b;
    csr.items[fill[b]++] = a;
  }
  for (int k = 0; k < n; ++k) {
    std::sort(csr.items.begin() + csr.offsets[k],
              csr.items.begin() + csr.offsets[k + 1]);
  }
  return csr;
}

// For each of `copies` (by first use), how many pairs of it and later
// ones have overlapping issue intervals, summed from it to the last: pairs
// the conflict graph holds whatever the streams know. O(n log n).
std::vector<int64_t> IssueOverlapsFrom(const Lifetimes& lifetimes,
                                       const std::vector<int32_t>& copies) {
  std::vector<int32_t> lasts;
  lasts.reserve(copies.size());
  for (const int32_t c : copies) lasts.push_back(lifetimes.copy(c).last);
  std::sort(lasts.begin(), lasts.end());
  std::vector<int64_t> from(copies.size() + 1, 0);
  size_t closed = 0;  // copies before k closed before its first use
  for (size_t k = 0; k < copies.size(); ++k) {
    const int32_t first = lifetimes.copy(copies[k]).first;
    while (closed < lasts.size() && lasts[closed] < first) ++closed;
    from[k] = static_cast<int64_t>(k) - static_cast<int64_t>(closed);
  }
  for (size_t k = copies.size(); k-- > 0;) from[k] += from[k + 1];
  return from;
}

}  // namespace

ConflictGraph BuildConflictGraph(const Lifetimes& lifetimes, int device,
                                 int64_t max_conflicts) {
  ConflictGraph graph;
  for (int c = 0; c < lifetimes.num_copies(); ++c) {
    if (lifetimes.copy(c).device == device) graph.copies.push_back(c);
  }
  const int n = static_cast<int>(graph.copies.size());
  // Pairs of copies from k on that overlap in issue order: with the pairs
  // found before k, a count the graph cannot stay under.
  const std::vector<int64_t> overlaps_from =
      IssueOverlapsFrom(lifetimes, graph.copies);
  const HappensBefore& hb = lifetimes.happens_before();
  const int num_positions = hb.num_positions();

  // Streams that start copies of this device, and their last start.
  std::vector<int32_t> slot_of(hb.num_streams(), -1);
  std::vector<int32_t> last_start;
  for (const int32_t c : graph.copies) {
    for (const int32_t g : lifetimes.Starts(c)) {
      const int32_t t = hb.point(g).stream;
      if (slot_of[t] < 0) {
        slot_of[t] = static_cast<int32_t>(last_start.size());
        last_start.push_back(g);
      }
      last_start[slot_of[t]] = std::max(last_start[slot_of[t]], g);
    }
  }
  const int num_slots = static_cast<int>(last_start.size());
  std::vector<std::vector<int32_t>> pending(num_slots);  // local indices

  // Active copies (issue interval still open), retired by last use.
  std::vector<int32_t> active;
  std::vector<int32_t> active_at(n, -1);
  using Entry = std::pair<int32_t, int32_t>;  // (last, local)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> by_last;
  std::vector<int32_t> last_on_stream(hb.num_streams(), -1);
  int32_t cursor = 0;  // positions below it are in last_on_stream
  std::vector<uint32_t> stamp(n, 0);
  uint32_t now = 0;
  std::vector<std::pair<int32_t, int32_t>> pairs;

  for (int k = 0; k < n; ++k) {
    const int32_t c = graph.copies[k];
    const BufferCopy& copy = lifetimes.copy(c);
    const int32_t p = copy.first;
    for (; cursor <= p && cursor < num_positions; ++cursor) {
      last_on_stream[hb.point(cursor).stream] = cursor;
    }
    while (!by_last.empty() && by_last.top().first < p) {
      const int32_t a = by_last.top().second;
      by_last.pop();
      const int32_t at = active_at[a];
      active[at] = active.back();
      active_at[active[at]] = at;
      active.pop_back();
      active_at[a] = -1;
      const int32_t last = lifetimes.copy(graph.copies[a]).last;
      for (int t = 0; t < num_slots; ++t) {
        if (last_start[t] > last) pending[t].push_back(a);
      }
    }
    ++now;
    for (const int32_t a : active) {
      stamp[a] = now;
      pairs.emplace_back(k, a);
    }
    for (const int32_t g : lifetimes.Starts(c)) {
      const int32_t stream = hb.point(g).stream;
      std::vector<int32_t>& list = pending[slot_of[stream]];
      const int32_t h = last_on_stream[stream];
      size_t kept = 0;
      for (size_t i = 0; i < list.size(); ++i) {
        const int32_t a = list[i];
        const auto ends = lifetimes.Ends(graph.copies[a]);
        // h comes no later than g on the stream, so what g does not know h
        // does not know either: a conflict keeps `a` without asking h.
        if (stamp[a] != now && !hb.AllBefore(ends, g)) {
          stamp[a] = now;
          pairs.emplace_back(k, a);
          list[kept++] = a;
          continue;
        }
        if (h >= 0 && hb.AllBefore(ends, h)) continue;  // known from here on
        list[kept++] = a;
      }
      list.resize(kept);
    }
    if (static_cast<int64_t>(pairs.size()) + overlaps_from[k + 1] >
        max_conflicts) {
      graph.complete = false;
      graph.conflicts = Csr();
      return graph;
    }
    active_at[k] = static_cast<int32_t>(active.size());
    active.push_back(k);
    by_last.emplace(copy.last, k);
  }
  graph.conflicts = Symmetric(n, pairs);
  return graph;
}

}  // namespace weft::scheduler::memory
