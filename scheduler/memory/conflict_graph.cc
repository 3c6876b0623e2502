// The sweep over issue order that finds which copies of a device may be
// live together (conflict_graph.h).
#include "scheduler/memory/conflict_graph.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace weft::scheduler::memory {
namespace {

// The symmetric graph from each copy's conflicts with earlier copies:
// row k of `earlier` (any order) holds local indices below k. Row k of the
// result holds the earlier copies, then the later ones, each ascending,
// without a sort: the later copies that list a are written to row a as k
// ascends, then each row's later part, read as a ascends, writes a into
// the earlier part of the rows it names.
Csr Symmetric(const Csr& earlier) {
  const int n = earlier.rows();
  std::vector<int32_t> later_count(n, 0);
  for (const int32_t a : earlier.items) ++later_count[a];
  Csr csr;
  csr.offsets.assign(n + 1, 0);
  for (int k = 0; k < n; ++k) {
    csr.offsets[k + 1] = csr.offsets[k] +
                         (earlier.offsets[k + 1] - earlier.offsets[k]) +
                         later_count[k];
  }
  csr.items.resize(csr.offsets[n]);
  // Where each row's later part goes next: after its earlier part.
  std::vector<int32_t> fill(n);
  for (int k = 0; k < n; ++k) {
    fill[k] = csr.offsets[k + 1] - later_count[k];
  }
  for (int k = 0; k < n; ++k) {
    for (const int32_t a : earlier.Row(k)) csr.items[fill[a]++] = k;
  }
  // Where each row's earlier part goes next: its start.
  for (int k = 0; k < n; ++k) fill[k] = csr.offsets[k];
  for (int a = 0; a < n; ++a) {
    for (int32_t i = csr.offsets[a + 1] - later_count[a];
         i < csr.offsets[a + 1]; ++i) {
      const int32_t k = csr.items[i];
      csr.items[fill[k]++] = a;
    }
  }
  return csr;
}

// `copies` (local indices) ordered by last use, then by index: a counting
// sort of the last uses, positions from -1 (an upload) on.
std::vector<int32_t> ByLastUse(const Lifetimes& lifetimes,
                               const std::vector<int32_t>& copies) {
  int32_t most = -1;
  for (const int32_t c : copies) most = std::max(most, lifetimes.copy(c).last);
  std::vector<int32_t> start(static_cast<size_t>(most) + 3, 0);
  for (const int32_t c : copies) ++start[lifetimes.copy(c).last + 2];
  for (size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
  std::vector<int32_t> order(copies.size());
  for (size_t k = 0; k < copies.size(); ++k) {
    order[start[lifetimes.copy(copies[k]).last + 1]++] =
        static_cast<int32_t>(k);
  }
  return order;
}

// For each of `copies` (by first use), how many pairs of it and later
// ones have overlapping issue intervals, summed from it to the last: pairs
// the conflict graph holds whatever the streams know. `by_last`: the
// copies by last use (ByLastUse). O(n).
std::vector<int64_t> IssueOverlapsFrom(const Lifetimes& lifetimes,
                                       const std::vector<int32_t>& copies,
                                       const std::vector<int32_t>& by_last) {
  std::vector<int64_t> from(copies.size() + 1, 0);
  size_t closed = 0;  // copies before k closed before its first use
  for (size_t k = 0; k < copies.size(); ++k) {
    const int32_t first = lifetimes.copy(copies[k]).first;
    while (closed < by_last.size() &&
           lifetimes.copy(copies[by_last[closed]]).last < first) {
      ++closed;
    }
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
  // Copies retire (their issue interval closes) in this order, before the
  // first copy first used after their last use: all of those come after
  // them by first use.
  const std::vector<int32_t> by_last = ByLastUse(lifetimes, graph.copies);
  const std::vector<int64_t> overlaps_from =
      IssueOverlapsFrom(lifetimes, graph.copies, by_last);
  const HappensBefore& hb = lifetimes.happens_before();

  // Retired copies (issue interval closed) by the stream of each of their
  // last uses: (that use's place on the stream, local index), ascending.
  // A start of a later copy knows a prefix of each stream: the retired
  // copies it does not know finished are the suffixes past it.
  std::vector<std::vector<std::pair<int32_t, int32_t>>> retired(
      hb.num_streams());
  std::vector<int32_t> retired_streams;  // those with a retired copy

  // Active copies (issue interval still open), retired by last use.
  std::vector<int32_t> active;
  std::vector<int32_t> active_at(n, -1);
  size_t retired_count = 0;  // by_last's first ones retired
  std::vector<uint32_t> stamp(n, 0);
  uint32_t now = 0;
  // Row k: the earlier copies that conflict with copy k. The pairs that
  // overlap in issue order are a count it reaches anyway.
  Csr earlier;
  earlier.offsets.reserve(n + 1);
  earlier.items.reserve(
      static_cast<size_t>(std::min<int64_t>(overlaps_from[0], max_conflicts)));

  for (int k = 0; k < n; ++k) {
    const int32_t c = graph.copies[k];
    const BufferCopy& copy = lifetimes.copy(c);
    const int32_t p = copy.first;
    while (retired_count < by_last.size() &&
           lifetimes.copy(graph.copies[by_last[retired_count]]).last < p) {
      const int32_t a = by_last[retired_count++];
      const int32_t at = active_at[a];
      active[at] = active.back();
      active_at[active[at]] = at;
      active.pop_back();
      active_at[a] = -1;
      for (const Point& end : lifetimes.Ends(graph.copies[a])) {
        std::vector<std::pair<int32_t, int32_t>>& list = retired[end.stream];
        if (list.empty()) retired_streams.push_back(end.stream);
        // Retired by last use overall, so nearly in order on each stream.
        list.emplace_back(end.seq, a);
        for (size_t i = list.size() - 1;
             i > 0 && list[i - 1].first > list[i].first; --i) {
          std::swap(list[i - 1], list[i]);
        }
      }
    }
    ++now;
    for (const int32_t a : active) {
      stamp[a] = now;
      earlier.items.push_back(a);
    }
    const absl::Span<const int32_t> starts = lifetimes.Starts(c);
    for (const int32_t u : retired_streams) {
      // What the start that knows least of u knows: the suffixes past what
      // each start knows are the suffix past that.
      int32_t known = std::numeric_limits<int32_t>::max();
      for (const int32_t g : starts) known = std::min(known, hb.Known(g, u));
      const std::vector<std::pair<int32_t, int32_t>>& list = retired[u];
      // The suffix, from the back: no search.
      for (auto it = list.rbegin(); it != list.rend() && it->first > known;
           ++it) {
        const int32_t a = it->second;
        if (stamp[a] == now) continue;
        stamp[a] = now;
        earlier.items.push_back(a);
      }
    }
    earlier.offsets.push_back(static_cast<int32_t>(earlier.items.size()));
    if (static_cast<int64_t>(earlier.items.size()) + overlaps_from[k + 1] >
        max_conflicts) {
      graph.complete = false;
      graph.conflicts = Csr();
      return graph;
    }
    active_at[k] = static_cast<int32_t>(active.size());
    active.push_back(k);
  }
  graph.conflicts = Symmetric(earlier);
  return graph;
}

}  // namespace weft::scheduler::memory
