// Placement without a conflict graph: a heap simulation in issue order
// whose free blocks are taken once their last holder happens before the
// copy (release_placement.h).
#include "scheduler/memory/release_placement.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace weft::scheduler::memory {

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

}  // namespace weft::scheduler::memory
