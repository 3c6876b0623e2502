#include "scheduler/memory/arena_planner.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <utility>

namespace weft::scheduler::memory {
namespace {

int64_t AlignUp(uint64_t size, uint64_t alignment) {
  return static_cast<int64_t>((size + alignment - 1) / alignment * alignment);
}

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

// The most bytes live at once in execution `e` of `lifetimes`: a copy is
// live from the start of its first use (not counting an upload, which
// starts no later) to the end of its last, an output forever. Copies live
// at one instant conflict pairwise, so no arena is smaller.
int64_t ExecutionPeak(const Lifetimes& lifetimes,
                      absl::Span<const int32_t> copies,
                      absl::Span<const int64_t> sizes, int e) {
  std::vector<std::pair<double, int64_t>> events;  // (time, +/- size)
  events.reserve(2 * copies.size());
  for (size_t k = 0; k < copies.size(); ++k) {
    const int32_t c = copies[k];
    double start = std::numeric_limits<double>::infinity();
    double end = 0;
    for (const int32_t position : lifetimes.Uses(c)) {
      if (position < 0) continue;
      start = std::min(start, lifetimes.start_us(e, position));
      end = std::max(end, lifetimes.end_us(e, position));
    }
    if (start == std::numeric_limits<double>::infinity()) continue;
    events.emplace_back(start, sizes[k]);
    if (!lifetimes.copy(c).live_to_end) events.emplace_back(end, -sizes[k]);
  }
  // Ends before starts at one instant: a copy that ends as another starts
  // does not overlap it.
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  for (const auto& [time, delta] : events) {
    live += delta;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

const char* ArenaHeuristicName(ArenaHeuristic heuristic) {
  switch (heuristic) {
    case ArenaHeuristic::kBySize:
      return "by_size";
    case ArenaHeuristic::kInOrder:
      return "in_order";
    case ArenaHeuristic::kByConflicts:
      return "by_conflicts";
    case ArenaHeuristic::kByLifetime:
      return "by_lifetime";
    case ArenaHeuristic::kReleaseOrder:
      return "release_order";
  }
  return "?";
}

ConflictGraph BuildConflictGraph(const Lifetimes& lifetimes, int device,
                                 int64_t max_conflicts) {
  ConflictGraph graph;
  for (int c = 0; c < lifetimes.num_copies(); ++c) {
    if (lifetimes.copy(c).device == device) graph.copies.push_back(c);
  }
  const int n = static_cast<int>(graph.copies.size());
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
        if (h >= 0 && hb.AllBefore(ends, h)) continue;  // known from here on
        list[kept++] = a;
        if (stamp[a] != now && !hb.AllBefore(ends, g)) {
          stamp[a] = now;
          pairs.emplace_back(k, a);
        }
      }
      list.resize(kept);
    }
    if (static_cast<int64_t>(pairs.size()) > max_conflicts) {
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

int64_t PlaceInOrder(const Csr& conflicts, absl::Span<const int64_t> sizes,
                     absl::Span<const int32_t> order,
                     std::vector<int64_t>* offsets) {
  const int n = static_cast<int>(sizes.size());
  offsets->assign(n, -1);
  int64_t arena = 0;
  std::vector<std::pair<int64_t, int64_t>> placed;  // (offset, end)
  for (const int32_t k : order) {
    placed.clear();
    for (const int32_t a : conflicts.Row(k)) {
      const int64_t offset = (*offsets)[a];
      if (offset >= 0 && sizes[a] > 0) {
        placed.emplace_back(offset, offset + sizes[a]);
      }
    }
    std::sort(placed.begin(), placed.end());
    int64_t best = -1;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    int64_t top = 0;  // highest end so far
    for (const auto& [offset, end] : placed) {
      if (offset > top) {
        const int64_t gap = offset - top;
        if (gap >= sizes[k] && gap < best_gap) {
          best = top;
          best_gap = gap;
          if (gap == sizes[k]) break;
        }
      }
      top = std::max(top, end);
    }
    const int64_t offset = best >= 0 ? best : top;
    (*offsets)[k] = offset;
    arena = std::max(arena, offset + sizes[k]);
  }
  return arena;
}

int64_t PlaceByRelease(const Lifetimes& lifetimes,
                       absl::Span<const int32_t> copies,
                       absl::Span<const int64_t> sizes,
                       std::vector<int64_t>* offsets) {
  const HappensBefore& hb = lifetimes.happens_before();
  const int n = static_cast<int>(copies.size());
  const int num_positions = hb.num_positions();
  // Nodes of each stream in issue order, and the last start of a copy on
  // each stream.
  std::vector<std::vector<int32_t>> on_stream(hb.num_streams());
  for (int32_t i = 0; i < num_positions; ++i) {
    on_stream[hb.point(i).stream].push_back(i);
  }
  std::vector<int32_t> last_start(hb.num_streams(), -1);
  std::vector<int32_t> starting;  // streams with a start
  for (const int32_t c : copies) {
    for (const int32_t g : lifetimes.Starts(c)) {
      const int32_t t = hb.point(g).stream;
      if (last_start[t] < 0) starting.push_back(t);
      last_start[t] = std::max(last_start[t], g);
    }
  }
  // Release position of each copy: from there on, every start knows it
  // finished.
  std::vector<int32_t> release(n);
  for (int k = 0; k < n; ++k) {
    const BufferCopy& copy = lifetimes.copy(copies[k]);
    if (copy.live_to_end) {
      release[k] = std::numeric_limits<int32_t>::max();
      continue;
    }
    const auto ends = lifetimes.Ends(copies[k]);
    int32_t r = copy.last + 1;
    for (const int32_t t : starting) {
      if (last_start[t] <= copy.last) continue;
      const std::vector<int32_t>& nodes = on_stream[t];
      auto lo = std::upper_bound(nodes.begin(), nodes.end(), copy.last);
      auto hi = std::upper_bound(lo, nodes.end(), last_start[t]);
      // Knowledge only grows along a stream: binary search the first node
      // that knows.
      auto first = std::partition_point(
          lo, hi, [&](int32_t i) { return !hb.AllBefore(ends, i); });
      r = std::max(r, first == hi ? last_start[t] + 1 : *first);
    }
    release[k] = r;
  }
  // Heap simulation in issue order: releases at a position before the
  // copies that start there.
  std::vector<int32_t> by_release(n);
  std::iota(by_release.begin(), by_release.end(), 0);
  std::sort(by_release.begin(), by_release.end(),
            [&](int32_t a, int32_t b) { return release[a] < release[b]; });
  std::map<int64_t, int64_t> free_blocks;         // offset -> size
  std::set<std::pair<int64_t, int64_t>> by_size;  // (size, offset)
  int64_t top = 0;
  auto add_free = [&](int64_t offset, int64_t size) {
    auto next = free_blocks.lower_bound(offset);
    if (next != free_blocks.end() && next->first == offset + size) {
      size += next->second;
      by_size.erase({next->second, next->first});
      next = free_blocks.erase(next);
    }
    if (next != free_blocks.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        by_size.erase({prev->second, prev->first});
        free_blocks.erase(prev);
      }
    }
    if (offset + size == top) {
      top = offset;  // the free tail goes back to the top
      return;
    }
    free_blocks[offset] = size;
    by_size.insert({size, offset});
  };
  offsets->assign(n, 0);
  int64_t arena = 0;
  size_t next_release = 0;
  for (int k = 0; k < n; ++k) {
    const int32_t p = lifetimes.copy(copies[k]).first;
    for (; next_release < by_release.size() &&
           release[by_release[next_release]] <= p;
         ++next_release) {
      const int32_t a = by_release[next_release];
      if (a < k && sizes[a] > 0) add_free((*offsets)[a], sizes[a]);
    }
    const int64_t size = sizes[k];
    if (size == 0) continue;
    auto fit = by_size.lower_bound({size, std::numeric_limits<int64_t>::min()});
    if (fit != by_size.end()) {
      const auto [block, offset] = *fit;
      by_size.erase(fit);
      free_blocks.erase(offset);
      (*offsets)[k] = offset;
      if (block > size) {
        free_blocks[offset + size] = block - size;
        by_size.insert({block - size, offset + size});
      }
    } else {
      (*offsets)[k] = top;
      top += size;
    }
    arena = std::max(arena, (*offsets)[k] + size);
  }
  return arena;
}

ArenaPlan PlanArenas(const Lifetimes& lifetimes, const ArenaOptions& options) {
  ArenaPlan plan;
  const uint64_t alignment = std::max<uint64_t>(options.alignment, 1);
  const int num_copies = lifetimes.num_copies();
  plan.offsets.assign(num_copies, 0);
  plan.sizes.resize(num_copies);
  for (int c = 0; c < num_copies; ++c) {
    plan.sizes[c] = AlignUp(lifetimes.copy(c).size_bytes, alignment);
  }
  const std::vector<ArenaHeuristic> heuristics =
      options.heuristics.empty()
          ? std::vector<ArenaHeuristic>(std::begin(kAllArenaHeuristics),
                                        std::end(kAllArenaHeuristics))
          : options.heuristics;
  const int num_positions = lifetimes.num_positions();
  for (int d = 0; d < lifetimes.num_devices(); ++d) {
    DeviceArena arena;
    arena.device = d;
    if (d < static_cast<int>(options.budget_bytes.size())) {
      arena.budget_bytes = options.budget_bytes[d];
    }
    int64_t max_conflicts = options.max_conflicts;
    if (max_conflicts <= 0) {
      max_conflicts = 64 * int64_t{lifetimes.num_copies()} + (int64_t{1} << 20);
    }
    const ConflictGraph graph = BuildConflictGraph(lifetimes, d, max_conflicts);
    const int n = static_cast<int>(graph.copies.size());
    arena.num_copies = n;
    arena.conflicts =
        graph.complete ? static_cast<int64_t>(graph.conflicts.items.size()) / 2
                       : -1;
    std::vector<int64_t> sizes(n);
    // Live bytes along issue order: +size at first use, -size after the
    // last (uploads at -1, so everything shifts by one).
    std::vector<int64_t> delta(num_positions + 3, 0);
    for (int k = 0; k < n; ++k) {
      const BufferCopy& copy = lifetimes.copy(graph.copies[k]);
      sizes[k] = plan.sizes[graph.copies[k]];
      arena.no_reuse_bytes += sizes[k];
      arena.lower_bound_bytes = std::max(arena.lower_bound_bytes, sizes[k]);
      delta[copy.first + 1] += sizes[k];
      delta[copy.last + 2] -= sizes[k];
    }
    int64_t live = 0;
    for (const int64_t x : delta) {
      live += x;
      arena.peak_live_bytes = std::max(arena.peak_live_bytes, live);
    }
    arena.lower_bound_bytes =
        std::max(arena.lower_bound_bytes, arena.peak_live_bytes);
    for (int e = 0; e < Lifetimes::kExecutions; ++e) {
      arena.lower_bound_bytes =
          std::max(arena.lower_bound_bytes,
                   ExecutionPeak(lifetimes, graph.copies, sizes, e));
    }

    std::vector<int32_t> order(n);
    std::vector<int64_t> offsets;
    std::vector<int64_t> best_offsets;
    int64_t best = -1;
    if (!graph.complete) {
      best = PlaceByRelease(lifetimes, graph.copies, sizes, &best_offsets);
      arena.heuristic = ArenaHeuristic::kReleaseOrder;
    }
    for (const ArenaHeuristic h : heuristics) {
      if (!graph.complete) break;
      std::iota(order.begin(), order.end(), 0);
      auto lifetime = [&](int32_t k) {
        const BufferCopy& copy = lifetimes.copy(graph.copies[k]);
        return copy.last - copy.first;
      };
      auto degree = [&](int32_t k) {
        return graph.conflicts.offsets[k + 1] - graph.conflicts.offsets[k];
      };
      switch (h) {
        case ArenaHeuristic::kBySize:
          std::stable_sort(
              order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return sizes[a] > sizes[b]; });
          break;
        case ArenaHeuristic::kInOrder:
        case ArenaHeuristic::kReleaseOrder:
          break;  // copies are numbered by first use
        case ArenaHeuristic::kByConflicts:
          std::stable_sort(
              order.begin(), order.end(), [&](int32_t a, int32_t b) {
                return degree(a) != degree(b) ? degree(a) > degree(b)
                                              : sizes[a] > sizes[b];
              });
          break;
        case ArenaHeuristic::kByLifetime:
          std::stable_sort(
              order.begin(), order.end(), [&](int32_t a, int32_t b) {
                return lifetime(a) != lifetime(b) ? lifetime(a) > lifetime(b)
                                                  : sizes[a] > sizes[b];
              });
          break;
      }
      const int64_t size =
          h == ArenaHeuristic::kReleaseOrder
              ? PlaceByRelease(lifetimes, graph.copies, sizes, &offsets)
              : PlaceInOrder(graph.conflicts, sizes, order, &offsets);
      if (best < 0 || size < best) {
        best = size;
        best_offsets.swap(offsets);
        arena.heuristic = h;
      }
      if (best == arena.lower_bound_bytes) break;  // cannot do better
    }
    arena.arena_bytes = std::max<int64_t>(best, 0);
    for (int k = 0; k < n; ++k) {
      plan.offsets[graph.copies[k]] = best_offsets[k];
    }
    plan.devices.push_back(arena);
  }
  return plan;
}

}  // namespace weft::scheduler::memory
