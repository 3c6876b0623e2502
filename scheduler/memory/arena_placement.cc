// The placement rule against a conflict graph: best fit (or first fit)
// among the placed conflicting copies, or either end of a given height;
// the local search that lowers the top of an assignment
// (arena_placement.h).
#include "scheduler/memory/arena_placement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <tuple>
#include <utility>
#include <vector>

namespace weft::scheduler::memory {

int64_t PlaceInOrder(const Csr& conflicts, absl::Span<const int64_t> sizes,
                     absl::Span<const int32_t> order,
                     std::vector<int64_t>* offsets) {
  return Place(conflicts, sizes, order, /*first_fit=*/false, offsets,
               /*height=*/0);
}

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

namespace {

// Where the copy of `size` bytes goes among `placed` (offset, end) pairs
// sorted by offset (copies at one offset in any order): the smallest gap
// that fits it (the lowest with `first_fit`), else the highest end.
int64_t BestGap(const std::vector<std::pair<int64_t, int64_t>>& placed,
                int64_t size, bool first_fit) {
  int64_t best = -1;
  int64_t best_gap = std::numeric_limits<int64_t>::max();
  int64_t top = 0;  // highest end so far
  for (const auto& [offset, end] : placed) {
    if (offset > top) {
      const int64_t gap = offset - top;
      if (gap >= size && gap < best_gap) {
        best = top;
        best_gap = gap;
        if (gap == size || first_fit) break;
      }
    }
    top = std::max(top, end);
  }
  return best >= 0 ? best : top;
}

// With a `height` that holds the copy of `size` bytes: offset 0 if no
// (offset, end) of `placed` reaches into [0, size), else the top of
// [0, height) if none reaches in there; -1 otherwise or without one.
int64_t EitherEnd(const std::vector<std::pair<int64_t, int64_t>>& placed,
                  int64_t size, int64_t height) {
  if (height < size || size <= 0) return -1;
  const int64_t high = height - size;
  bool low_free = true, high_free = true;
  for (const auto& [offset, end] : placed) {
    low_free = low_free && offset >= size;
    high_free = high_free && (end <= high || offset >= height);
  }
  return low_free ? 0 : high_free ? high : -1;
}

// Place for a dense conflict graph: every placed copy kept in offset
// order, and each copy's conflicting ones picked out by a mark as that
// order is walked, which costs less than sorting each copy's placed
// neighbors once they are a large share of all copies. Same result.
int64_t PlaceDense(const Csr& conflicts, absl::Span<const int64_t> sizes,
                   absl::Span<const int32_t> order, bool first_fit,
                   std::vector<int64_t>* offsets, int64_t height) {
  const int n = static_cast<int>(sizes.size());
  int64_t arena = 0;
  std::vector<int32_t> by_offset;  // placed copies of nonzero size
  by_offset.reserve(n);
  std::vector<int32_t> mark(n, -1);
  std::vector<std::pair<int64_t, int64_t>> placed;  // (offset, end)
  for (const int32_t k : order) {
    for (const int32_t a : conflicts.Row(k)) mark[a] = k;
    placed.clear();
    for (const int32_t a : by_offset) {
      if (mark[a] == k) {
        const int64_t offset = (*offsets)[a];
        placed.emplace_back(offset, offset + sizes[a]);
      }
    }
    int64_t offset = EitherEnd(placed, sizes[k], height);
    if (offset < 0) offset = BestGap(placed, sizes[k], first_fit);
    (*offsets)[k] = offset;
    arena = std::max(arena, offset + sizes[k]);
    if (sizes[k] > 0) {
      const auto at = std::upper_bound(
          by_offset.begin(), by_offset.end(), offset,
          [&](int64_t o, int32_t a) { return o < (*offsets)[a]; });
      by_offset.insert(at, k);
    }
  }
  return arena;
}

// Sorts `keys`, each an offset above kIndexBits bits of an index that
// rises along `keys`, by offset and then index: a stable radix sort of the
// offset bits that vary (8 at a time, none below the lowest bit set in
// any offset, which alignment leaves zero), for lists long enough to pay
// for the buckets. `scratch` is reused storage.
constexpr int kIndexBits = 22;
void SortKeys(std::vector<uint64_t>& keys, std::vector<uint64_t>& scratch) {
  constexpr size_t kRadixFrom = 96;
  if (keys.size() < kRadixFrom) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  uint64_t any = 0, most = 0;
  for (const uint64_t key : keys) {
    any |= key >> kIndexBits;
    most = std::max(most, key >> kIndexBits);
  }
  if (most == 0) return;  // one offset: index order
  const int low = kIndexBits + __builtin_ctzll(any);
  const int high = kIndexBits + 64 - __builtin_clzll(most);
  scratch.resize(keys.size());
  for (int shift = low; shift < high; shift += 8) {
    size_t count[257] = {0};
    for (const uint64_t key : keys) ++count[((key >> shift) & 255) + 1];
    for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
    for (const uint64_t key : keys)
      scratch[count[(key >> shift) & 255]++] = key;
    keys.swap(scratch);
  }
}

}  // namespace

int64_t Place(const Csr& conflicts, absl::Span<const int64_t> sizes,
              absl::Span<const int32_t> order, bool first_fit,
              std::vector<int64_t>* offsets, int64_t height) {
  const int n = static_cast<int>(sizes.size());
  offsets->assign(n, -1);
  // Dense: sorting each copy's placed neighbors (about pairs * log of the
  // mean degree) would cost more than walking all placed copies for each
  // (about n^2 / 2, and as much again to keep them in order).
  const int64_t pairs = static_cast<int64_t>(conflicts.items.size());
  if (n > 0 && pairs > 0) {
    const double mean_degree = static_cast<double>(pairs) / n;
    if (static_cast<double>(pairs) * std::log2(std::max(mean_degree, 2.0)) >
        static_cast<double>(n) * n) {
      return PlaceDense(conflicts, sizes, order, first_fit, offsets, height);
    }
  }
  int64_t arena = 0;
  std::vector<std::pair<int64_t, int64_t>> placed;  // (offset, end)
  // Sort keys: offset above the index into `placed`, where both fit (one
  // integer sorts about twice as fast as a pair).
  constexpr int64_t kMaxKeyedOffset = int64_t{1} << (63 - kIndexBits);
  std::vector<uint64_t> keys, key_scratch;
  std::vector<std::pair<int64_t, int64_t>> sorted;
  for (const int32_t k : order) {
    placed.clear();
    bool keyed = true;
    for (const int32_t a : conflicts.Row(k)) {
      const int64_t offset = (*offsets)[a];
      if (offset >= 0 && sizes[a] > 0) {
        placed.emplace_back(offset, offset + sizes[a]);
        keyed = keyed && offset < kMaxKeyedOffset;
      }
    }
    int64_t offset = EitherEnd(placed, sizes[k], height);
    if (offset < 0) {
      // Copies at one offset may come in any order (see BestGap).
      if (keyed && placed.size() < (size_t{1} << kIndexBits)) {
        keys.resize(placed.size());
        for (size_t i = 0; i < placed.size(); ++i) {
          keys[i] = static_cast<uint64_t>(placed[i].first) << kIndexBits | i;
        }
        SortKeys(keys, key_scratch);
        sorted.resize(placed.size());
        for (size_t i = 0; i < keys.size(); ++i) {
          sorted[i] = placed[keys[i] & ((uint64_t{1} << kIndexBits) - 1)];
        }
        placed.swap(sorted);
      } else {
        std::sort(placed.begin(), placed.end());
      }
      offset = BestGap(placed, sizes[k], first_fit);
    }
    (*offsets)[k] = offset;
    arena = std::max(arena, offset + sizes[k]);
  }
  return arena;
}

namespace {

// A copy's neighbor in the conflict graph, where placed.
struct Placed {
  int64_t offset;
  int64_t end;
  int32_t k;
};

// A fixed hash of two integers (splitmix64's finalizer): tie-breaks that
// vary between windows and steps, the same on every run.
uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull ^ b * 0xBF58476D1CE4E5B9ull;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 29);
}

}  // namespace

int64_t LowerTop(const Csr& conflicts, absl::Span<const int64_t> sizes,
                 int64_t arena, int64_t* work_left,
                 std::vector<int64_t>* offsets_inout) {
  const int n = static_cast<int>(sizes.size());
  const int64_t target = arena - 1;
  std::vector<int64_t> offsets = *offsets_inout;
  // What evicting a copy costs: 1, a copy of many conflicts more (it is
  // dear to place again), and 1 more each time it was evicted, so that
  // the search does not cycle.
  constexpr int kDegreeScale = 16;
  constexpr int kTenure = 7;  // steps a placed copy stays put
  std::vector<int64_t> weight(n);
  std::vector<int64_t> tabu_until(n, 0);
  // Copies to place, the largest first.
  using Entry = std::tuple<int64_t, uint64_t, int32_t>;  // (size, key, k)
  std::priority_queue<Entry> pool;
  for (int k = 0; k < n; ++k) {
    weight[k] =
        1 + static_cast<int64_t>(conflicts.Row(k).size()) / kDegreeScale;
    if (offsets[k] + sizes[k] <= target) continue;
    if (sizes[k] == 0) {
      offsets[k] = 0;  // shares no byte
    } else {
      offsets[k] = -1;
      pool.emplace(sizes[k], Mix(k, 0), k);
    }
  }
  *work_left -= n;
  std::vector<Placed> placed, sorted;
  std::vector<uint64_t> keys, key_scratch;
  std::vector<std::pair<int64_t, int32_t>> by_end;  // (end, index in placed)
  std::vector<int64_t> weight_below, tabu_below;    // by offset, prefix
  std::vector<int64_t> weight_ended, tabu_ended;    // by end, prefix
  int64_t step = 0;
  while (!pool.empty()) {
    if (*work_left <= 0) return arena;
    const int32_t v = std::get<2>(pool.top());
    pool.pop();
    if (offsets[v] >= 0) continue;
    ++step;
    const int64_t size = sizes[v];
    placed.clear();
    for (const int32_t u : conflicts.Row(v)) {
      if (offsets[u] >= 0 && sizes[u] > 0) {
        placed.push_back({offsets[u], offsets[u] + sizes[u], u});
      }
    }
    const int m = static_cast<int>(placed.size());
    // Sorting them, and below two searches for each of 2m windows.
    int log_m = 1;
    while ((1 << log_m) < m) ++log_m;
    *work_left -= 1 + int64_t{m} * log_m;
    // By offset, then copy (placed lists them ascending): as keys where
    // they fit.
    if (m < (1 << kIndexBits) &&
        std::all_of(placed.begin(), placed.end(), [](const Placed& p) {
          return p.offset < (int64_t{1} << (63 - kIndexBits));
        })) {
      keys.resize(m);
      for (int i = 0; i < m; ++i) {
        keys[i] = static_cast<uint64_t>(placed[i].offset) << kIndexBits | i;
      }
      SortKeys(keys, key_scratch);
      sorted.resize(m);
      for (int i = 0; i < m; ++i) {
        sorted[i] = placed[keys[i] & ((uint64_t{1} << kIndexBits) - 1)];
      }
      placed.swap(sorted);
    } else {
      std::sort(placed.begin(), placed.end(),
                [](const Placed& a, const Placed& b) {
                  return a.offset != b.offset ? a.offset < b.offset : a.k < b.k;
                });
    }
    // The smallest gap under the target that fits it.
    int64_t best = -1;
    int64_t best_gap = std::numeric_limits<int64_t>::max();
    int64_t top = 0;
    for (int i = 0; i <= m && top < target; ++i) {
      const int64_t next = i < m ? std::min(placed[i].offset, target) : target;
      if (next - top >= size && next - top < best_gap) {
        best = top;
        best_gap = next - top;
      }
      if (i < m) top = std::max(top, placed[i].end);
    }
    if (best < 0) {
      // None: the window [x, x + size) under the target whose overlapping
      // copies cost least to evict, preferring windows that evict no copy
      // placed in the last kTenure steps. Windows start at 0, at an end or
      // just below an offset; the copies overlapping one are those that
      // start below its end less those that end at or below its start.
      *work_left -= int64_t{4} * m * log_m;
      by_end.resize(m);
      weight_below.assign(m + 1, 0);
      tabu_below.assign(m + 1, 0);
      for (int i = 0; i < m; ++i) {
        const int32_t u = placed[i].k;
        by_end[i] = {placed[i].end, i};
        weight_below[i + 1] = weight_below[i] + weight[u];
        tabu_below[i + 1] = tabu_below[i] + (tabu_until[u] > step);
      }
      std::sort(by_end.begin(), by_end.end());
      weight_ended.assign(m + 1, 0);
      tabu_ended.assign(m + 1, 0);
      for (int i = 0; i < m; ++i) {
        const int32_t u = placed[by_end[i].second].k;
        weight_ended[i + 1] = weight_ended[i] + weight[u];
        tabu_ended[i + 1] = tabu_ended[i] + (tabu_until[u] > step);
      }
      std::tuple<bool, int64_t, uint64_t> best_cost;  // (tabu, cost, key)
      auto consider = [&](int64_t x) {
        if (x < 0 || x + size > target) return;
        const int below = static_cast<int>(
            std::lower_bound(
                placed.begin(), placed.end(), x + size,
                [](const Placed& p, int64_t at) { return p.offset < at; }) -
            placed.begin());
        const int ended =
            static_cast<int>(std::upper_bound(by_end.begin(), by_end.end(),
                                              std::make_pair(x, INT32_MAX)) -
                             by_end.begin());
        const std::tuple<bool, int64_t, uint64_t> cost = {
            tabu_below[below] > tabu_ended[ended],
            weight_below[below] - weight_ended[ended], Mix(x, step)};
        if (best < 0 || cost < best_cost) {
          best = x;
          best_cost = cost;
        }
      };
      consider(0);
      for (const Placed& p : placed) {
        consider(p.end);
        consider(p.offset - size);
      }
      if (best < 0) return arena;  // larger than the target
      for (const Placed& p : placed) {
        if (p.offset < best + size && p.end > best) {
          offsets[p.k] = -1;
          ++weight[p.k];
          pool.emplace(sizes[p.k], Mix(p.k, step), p.k);
        }
      }
    }
    offsets[v] = best;
    tabu_until[v] = step + kTenure;
  }
  int64_t lowered = 0;
  for (int k = 0; k < n; ++k) {
    lowered = std::max(lowered, offsets[k] + sizes[k]);
  }
  offsets_inout->swap(offsets);
  return lowered;
}

}  // namespace weft::scheduler::memory
