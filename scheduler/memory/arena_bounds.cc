// Lower bounds on an arena: execution peaks, cliques grown by local search,
// and the heaviest antichain by a maximum flow (arena_bounds.h).
#include "scheduler/memory/arena_bounds.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace weft::scheduler::memory {

namespace {

// Sorts `v` ascending: by insertion while that moves few items (the
// instants of an execution come nearly in order of first use), else by
// std::sort.
void SortMostlySorted(std::vector<std::pair<double, int64_t>>& v) {
  int64_t budget = 4 * static_cast<int64_t>(v.size()) + 64;
  for (size_t i = 1; i < v.size(); ++i) {
    if (!(v[i] < v[i - 1])) continue;
    const std::pair<double, int64_t> item = v[i];
    size_t j = i;
    for (; j > 0 && item < v[j - 1] && budget > 0; --j, --budget) {
      v[j] = v[j - 1];
    }
    v[j] = item;
    if (budget == 0) {
      std::sort(v.begin(), v.end());
      return;
    }
  }
}

}  // namespace

int64_t ExecutionPeak(const Lifetimes& lifetimes,
                      absl::Span<const int32_t> copies,
                      absl::Span<const int64_t> sizes, int e,
                      std::vector<int32_t>* live_at_peak) {
  constexpr double kForever = std::numeric_limits<double>::infinity();
  std::vector<std::pair<double, double>> spans(copies.size());
  // (time, size) of the copies' starts and of their ends.
  std::vector<std::pair<double, int64_t>> starts, ends;
  starts.reserve(copies.size());
  ends.reserve(copies.size());
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
    starts.emplace_back(start, sizes[k]);
    if (end != kForever) ends.emplace_back(end, sizes[k]);
  }
  SortMostlySorted(starts);
  SortMostlySorted(ends);
  // Ends before starts at one instant: a copy that ends as another starts
  // does not overlap it. Only starts raise the peak.
  int64_t live = 0, peak = 0;
  double at = 0;
  size_t next_end = 0;
  for (const auto& [time, size] : starts) {
    while (next_end < ends.size() && ends[next_end].first <= time) {
      live -= ends[next_end++].second;
    }
    live += size;
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

namespace {

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

std::vector<int32_t> GrowClique(const Csr& conflicts,
                                absl::Span<const int64_t> sizes,
                                std::vector<int32_t> clique, int max_rounds) {
  const int n = static_cast<int>(sizes.size());
  // For every copy, how many members it conflicts with and the sum of
  // their ids plus one each (for a copy adjacent to all members but one,
  // the sum over all members less it names that one), kept up to date as
  // members come and go rather than recounted from every member's row each
  // round; and the copies counted.
  std::vector<int32_t> count(n, 0);
  std::vector<int64_t> id_sum(n, 0);
  std::vector<int32_t> member(n, 0);
  std::vector<int32_t> touched;  // with listed[a] set
  std::vector<uint8_t> listed(n, 0);
  int64_t member_id_sum = 0;
  auto enter = [&](int32_t m) {
    ++member[m];
    member_id_sum += m;
    for (const int32_t a : conflicts.Row(m)) {
      ++count[a];
      id_sum[a] += m + 1;
      if (!listed[a]) {
        listed[a] = 1;
        touched.push_back(a);
      }
    }
  };
  auto leave = [&](int32_t m) {
    --member[m];
    member_id_sum -= m;
    for (const int32_t a : conflicts.Row(m)) {
      --count[a];
      id_sum[a] -= m + 1;
    }
  };
  for (const int32_t c : clique) enter(c);
  std::vector<int32_t> position(n, -1);  // a member's index in `clique`
  for (int round = 0; round < max_rounds; ++round) {
    const int32_t k = static_cast<int32_t>(clique.size());
    for (int32_t i = 0; i < k; ++i) position[clique[i]] = i;
    std::vector<int32_t> all;
    // Copies that conflict with all members but one, by that member.
    std::vector<std::pair<int32_t, int32_t>> near;  // (member index, copy)
    size_t kept = 0;
    for (const int32_t a : touched) {
      if (count[a] == 0) {  // next to no member any more
        listed[a] = 0;
        continue;
      }
      touched[kept++] = a;
      if (member[a] > 0) continue;
      if (count[a] == k) {
        all.push_back(a);
      } else if (count[a] == k - 1 && all.empty()) {
        const int64_t missing = member_id_sum + (k - 1) - id_sum[a];
        near.emplace_back(position[missing], a);
      }
    }
    touched.resize(kept);
    if (!all.empty()) {
      AddGreedily(conflicts, sizes, std::move(all), &clique);
      for (size_t i = k; i < clique.size(); ++i) enter(clique[i]);
      continue;
    }
    // The best swap of one member for what conflicts with all the others.
    std::sort(near.begin(), near.end());
    int64_t best_gain = 0;
    int32_t best_out = -1;
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
        best_out = out;
        best = std::move(next);
      }
      lo = hi;
    }
    if (best_gain <= 0) break;
    leave(clique[best_out]);
    for (size_t i = k - 1; i < best.size(); ++i) enter(best[i]);
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

std::vector<int32_t> HeaviestCliqueAround(const Csr& conflicts,
                                          absl::Span<const int64_t> sizes,
                                          int32_t v, int64_t max_work,
                                          int64_t* work_left) {
  // v's neighbors (local ids, heaviest first) and their adjacency as bits.
  std::vector<int32_t> around(conflicts.Row(v).begin(), conflicts.Row(v).end());
  std::sort(around.begin(), around.end(), [&](int32_t a, int32_t b) {
    return sizes[a] != sizes[b] ? sizes[a] > sizes[b] : a < b;
  });
  // The heaviest neighbors only, as many as the search could weigh against
  // one another within its work: their bit matrix and the first coloring
  // cost the square of their number (a clique among them is one of v's).
  const size_t most = std::max<size_t>(
      64, static_cast<size_t>(
              std::sqrt(static_cast<double>(std::max<int64_t>(max_work, 0)))));
  if (around.size() > most) around.resize(most);
  const int m = static_cast<int>(around.size());
  const int words = (m + 63) / 64;
  std::vector<uint64_t> bits(static_cast<size_t>(m) * words, 0);
  int64_t work = 0;
  {
    // Rows are ascending: merge each neighbor's with the kept ones, or,
    // where its row is much longer, look each kept one up in it.
    std::vector<std::pair<int32_t, int32_t>> local(m);  // (copy, local id)
    for (int i = 0; i < m; ++i) local[i] = {around[i], i};
    std::sort(local.begin(), local.end());
    auto set = [&](int i, int j) {
      bits[static_cast<size_t>(i) * words + j / 64] |= uint64_t{1} << (j % 64);
    };
    for (int i = 0; i < m; ++i) {
      const absl::Span<const int32_t> row = conflicts.Row(around[i]);
      if (row.size() > 8 * local.size()) {
        for (const auto& [u, j] : local) {
          if (std::binary_search(row.begin(), row.end(), u)) set(i, j);
        }
        work += static_cast<int64_t>(local.size()) *
                (65 - __builtin_clzll(row.size()));
        continue;
      }
      auto at = local.begin();
      for (const int32_t u : row) {
        while (at != local.end() && at->first < u) ++at;
        if (at == local.end()) break;
        if (at->first == u) set(i, at->second);
      }
      work += static_cast<int64_t>(row.size());
    }
  }
  auto adjacent = [&](int i, int j) {
    return (bits[static_cast<size_t>(i) * words + j / 64] >> (j % 64)) & 1;
  };
  std::vector<int32_t> current, best;
  int64_t best_bytes = 0;
  // Expands the clique `current` (of `bytes`) by `candidates` (local ids,
  // each adjacent to every member).
  std::function<void(int64_t, std::vector<int32_t>)> expand =
      [&](int64_t bytes, std::vector<int32_t> candidates) {
        if (work > max_work) return;
        work += static_cast<int64_t>(candidates.size());
        std::sort(candidates.begin(), candidates.end());  // heaviest first
        // Greedy coloring, heaviest first: a clique takes at most one copy
        // of a class, so the classes' heaviest bound what the candidates
        // up to each one add.
        std::vector<std::vector<int32_t>> color;
        for (const int32_t i : candidates) {
          if (work > max_work) return;
          size_t c = 0;
          for (; c < color.size(); ++c) {
            bool free = true;
            for (const int32_t j : color[c]) {
              ++work;
              if (adjacent(i, j)) {
                free = false;
                break;
              }
            }
            if (free) break;
          }
          if (c == color.size()) color.emplace_back();
          color[c].push_back(i);
        }
        std::vector<int32_t> order;
        std::vector<int64_t> bound;
        int64_t sum = 0;
        for (const std::vector<int32_t>& cls : color) {
          sum += sizes[around[cls.front()]];  // the heaviest of the class
          for (const int32_t i : cls) {
            order.push_back(i);
            bound.push_back(sum);
          }
        }
        for (int p = static_cast<int>(order.size()) - 1; p >= 0; --p) {
          if (bytes + bound[p] <= best_bytes || work > max_work) return;
          const int32_t i = order[p];
          const int64_t with = bytes + sizes[around[i]];
          current.push_back(around[i]);
          if (with > best_bytes) {
            best_bytes = with;
            best = current;
          }
          std::vector<int32_t> next;
          work += p;
          for (int q = 0; q < p; ++q) {
            if (adjacent(i, order[q])) next.push_back(order[q]);
          }
          if (!next.empty()) expand(with, std::move(next));
          current.pop_back();
        }
      };
  std::vector<int32_t> all(m);
  for (int i = 0; i < m; ++i) all[i] = i;
  // A first clique greedily, heaviest first, then the search for better.
  current.push_back(v);
  best = current;
  best_bytes = sizes[v];
  std::vector<int32_t> greedy;
  for (int i = 0; i < m; ++i) {
    bool fits = true;
    for (const int32_t j : greedy) {
      if (!adjacent(i, j)) {
        fits = false;
        break;
      }
    }
    work += static_cast<int64_t>(greedy.size());
    if (!fits) continue;
    greedy.push_back(i);
    best.push_back(around[i]);
    best_bytes += sizes[around[i]];
  }
  expand(sizes[v], std::move(all));
  if (work_left != nullptr) *work_left -= work;
  return best;
}

namespace {

// The conflict graph of `members` (copies, Lifetimes numbering) by a test
// of every pair; rows by index in `members`, ascending.
Csr PairwiseConflicts(const Lifetimes& lifetimes,
                      absl::Span<const int32_t> members) {
  const size_t m = members.size();
  std::vector<std::vector<int32_t>> adjacent(m);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = i + 1; j < m; ++j) {
      if (lifetimes.MayBeLiveTogether(members[i], members[j])) {
        adjacent[i].push_back(static_cast<int32_t>(j));
        adjacent[j].push_back(static_cast<int32_t>(i));
      }
    }
  }
  Csr conflicts;
  for (const std::vector<int32_t>& row : adjacent) conflicts.AppendRow(row);
  return conflicts;
}

}  // namespace

int64_t LocalCliqueBound(const Lifetimes& lifetimes,
                         absl::Span<const int32_t> copies,
                         absl::Span<const int64_t> sizes, int32_t at,
                         int max_candidates, int64_t max_work) {
  // (distance from `at` in issue order, -size, local index)
  std::vector<std::tuple<int32_t, int64_t, int32_t>> near;
  near.reserve(copies.size());
  for (size_t k = 0; k < copies.size(); ++k) {
    const BufferCopy& copy = lifetimes.copy(copies[k]);
    const int32_t distance = std::max({0, copy.first - at, at - copy.last});
    near.emplace_back(distance, -sizes[k], static_cast<int32_t>(k));
  }
  const size_t m = std::min<size_t>(near.size(), std::max(max_candidates, 1));
  std::nth_element(near.begin(), near.begin() + m - 1, near.end());
  near.resize(m);
  std::sort(near.begin(), near.end());
  std::vector<int64_t> local_sizes(m);
  std::vector<int32_t> live;  // candidates live at `at`
  for (size_t i = 0; i < m; ++i) {
    local_sizes[i] = sizes[std::get<2>(near[i])];
    if (std::get<0>(near[i]) == 0) live.push_back(static_cast<int32_t>(i));
  }
  if (live.empty()) return 0;
  std::vector<int32_t> members(m);
  for (size_t i = 0; i < m; ++i) members[i] = copies[std::get<2>(near[i])];
  const Csr conflicts = PairwiseConflicts(lifetimes, members);
  auto bytes = [&](const std::vector<int32_t>& clique) {
    int64_t total = 0;
    for (const int32_t i : clique) total += local_sizes[i];
    return total;
  };
  const int32_t heaviest = live.front();
  return std::max(
      bytes(GrowClique(conflicts, local_sizes, std::move(live),
                       /*max_rounds=*/8)),
      bytes(HeaviestCliqueAround(conflicts, local_sizes, heaviest, max_work)));
}

int64_t NeighborhoodCliqueBound(const Lifetimes& lifetimes,
                                absl::Span<const int32_t> copies,
                                absl::Span<const int64_t> sizes, int32_t seed,
                                int max_neighbors, int64_t max_work) {
  if (sizes[seed] <= 0) return 0;
  const int32_t a = copies[seed];
  // (-size, local index) of the seed's neighbors.
  std::vector<std::pair<int64_t, int32_t>> around;
  for (size_t k = 0; k < copies.size(); ++k) {
    if (static_cast<int32_t>(k) == seed || sizes[k] <= 0) continue;
    if (lifetimes.MayBeLiveTogether(a, copies[k])) {
      around.emplace_back(-sizes[k], static_cast<int32_t>(k));
    }
  }
  const size_t kept =
      std::min<size_t>(around.size(), static_cast<size_t>(max_neighbors));
  std::partial_sort(around.begin(), around.begin() + kept, around.end());
  around.resize(kept);
  // Local ids: 0 the seed, then its neighbors heaviest first.
  const size_t m = kept + 1;
  std::vector<int32_t> members(m);
  std::vector<int64_t> local_sizes(m);
  members[0] = a;
  local_sizes[0] = sizes[seed];
  for (size_t i = 0; i < kept; ++i) {
    members[i + 1] = copies[around[i].second];
    local_sizes[i + 1] = sizes[around[i].second];
  }
  const Csr conflicts = PairwiseConflicts(lifetimes, members);
  int64_t bytes = 0;
  for (const int32_t i :
       HeaviestCliqueAround(conflicts, local_sizes, 0, max_work)) {
    bytes += local_sizes[i];
  }
  return bytes;
}

}  // namespace weft::scheduler::memory
