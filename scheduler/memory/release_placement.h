// Offsets for one device's buffer copies without a conflict graph, for
// devices whose graph would be too large (arena_planner.h): a heap
// simulation in issue order whose free blocks remember the copy that last
// held them. A copy takes the best-fitting block (the longest free first
// among blocks of one size; tries shared out, 64 per copy) whose last
// holder happens before it (every earlier holder happens before that one),
// or grows the free block at the top if that one is known free, or goes on
// top. Adjacent free blocks merge when one holder happens before the
// other, and once every later node is known to wait for a block's holder
// (the frontier of the streams' clocks, checked every few positions) the
// block is free for all and merges with its free neighbours, so the arena
// does not break into pieces too small to reuse. O(copies log copies)
// plus the clock checks.
//
// Thread-safe (stateless).
#ifndef WEFT_SCHEDULER_MEMORY_RELEASE_PLACEMENT_H_
#define WEFT_SCHEDULER_MEMORY_RELEASE_PLACEMENT_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/memory/lifetimes.h"

namespace weft::scheduler::memory {

// The copies of one device (Lifetimes numbering, by first use) with their
// aligned sizes: fills `offsets` (by local index) and returns the arena
// size.
int64_t PlaceByRelease(const Lifetimes& lifetimes,
                       absl::Span<const int32_t> copies,
                       absl::Span<const int64_t> sizes,
                       std::vector<int64_t>* offsets);

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_RELEASE_PLACEMENT_H_
