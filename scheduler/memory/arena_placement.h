// Offsets for one device's buffer copies against their conflict graph
// (conflict_graph.h), by one placement rule applied in a given order: each
// copy at the smallest gap between the placed copies it conflicts with that
// fits it, else above them all (TFLite's greedy by size, XLA's best-fit
// heap). Which order is tried is arena_planner.h's choice. Then a local
// search that lowers the top of an assignment by evicting and re-placing
// copies (LowerTop).
//
// Thread-safe (stateless).
#ifndef WEFT_SCHEDULER_MEMORY_ARENA_PLACEMENT_H_
#define WEFT_SCHEDULER_MEMORY_ARENA_PLACEMENT_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/csr.h"

namespace weft::scheduler::memory {

// Places `sizes` (aligned) in `order` against the conflict graph: each at
// the smallest gap among its placed conflicting copies that fits it.
// Returns the arena size; fills `offsets` (by local index).
int64_t PlaceInOrder(const Csr& conflicts, absl::Span<const int64_t> sizes,
                     absl::Span<const int32_t> order,
                     std::vector<int64_t>* offsets);

// As PlaceInOrder, or with `first_fit` each copy at the lowest gap that fits
// it (placing copies by ascending offset of an assignment that way moves
// none of them up). With a `height`, a copy goes at offset 0 or at the top
// of [0, height) first, where it conflicts with nothing placed there
// (chains whose long-lived tensors alternate ends, as in inverted residual
// blocks, need that). Each copy costs its degree times log of it, or on
// a dense graph the number of copies placed before it.
int64_t Place(const Csr& conflicts, absl::Span<const int64_t> sizes,
              absl::Span<const int32_t> order, bool first_fit,
              std::vector<int64_t>* offsets, int64_t height = 0);

// Re-placements of the assignment `best_offsets` (of arena `arena`): copies
// by descending end (the highest first, best fit), then by ascending offset
// (first fit, which moves no copy up), for at most `rounds` rounds while
// the arena shrinks and stays above `lower_bound`. Returns the arena;
// `best_offsets` holds the best assignment.
int64_t Improve(const Csr& conflicts, absl::Span<const int64_t> sizes,
                int64_t lower_bound, int rounds, int64_t arena,
                std::vector<int64_t>* best_offsets);

// One step down for the assignment `offsets` (by local index) of arena
// `arena`: moves every copy that reaches the top below it, each into the
// smallest gap under the top that fits it, or else into the window there
// whose conflicting copies cost least to evict (few, of few conflicts,
// seldom evicted before), which are then placed again the same way, the
// largest first (an ejection chain, with recently placed copies kept in
// place). Returns the lower arena with `offsets` its assignment, or
// `arena` with `offsets` unchanged once `*work_left` runs out first (each
// placement costs its placed neighbors). Deterministic.
int64_t LowerTop(const Csr& conflicts, absl::Span<const int64_t> sizes,
                 int64_t arena, int64_t* work_left,
                 std::vector<int64_t>* offsets);

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_ARENA_PLACEMENT_H_
