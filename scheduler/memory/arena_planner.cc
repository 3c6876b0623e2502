#include "scheduler/memory/arena_planner.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <tuple>
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
// at one instant conflict pairwise, so no arena is smaller. Fills `live`
// with those live at the peak (local indices).
int64_t ExecutionPeak(const Lifetimes& lifetimes,
                      absl::Span<const int32_t> copies,
                      absl::Span<const int64_t> sizes, int e,
                      std::vector<int32_t>* live_at_peak) {
  constexpr double kForever = std::numeric_limits<double>::infinity();
  std::vector<std::pair<double, double>> spans(copies.size());
  std::vector<std::pair<double, int64_t>> events;  // (time, +/- size)
  events.reserve(2 * copies.size());
  for (size_t k = 0; k < copies.size(); ++k) {
    const int32_t c = copies[k];
    double start = kForever;
    double end = 0;
    for (const int32_t position : lifetimes.Uses(c)) {
      if (position < 0) continue;
      start = std::min(start, lifetimes.start_us(e, position));
      end = std::max(end, lifetimes.end_us(e, position));
    }
    if (lifetimes.copy(c).live_to_end) end = kForever;
    spans[k] = {start, end};
    if (start == kForever) continue;
    events.emplace_back(start, sizes[k]);
    if (end != kForever) events.emplace_back(end, -sizes[k]);
  }
  // Ends before starts at one instant: a copy that ends as another starts
  // does not overlap it.
  std::sort(events.begin(), events.end());
  int64_t live = 0, peak = 0;
  double at = 0;
  for (const auto& [time, delta] : events) {
    live += delta;
    if (live > peak) {
      peak = live;
      at = time;
    }
  }
  live_at_peak->clear();
  for (size_t k = 0; k < copies.size(); ++k) {
    if (spans[k].first <= at && spans[k].second > at && peak > 0) {
      live_at_peak->push_back(static_cast<int32_t>(k));
    }
  }
  return peak;
}

bool Adjacent(const Csr& conflicts, int32_t a, int32_t b) {
  const auto row = conflicts.Row(a);
  return std::binary_search(row.begin(), row.end(), b);
}

// Adds `candidates` to `clique`, heaviest first, each that conflicts with
// every copy added before it (all conflict with `clique` already).
void AddGreedily(const Csr& conflicts, absl::Span<const int64_t> sizes,
                 std::vector<int32_t> candidates,
                 std::vector<int32_t>* clique) {
  std::sort(candidates.begin(), candidates.end(), [&](int32_t a, int32_t b) {
    return sizes[a] != sizes[b] ? sizes[a] > sizes[b] : a < b;
  });
  const size_t base = clique->size();
  for (const int32_t c : candidates) {
    bool fits = true;
    for (size_t i = base; i < clique->size() && fits; ++i) {
      fits = Adjacent(conflicts, c, (*clique)[i]);
    }
    if (fits) clique->push_back(c);
  }
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
    case ArenaHeuristic::kTwoEnded:
      return "two_ended";
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

std::vector<int32_t> GrowClique(const Csr& conflicts,
                                absl::Span<const int64_t> sizes,
                                std::vector<int32_t> clique, int max_rounds) {
  const int n = static_cast<int>(sizes.size());
  std::vector<int32_t> count(n, 0);
  std::vector<uint8_t> member(n, 0);
  std::vector<int32_t> touched;
  for (int round = 0; round < max_rounds; ++round) {
    for (const int32_t c : clique) member[c] = 1;
    touched.clear();
    for (const int32_t c : clique) {
      for (const int32_t a : conflicts.Row(c)) {
        if (member[a]) continue;
        if (count[a]++ == 0) touched.push_back(a);
      }
    }
    const int32_t k = static_cast<int32_t>(clique.size());
    std::vector<int32_t> all;
    // Copies that conflict with all members but one, by that member.
    std::vector<std::pair<int32_t, int32_t>> near;  // (member index, copy)
    for (const int32_t a : touched) {
      if (count[a] == k) {
        all.push_back(a);
      } else if (count[a] == k - 1 && all.empty()) {
        for (int32_t i = 0; i < k; ++i) {
          if (!Adjacent(conflicts, a, clique[i])) {
            near.emplace_back(i, a);
            break;
          }
        }
      }
      count[a] = 0;
    }
    for (const int32_t c : clique) member[c] = 0;
    if (!all.empty()) {
      AddGreedily(conflicts, sizes, std::move(all), &clique);
      continue;
    }
    // The best swap of one member for what conflicts with all the others.
    std::sort(near.begin(), near.end());
    int64_t best_gain = 0;
    std::vector<int32_t> best;
    for (size_t lo = 0; lo < near.size();) {
      size_t hi = lo;
      while (hi < near.size() && near[hi].first == near[lo].first) ++hi;
      const int32_t out = near[lo].first;
      std::vector<int32_t> candidates;
      for (size_t j = lo; j < hi; ++j) candidates.push_back(near[j].second);
      std::vector<int32_t> next;
      for (int32_t i = 0; i < k; ++i) {
        if (i != out) next.push_back(clique[i]);
      }
      AddGreedily(conflicts, sizes, std::move(candidates), &next);
      int64_t gain = -sizes[clique[out]];
      for (size_t i = k - 1; i < next.size(); ++i) gain += sizes[next[i]];
      if (gain > best_gain) {
        best_gain = gain;
        best = std::move(next);
      }
      lo = hi;
    }
    if (best_gain <= 0) break;
    clique = std::move(best);
  }
  return clique;
}

int64_t AntichainBound(const Lifetimes& lifetimes,
                       absl::Span<const int32_t> copies,
                       absl::Span<const int64_t> sizes) {
  const HappensBefore& hb = lifetimes.happens_before();
  const int num_positions = hb.num_positions();
  const int num_streams = hb.upload_stream(0);  // plan streams
  // Nodes: before and after each position, then the source and the sink.
  const int source = 2 * num_positions;
  const int sink = source + 1;
  struct Arc {
    int32_t to;
    int64_t capacity;
  };
  constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max() / 4;
  std::vector<std::pair<int32_t, Arc>> arcs;  // (from, arc), then reverse
  auto add = [&](int32_t from, int32_t to, int64_t capacity) {
    arcs.push_back({from, {to, capacity}});
    arcs.push_back({to, {from, 0}});
  };
  // Happens-before: stream order and every rise of a stream's clock.
  std::vector<std::vector<int32_t>> on_stream(num_streams);
  std::vector<int32_t> previous(num_positions, -1);
  for (int32_t i = 0; i < num_positions; ++i) {
    const int32_t s = hb.point(i).stream;
    if (!on_stream[s].empty()) previous[i] = on_stream[s].back();
    on_stream[s].push_back(i);
    add(2 * i, 2 * i + 1, kInfinite);
    if (previous[i] >= 0) add(2 * previous[i] + 1, 2 * i, kInfinite);
  }
  for (int32_t i = 0; i < num_positions; ++i) {
    const int32_t s = hb.point(i).stream;
    for (int t = 0; t < num_streams; ++t) {
      if (t == s) continue;
      const int32_t known = hb.Known(i, t);
      if (known <= 0 ||
          (previous[i] >= 0 && hb.Known(previous[i], t) >= known)) {
        continue;
      }
      add(2 * on_stream[t][known - 1] + 1, 2 * i, kInfinite);
    }
  }
  // A copy ends after its last use (outputs never) and starts before its
  // first use on a stream (uploads before everything): a unit of flow from
  // an end to a start pairs two copies one of which happens before the
  // other. Every pair that does is reachable (perhaps more).
  int64_t total = 0;
  for (size_t k = 0; k < copies.size(); ++k) {
    const BufferCopy& copy = lifetimes.copy(copies[k]);
    total += sizes[k];
    if (sizes[k] == 0) continue;
    if (!copy.live_to_end && copy.last >= 0 && copy.last < num_positions) {
      add(source, 2 * copy.last + 1, sizes[k]);
    }
    const auto starts = lifetimes.Starts(copies[k]);
    if (!copy.uploaded && !starts.empty()) {
      add(2 * *std::min_element(starts.begin(), starts.end()), sink, sizes[k]);
    }
  }
  // Compressed adjacency.
  const int num_nodes = sink + 1;
  std::vector<int32_t> first(num_nodes + 1, 0);
  for (const auto& [from, arc] : arcs) ++first[from + 1];
  for (int v = 0; v < num_nodes; ++v) first[v + 1] += first[v];
  std::vector<Arc> adjacency(arcs.size());
  std::vector<int32_t> reverse(arcs.size());
  {
    std::vector<int32_t> fill(first.begin(), first.end() - 1);
    for (size_t a = 0; a < arcs.size(); a += 2) {
      const int32_t x = fill[arcs[a].first]++;
      const int32_t y = fill[arcs[a + 1].first]++;
      adjacency[x] = arcs[a].second;
      adjacency[y] = arcs[a + 1].second;
      reverse[x] = y;
      reverse[y] = x;
    }
  }
  arcs.clear();
  arcs.shrink_to_fit();
  // Dinic, with an explicit stack.
  std::vector<int32_t> level(num_nodes), next(num_nodes), queue, path;
  int64_t flow = 0;
  for (;;) {
    std::fill(level.begin(), level.end(), -1);
    queue.assign(1, source);
    level[source] = 0;
    for (size_t q = 0; q < queue.size(); ++q) {
      const int32_t v = queue[q];
      for (int32_t a = first[v]; a < first[v + 1]; ++a) {
        if (adjacency[a].capacity > 0 && level[adjacency[a].to] < 0) {
          level[adjacency[a].to] = level[v] + 1;
          queue.push_back(adjacency[a].to);
        }
      }
    }
    if (level[sink] < 0) break;
    std::copy(first.begin(), first.end() - 1, next.begin());
    path.clear();  // arcs from the source
    int32_t v = source;
    for (;;) {
      if (v == sink) {
        int64_t push = kInfinite;
        for (const int32_t a : path)
          push = std::min(push, adjacency[a].capacity);
        for (const int32_t a : path) {
          adjacency[a].capacity -= push;
          adjacency[reverse[a]].capacity += push;
        }
        flow += push;
        path.clear();
        v = source;
        continue;
      }
      int32_t& a = next[v];
      while (a < first[v + 1] && (adjacency[a].capacity == 0 ||
                                  level[adjacency[a].to] != level[v] + 1)) {
        ++a;
      }
      if (a < first[v + 1]) {
        path.push_back(a);
        v = adjacency[a].to;
        continue;
      }
      if (v == source) break;
      level[v] = -1;  // a dead end this phase
      path.pop_back();
      v = path.empty() ? source : adjacency[path.back()].to;
    }
  }
  return total - flow;
}

int64_t PlaceInOrder(const Csr& conflicts, absl::Span<const int64_t> sizes,
                     absl::Span<const int32_t> order,
                     std::vector<int64_t>* offsets) {
  return Place(conflicts, sizes, order, /*first_fit=*/false, offsets,
               /*height=*/0);
}

namespace {

// Re-placements of the best assignment found: copies by descending end
// (the highest first, best fit), then by ascending offset (first fit, which
// moves no copy up), until the arena stops shrinking.
int64_t Improve(const Csr& conflicts, absl::Span<const int64_t> sizes,
                int64_t lower_bound, int rounds, int64_t arena,
                std::vector<int64_t>* best_offsets) {
  const int n = static_cast<int>(sizes.size());
  std::vector<int32_t> order(n);
  std::vector<int64_t> offsets;
  for (int round = 0; round < rounds && arena > lower_bound; ++round) {
    bool better = false;
    for (const bool first_fit : {false, true}) {
      std::iota(order.begin(), order.end(), 0);
      const std::vector<int64_t>& at = *best_offsets;
      if (first_fit) {
        std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
          return at[a] != at[b] ? at[a] < at[b] : sizes[a] > sizes[b];
        });
      } else {
        std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
          const int64_t ea = at[a] + sizes[a], eb = at[b] + sizes[b];
          return ea != eb ? ea > eb : sizes[a] > sizes[b];
        });
      }
      const int64_t size =
          Place(conflicts, sizes, order, first_fit, &offsets, /*height=*/0);
      if (size < arena) {
        arena = size;
        best_offsets->swap(offsets);
        better = true;
      }
    }
    if (!better) break;
  }
  return arena;
}

}  // namespace

int64_t Place(const Csr& conflicts, absl::Span<const int64_t> sizes,
              absl::Span<const int32_t> order, bool first_fit,
              std::vector<int64_t>* offsets, int64_t height) {
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
    if (height >= sizes[k] && sizes[k] > 0) {
      // Either end of [0, height) where free.
      const int64_t high = height - sizes[k];
      bool low_free = true, high_free = true;
      for (const auto& [offset, end] : placed) {
        low_free = low_free && offset >= sizes[k];
        high_free = high_free && (end <= high || offset >= height);
      }
      if (low_free) {
        best = 0;
      } else if (high_free) {
        best = high;
      }
      if (best >= 0) best_gap = 0;
    }
    int64_t top = 0;  // highest end so far
    for (const auto& [offset, end] : placed) {
      if (best_gap == 0) break;
      if (offset > top) {
        const int64_t gap = offset - top;
        if (gap >= sizes[k] && gap < best_gap) {
          best = top;
          best_gap = gap;
          if (gap == sizes[k] || first_fit) break;
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
  const int n = static_cast<int>(copies.size());
  offsets->assign(n, 0);
  // Copies by last use, freed once issue order has passed it.
  std::vector<int32_t> by_last;
  by_last.reserve(n);
  for (int k = 0; k < n; ++k) {
    if (!lifetimes.copy(copies[k]).live_to_end && sizes[k] > 0) {
      by_last.push_back(k);
    }
  }
  std::sort(by_last.begin(), by_last.end(), [&](int32_t a, int32_t b) {
    return lifetimes.copy(copies[a]).last < lifetimes.copy(copies[b]).last;
  });
  auto before = [&](int32_t a, int32_t b) {
    return lifetimes.Before(copies[a], copies[b]);
  };
  // A free block and the last copies that held its bytes: a copy may take
  // it once every one of them happens before it (those that held it
  // earlier happen before them). One holder: merging blocks whose holders
  // are unordered keeps a large block from copies that could use part of
  // it (on random DAGs at 100k nodes the arena grows 27x with 8).
  constexpr int kMaxOccupants = 1;
  struct Block {
    int64_t size = 0;
    int32_t num_occupants = 0;
    int32_t freed = 0;  // the latest last use of an occupant
    std::array<int32_t, kMaxOccupants> occupants;
  };
  // Merges `b`'s occupants into `a`'s, dropping those that happen before
  // another; false when more than kMaxOccupants remain.
  auto merge = [&](const Block& a, const Block& b, Block* out) {
    std::array<int32_t, 2 * kMaxOccupants> all;
    int m = 0;
    for (int i = 0; i < a.num_occupants; ++i) all[m++] = a.occupants[i];
    for (int i = 0; i < b.num_occupants; ++i) all[m++] = b.occupants[i];
    int kept = 0;
    for (int i = 0; i < m; ++i) {
      bool covered = false;
      for (int j = 0; j < m && !covered; ++j) {
        covered = j != i && (all[j] == all[i] ? j < i : before(all[i], all[j]));
      }
      if (covered) continue;
      if (kept == kMaxOccupants) return false;
      out->occupants[kept++] = all[i];
    }
    out->num_occupants = kept;
    out->size = a.size + b.size;
    out->freed = std::max(a.freed, b.freed);
    return true;
  };
  std::map<int64_t, Block> blocks;  // by offset
  // (size, freed, offset): among blocks of one size, the longest free
  // first, the likeliest to be known free.
  std::set<std::tuple<int64_t, int32_t, int64_t>> by_size;
  auto key = [](int64_t offset, const Block& block) {
    return std::make_tuple(block.size, block.freed, offset);
  };
  auto add_free = [&](int64_t offset, Block block) {
    auto next = blocks.lower_bound(offset);
    Block merged;
    if (next != blocks.end() && next->first == offset + block.size &&
        merge(block, next->second, &merged)) {
      block = merged;
      by_size.erase(key(next->first, next->second));
      next = blocks.erase(next);
    }
    if (next != blocks.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.size == offset &&
          merge(prev->second, block, &merged)) {
        offset = prev->first;
        block = merged;
        by_size.erase(key(prev->first, prev->second));
        blocks.erase(prev);
      }
    }
    blocks[offset] = block;
    by_size.insert(key(offset, block));
  };
  auto known_free = [&](const Block& block, int32_t k) {
    for (int i = 0; i < block.num_occupants; ++i) {
      if (!before(block.occupants[i], k)) return false;
    }
    return true;
  };
  constexpr int kMaxTries = 32;
  int64_t top = 0;
  size_t next_free = 0;
  for (int k = 0; k < n; ++k) {
    const int32_t p = lifetimes.copy(copies[k]).first;
    for (; next_free < by_last.size() &&
           lifetimes.copy(copies[by_last[next_free]]).last < p;
         ++next_free) {
      const int32_t a = by_last[next_free];
      Block block;
      block.size = sizes[a];
      block.num_occupants = 1;
      block.occupants[0] = a;
      block.freed = lifetimes.copy(copies[a]).last;
      add_free((*offsets)[a], block);
    }
    const int64_t size = sizes[k];
    if (size == 0) continue;
    auto fit = by_size.lower_bound({size, std::numeric_limits<int32_t>::min(),
                                    std::numeric_limits<int64_t>::min()});
    int tries = 0;
    for (; fit != by_size.end() && tries < kMaxTries; ++tries, ++fit) {
      if (known_free(blocks.at(std::get<2>(*fit)), k)) break;
    }
    if (fit == by_size.end() || tries == kMaxTries) {
      // The free block at the top, if known free, grows to fit.
      int64_t offset = top;
      if (!blocks.empty()) {
        auto last = std::prev(blocks.end());
        if (last->first + last->second.size == top &&
            known_free(last->second, k)) {
          offset = last->first;
          by_size.erase(key(last->first, last->second));
          blocks.erase(last);
        }
      }

      (*offsets)[k] = offset;
      top = offset + size;
      continue;
    }
    const int64_t offset = std::get<2>(*fit);
    Block block = blocks.at(offset);
    by_size.erase(fit);
    blocks.erase(offset);
    (*offsets)[k] = offset;
    if (block.size > size) {
      block.size -= size;
      blocks[offset + size] = block;
      by_size.insert(key(offset + size, block));
    }
  }
  return top;
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
    // The peak along issue order, and the peak of each of kWindows equal
    // stretches of it (where cliques grow from).
    constexpr int kWindows = 16;
    const int window = std::max<int>(
        1, (static_cast<int>(delta.size()) + kWindows - 1) / kWindows);
    std::vector<std::pair<int64_t, int32_t>> window_peaks;  // (bytes, at)
    int64_t live = 0;
    for (size_t i = 0; i < delta.size(); ++i) {
      live += delta[i];
      arena.peak_live_bytes = std::max(arena.peak_live_bytes, live);
      if (i % window == 0) window_peaks.emplace_back(0, 0);
      if (live > window_peaks.back().first) {
        window_peaks.back() = {live, static_cast<int32_t>(i) - 1};
      }
    }
    arena.lower_bound_bytes =
        std::max(arena.lower_bound_bytes, arena.peak_live_bytes);
    // Cliques: the copies live at each peak, grown by local search.
    std::vector<std::vector<int32_t>> seeds(Lifetimes::kExecutions);
    for (int e = 0; e < Lifetimes::kExecutions; ++e) {
      arena.lower_bound_bytes =
          std::max(arena.lower_bound_bytes,
                   ExecutionPeak(lifetimes, graph.copies, sizes, e, &seeds[e]));
    }
    if (graph.complete && options.clique_rounds > 0) {
      const size_t first_window = seeds.size();
      seeds.resize(first_window + window_peaks.size());
      for (int k = 0; k < n; ++k) {
        const BufferCopy& copy = lifetimes.copy(graph.copies[k]);
        // Windows whose peak lies in the copy's issue interval.
        const int lo = std::max(copy.first + 1, 0) / window;
        const int hi =
            std::min<int>(copy.last + 1, static_cast<int>(delta.size()) - 1) /
            window;
        for (int w = lo; w <= hi && w < static_cast<int>(window_peaks.size());
             ++w) {
          const int32_t at = window_peaks[w].second;
          if (window_peaks[w].first > 0 && copy.first <= at &&
              at <= copy.last) {
            seeds[first_window + w].push_back(k);
          }
        }
      }
    }
    if (num_positions <= options.antichain_max_positions) {
      arena.lower_bound_bytes =
          std::max(arena.lower_bound_bytes,
                   AntichainBound(lifetimes, graph.copies, sizes));
    }
    if (graph.complete && options.clique_rounds > 0) {
      for (std::vector<int32_t>& seed : seeds) {
        int64_t bytes = 0;
        for (const int32_t k :
             GrowClique(graph.conflicts, sizes, std::move(seed),
                        options.clique_rounds)) {
          bytes += sizes[k];
        }
        arena.lower_bound_bytes = std::max(arena.lower_bound_bytes, bytes);
      }
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
        case ArenaHeuristic::kTwoEnded:
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
              : Place(graph.conflicts, sizes, order, /*first_fit=*/false,
                      &offsets,
                      h == ArenaHeuristic::kTwoEnded ? arena.lower_bound_bytes
                                                     : 0);
      if (best < 0 || size < best) {
        best = size;
        best_offsets.swap(offsets);
        arena.heuristic = h;
      }
      if (best == arena.lower_bound_bytes) break;  // cannot do better
    }
    if (graph.complete && best > arena.lower_bound_bytes) {
      best = Improve(graph.conflicts, sizes, arena.lower_bound_bytes,
                     options.improve_rounds, best, &best_offsets);
    }
    if (best > arena.no_reuse_bytes) {
      // Holes cost more than reuse saved: one copy after another.
      best = 0;
      for (int k = 0; k < n; ++k) {
        best_offsets[k] = best;
        best += sizes[k];
      }
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
