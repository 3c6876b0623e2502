// The placement rule against a conflict graph: best fit (or first fit)
// among the placed conflicting copies, or either end of a given height
// (arena_placement.h).
#include "scheduler/memory/arena_placement.h"

#include <algorithm>
#include <limits>
#include <numeric>
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

int64_t Place(const Csr& conflicts, absl::Span<const int64_t> sizes,
              absl::Span<const int32_t> order, bool first_fit,
              std::vector<int64_t>* offsets, int64_t height) {
  const int n = static_cast<int>(sizes.size());
  offsets->assign(n, -1);
  int64_t arena = 0;
  std::vector<std::pair<int64_t, int64_t>> placed;  // (offset, end)
  // Sort keys: offset above the index into `placed`, where both fit (one
  // integer sorts about twice as fast as a pair).
  constexpr int kIndexBits = 22;
  constexpr int64_t kMaxKeyedOffset = int64_t{1} << (63 - kIndexBits);
  std::vector<uint64_t> keys;
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
    if (best_gap == 0) {
      (*offsets)[k] = best;
      arena = std::max(arena, best + sizes[k]);
      continue;
    }
    // Copies at one offset may come in any order: the scan below takes
    // the highest end among them before it looks for a gap.
    if (keyed && placed.size() < (size_t{1} << kIndexBits)) {
      keys.resize(placed.size());
      for (size_t i = 0; i < placed.size(); ++i) {
        keys[i] = static_cast<uint64_t>(placed[i].first) << kIndexBits | i;
      }
      std::sort(keys.begin(), keys.end());
      sorted.resize(placed.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        sorted[i] = placed[keys[i] & ((uint64_t{1} << kIndexBits) - 1)];
      }
      placed.swap(sorted);
    } else {
      std::sort(placed.begin(), placed.end());
    }
    int64_t top = 0;  // highest end so far
    for (const auto& [offset, end] : placed) {
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

}  // namespace weft::scheduler::memory
