#include "scheduler/slack_placement.h"

#include <algorithm>
#include <limits>
#include <map>

namespace weft::scheduler {
namespace {

using memory::BufferCopy;
using memory::Lifetimes;

constexpr int64_t kAlignment = 256;
// A copy's range spans at most this many free pieces.
constexpr int kMaxPieces = 16;
// Free pieces next to each other are merged once there are more than this
// many pieces per copy placed and not yet freed (plus the constant).
constexpr size_t kPiecesPerLive = 4;
constexpr size_t kPiecesSlack = 256;
// Past this many pieces looked at per copy (plus the constant), by every
// search in all, the placement gives up: its cost stays linear in the
// copies.
constexpr int64_t kVisitsPerCopy = 256;
constexpr int64_t kVisitsSlack = 1 << 20;

int64_t Aligned(uint64_t bytes) {
  return static_cast<int64_t>((bytes + kAlignment - 1) / kAlignment *
                              kAlignment);
}

// A device's address space [0, budget) as pieces, each free or held by one
// copy.
class Pieces {
 public:
  // `max_visits`: pieces looked at in all, by every Take.
  Pieces(int64_t budget, int64_t max_visits) : visits_left_(max_visits) {
    pieces_.emplace(0, Piece{budget, -1, kNeverUsed});
  }

  // Frees the piece at `offset`; its memory was last used at `position`.
  void Free(int64_t offset, int32_t position) {
    Piece& p = pieces_.at(offset);
    p.holder = -1;
    p.freed_at = position;
    --held_;
  }

  // Places `size` bytes (aligned) for copy `c` where the memory was freed
  // longest ago (ties: the lowest address); returns the offset, or -1 if
  // no range of free pieces holds it or the visits ran out.
  int64_t Take(int c, int64_t size) {
    if (pieces_.size() > kPiecesPerLive * held_ + kPiecesSlack) Coalesce();
    visits_left_ -= static_cast<int64_t>(pieces_.size());
    if (visits_left_ < 0) return -1;
    int64_t best_offset = -1;
    int32_t best_key = std::numeric_limits<int32_t>::max();
    for (auto it = pieces_.begin(); it != pieces_.end(); ++it) {
      if (it->second.holder >= 0) continue;
      int64_t covered = 0;
      int32_t key = std::numeric_limits<int32_t>::min();
      int pieces = 0;
      for (auto j = it; j != pieces_.end() && j->second.holder < 0 &&
                        pieces < kMaxPieces && covered < size;
           ++j, ++pieces) {
        covered = j->second.end - it->first;
        key = std::max(key, j->second.freed_at);
      }
      if (covered >= size && key < best_key) {
        best_key = key;
        best_offset = it->first;
      }
    }
    if (best_offset < 0) return -1;
    // Join the pieces the range spans; what is left of the last stays free.
    auto it = pieces_.find(best_offset);
    const int64_t end = best_offset + size;
    int32_t last_freed = it->second.freed_at;
    while (it->second.end < end) {
      auto next = std::next(it);
      last_freed = next->second.freed_at;
      it->second.end = next->second.end;
      pieces_.erase(next);
    }
    if (it->second.end > end) {
      pieces_.emplace(end, Piece{it->second.end, -1, last_freed});
      it->second.end = end;
    }
    it->second.holder = c;
    ++held_;
    return best_offset;
  }

 private:
  static constexpr int32_t kNeverUsed = std::numeric_limits<int32_t>::min();
  struct Piece {
    int64_t end;
    int holder;        // copy, -1 if free
    int32_t freed_at;  // last use of what held it (kNeverUsed: nothing)
  };

  // Merges every run of free pieces into one, freed when its latest was.
  void Coalesce() {
    for (auto it = pieces_.begin(); it != pieces_.end(); ++it) {
      if (it->second.holder >= 0) continue;
      auto next = std::next(it);
      while (next != pieces_.end() && next->second.holder < 0) {
        it->second.end = next->second.end;
        it->second.freed_at =
            std::max(it->second.freed_at, next->second.freed_at);
        next = pieces_.erase(next);
      }
    }
  }

  std::map<int64_t, Piece> pieces_;
  size_t held_ = 0;
  int64_t visits_left_;
};

}  // namespace

std::optional<Plan> SlackPlacement(const Plan& plan, const Lifetimes& lt,
                                   const std::vector<int64_t>& budgets) {
  if (plan.buffers.size() != static_cast<size_t>(lt.num_copies())) {
    return std::nullopt;
  }
  Plan out = plan;
  for (int d = 0; d < static_cast<int>(budgets.size()); ++d) {
    if (budgets[d] <= 0) continue;
    std::vector<int> copies;
    for (int c = 0; c < lt.num_copies(); ++c) {
      if (lt.copy(c).device == d && lt.copy(c).size_bytes > 0) {
        copies.push_back(c);
      }
    }
    if (copies.empty()) continue;
    std::vector<int> by_last = copies;
    std::stable_sort(copies.begin(), copies.end(), [&](int a, int b) {
      return lt.copy(a).first < lt.copy(b).first;
    });
    std::stable_sort(by_last.begin(), by_last.end(), [&](int a, int b) {
      return lt.copy(a).last < lt.copy(b).last;
    });
    Pieces pieces(
        budgets[d] / kAlignment * kAlignment,
        kVisitsPerCopy * static_cast<int64_t>(copies.size()) + kVisitsSlack);
    int64_t arena = 0;
    size_t freed = 0;
    for (const int b : copies) {
      const BufferCopy& copy = lt.copy(b);
      // Every copy whose uses all come before b's first is free for it.
      while (freed < by_last.size() &&
             lt.copy(by_last[freed]).last < copy.first) {
        const int a = by_last[freed++];
        pieces.Free(out.buffers[a].offset, lt.copy(a).last);
      }
      const int64_t size = Aligned(copy.size_bytes);
      const int64_t offset = pieces.Take(b, size);
      if (offset < 0) return std::nullopt;
      out.buffers[b].offset = offset;
      arena = std::max(arena, offset + size);
    }
    for (DeviceMemory& m : out.memory) {
      if (m.device == d) m.arena_bytes = arena;
    }
  }
  return out;
}

}  // namespace weft::scheduler
