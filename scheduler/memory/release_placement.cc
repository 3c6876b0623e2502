// Placement without a conflict graph: a heap simulation in issue order
// whose free blocks are taken once their last holder happens before the
// copy (release_placement.h).
#include "scheduler/memory/release_placement.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace weft::scheduler::memory {
namespace {

// What every node from an issue position on is known to wait for: per
// stream, the least clock entry among the next node of each stream that
// still has one (clocks only grow along a stream, and every later node on
// a stream comes after that next one). A copy whose last uses are all
// within it is free for every copy placed from there on.
class Frontier {
 public:
  explicit Frontier(const HappensBefore& hb)
      : hb_(hb), min_known_(hb.num_streams(), 0) {
    next_.resize(hb.num_streams());
    for (int32_t p = 0; p < hb.num_positions(); ++p) {
      next_[hb.point(p).stream].push_back(p);
    }
    cursor_.assign(hb.num_streams(), 0);
  }

  // Moves to issue position `position` (never backwards).
  void AdvanceTo(int32_t position) {
    std::fill(min_known_.begin(), min_known_.end(),
              std::numeric_limits<int32_t>::max());
    for (size_t s = 0; s < next_.size(); ++s) {
      size_t& c = cursor_[s];
      while (c < next_[s].size() && next_[s][c] < position) ++c;
      if (c == next_[s].size()) continue;
      const int32_t q = next_[s][c];
      for (int t = 0; t < static_cast<int>(min_known_.size()); ++t) {
        min_known_[t] = std::min(min_known_[t], hb_.Known(q, t));
      }
    }
  }

  // Whether every node from the current position on knows all `points`
  // have finished.
  bool KnownToAll(absl::Span<const Point> points) const {
    for (const Point& p : points) {
      if (min_known_[p.stream] < p.seq) return false;
    }
    return true;
  }

 private:
  const HappensBefore& hb_;
  std::vector<std::vector<int32_t>> next_;  // positions, by stream
  std::vector<size_t> cursor_;
  std::vector<int32_t> min_known_;
};

// The free blocks of one arena, each with the copy that last held its
// bytes (kFree once every later node knows it finished): a copy may take a
// block once its holder happens before it (those that held it earlier
// happen before that one). Adjacent blocks merge only when they have one
// holder (pieces of one block, or none): merging blocks of different
// holders keeps a large block from copies that know only some of them
// finished (and, with the later of two ordered holders kept, a block that
// keeps absorbing fresh frees is never known free), while never merging
// leaves pieces too small to reuse; blocks freed for all merge freely.
class FreeBlocks {
 public:
  static constexpr int32_t kFree = -1;
  struct Block {
    int64_t size = 0;
    int32_t holder = kFree;
    int32_t freed = std::numeric_limits<int32_t>::min();  // holder's last use
  };

  // `before(a, b)`: whether copy `a` happens before copy `b`.
  explicit FreeBlocks(std::function<bool(int32_t, int32_t)> before)
      : before_(std::move(before)) {}

  bool KnownFree(const Block& block, int32_t k) const {
    return block.holder == kFree || before_(block.holder, k);
  }

  // Frees [offset, offset + block.size), merging with its neighbours.
  void Free(int64_t offset, Block block) {
    auto next = blocks_.lower_bound(offset);
    if (next != blocks_.end() && next->first == offset + block.size &&
        next->second.holder == block.holder) {
      block.size += next->second.size;
      next = Erase(next);
    }
    if (next != blocks_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.size == offset &&
          prev->second.holder == block.holder) {
        offset = prev->first;
        block.size += prev->second.size;
        block.freed = prev->second.freed;
        Erase(prev);
      }
    }
    Insert(offset, block);
  }

  // The best-fitting block of at least `size` bytes known free for copy
  // `k` (among blocks of one size, the longest free first), trying at most
  // `*tries` blocks (less the blocks it tries); -1 when none.
  int64_t BestFit(int64_t size, int32_t k, int64_t* tries) const {
    auto fit = by_size_.lower_bound({size, std::numeric_limits<int32_t>::min(),
                                     std::numeric_limits<int64_t>::min()});
    for (; fit != by_size_.end() && *tries > 0; ++fit) {
      --*tries;
      if (KnownFree(blocks_.at(std::get<2>(*fit)), k)) return std::get<2>(*fit);
    }
    return -1;
  }

  // Among runs of adjacent blocks each known free for `k`, visiting at most
  // `*work` blocks (less what it visits): the start of the smallest run of
  // at least `size` bytes, else of a run that ends at `top`, else `top`
  // (out of work: the block at the top if known free, else `top`).
  int64_t BestRun(int64_t size, int32_t k, int64_t top, int64_t* work) const {
    int64_t best_start = -1, best_bytes = 0, top_start = top;
    int64_t run_start = -1, run_bytes = 0;
    auto end_run = [&] {
      if (run_start < 0) return;
      if (run_bytes >= size && (best_start < 0 || run_bytes < best_bytes)) {
        best_start = run_start;
        best_bytes = run_bytes;
      }
      if (run_start + run_bytes == top) top_start = run_start;
      run_start = -1;
      run_bytes = 0;
    };
    if (*work < static_cast<int64_t>(blocks_.size())) {
      // Out of work: only the block at the top, which grows to fit.
      if (blocks_.empty()) return top;
      const auto& [offset, block] = *blocks_.rbegin();
      return offset + block.size == top && KnownFree(block, k) ? offset : top;
    }
    *work -= static_cast<int64_t>(blocks_.size());
    for (const auto& [offset, block] : blocks_) {
      if (run_start >= 0 && run_start + run_bytes != offset) end_run();
      if (!KnownFree(block, k)) {
        end_run();
        continue;
      }
      if (run_start < 0) run_start = offset;
      run_bytes += block.size;
    }
    end_run();
    return best_start >= 0 ? best_start : top_start;
  }

  // Takes [offset, offset + size) out of the free blocks that cover it
  // from `offset` (a block start, or the end of the blocks).
  void Take(int64_t offset, int64_t size) {
    for (auto it = blocks_.lower_bound(offset);
         it != blocks_.end() && it->first < offset + size;) {
      Block block = it->second;
      const int64_t end = it->first + block.size;
      it = Erase(it);
      if (end > offset + size) {
        block.size = end - (offset + size);
        Insert(offset + size, block);
        return;
      }
    }
  }

  // Visits up to `checks` blocks that have a holder, taking up where the
  // last call stopped, and frees for all those whose holder `released`
  // says every later node knows finished.
  void ReleaseHeld(int checks,
                   const std::function<bool(int32_t holder)>& released) {
    if (held_.empty()) return;
    checks = static_cast<int>(std::min<size_t>(checks, held_.size()));
    std::vector<int64_t> offsets;
    auto it = held_.lower_bound(resume_);
    for (int i = 0; i < checks; ++i, ++it) {
      if (it == held_.end()) it = held_.begin();
      if (released(blocks_.at(it->second).holder))
        offsets.push_back(it->second);
    }
    if (it == held_.end()) it = held_.begin();
    resume_ = *it;
    for (const int64_t offset : offsets) {
      const auto block = blocks_.find(offset);
      Block freed = block->second;
      Erase(block);
      freed.holder = kFree;
      freed.freed = std::numeric_limits<int32_t>::min();
      Free(offset, freed);
    }
  }

  bool has_held() const { return !held_.empty(); }

 private:
  static std::tuple<int64_t, int32_t, int64_t> SizeKey(int64_t offset,
                                                       const Block& block) {
    return {block.size, block.freed, offset};
  }
  std::map<int64_t, Block>::iterator Erase(
      std::map<int64_t, Block>::iterator it) {
    by_size_.erase(SizeKey(it->first, it->second));
    if (it->second.holder != kFree) held_.erase({it->second.freed, it->first});
    return blocks_.erase(it);
  }
  void Insert(int64_t offset, const Block& block) {
    blocks_[offset] = block;
    by_size_.insert(SizeKey(offset, block));
    if (block.holder != kFree) held_.insert({block.freed, offset});
  }

  std::function<bool(int32_t, int32_t)> before_;
  std::map<int64_t, Block> blocks_;  // by offset
  std::set<std::tuple<int64_t, int32_t, int64_t>> by_size_;
  // Blocks with a holder, by (freed, offset).
  std::set<std::pair<int32_t, int64_t>> held_;
  std::pair<int32_t, int64_t> resume_ = {std::numeric_limits<int32_t>::min(),
                                         std::numeric_limits<int64_t>::min()};
};

}  // namespace

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
  FreeBlocks free([&](int32_t a, int32_t b) {
    return lifetimes.Before(copies[a], copies[b]);
  });
  // Held blocks are checked against the frontier every `refresh`
  // positions, up to 4 * `refresh` of them at a time.
  const HappensBefore& hb = lifetimes.happens_before();
  Frontier frontier(hb);
  const int32_t refresh = std::max(16, hb.num_streams());
  int32_t refreshed = std::numeric_limits<int32_t>::min();
  // Blocks tried for a single fit: up to kTryWorkPerCopy per copy placed
  // so far, in all, and at most kMaxTries for one copy (the copies that
  // find no known-free block among the first few may take the tries the
  // others left). A copy that no single block fits looks for a run of
  // blocks, visiting up to kRunWorkPerCopy blocks per copy placed so far,
  // in all.
  constexpr int64_t kTryWorkPerCopy = 64;
  constexpr int64_t kMaxTries = 4096;
  constexpr int64_t kRunWorkPerCopy = 64;
  int64_t try_work = 0;
  int64_t run_work = 0;
  int64_t top = 0;
  size_t next_free = 0;
  for (int k = 0; k < n; ++k) {
    const int32_t p = lifetimes.copy(copies[k]).first;
    for (; next_free < by_last.size() &&
           lifetimes.copy(copies[by_last[next_free]]).last < p;
         ++next_free) {
      const int32_t a = by_last[next_free];
      free.Free((*offsets)[a], {sizes[a], a, lifetimes.copy(copies[a]).last});
    }
    if (p >= 0 && free.has_held() && p - refresh >= refreshed) {
      refreshed = p;
      frontier.AdvanceTo(p);
      free.ReleaseHeld(4 * refresh, [&](int32_t holder) {
        return frontier.KnownToAll(lifetimes.Ends(copies[holder]));
      });
    }
    run_work += kRunWorkPerCopy;
    try_work += kTryWorkPerCopy;
    const int64_t size = sizes[k];
    if (size == 0) continue;
    int64_t tries = std::min(try_work, kMaxTries);
    try_work -= tries;
    int64_t offset = free.BestFit(size, k, &tries);
    try_work += tries;  // the tries it left
    if (offset < 0) offset = free.BestRun(size, k, top, &run_work);
    free.Take(offset, size);
    (*offsets)[k] = offset;
    top = std::max(top, offset + size);
  }
  return top;
}

}  // namespace weft::scheduler::memory
