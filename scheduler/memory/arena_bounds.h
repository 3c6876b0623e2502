// Lower bounds on the arena of one device's buffer copies: sets of copies
// that may be live together pairwise need disjoint bytes, so no offset
// assignment is smaller than the heaviest such set.
//
//   - ExecutionPeak: the copies live at the peak of one execution the plan
//     allows (Lifetimes' timed executions);
//   - GrowClique: a clique of the conflict graph grown by local search from
//     a seed (the copies live at a peak);
//   - HeaviestCliqueAround: the heaviest clique containing one copy (the
//     top of an arena: what is stacked there), by branch and bound;
//   - AntichainBound: the heaviest antichain of copies under happens-before
//     by a maximum flow (Dilworth), the dearest. Copies used on several
//     streams can make it lighter than a clique.
//
// Thread-safe (stateless).
#ifndef WEFT_SCHEDULER_MEMORY_ARENA_BOUNDS_H_
#define WEFT_SCHEDULER_MEMORY_ARENA_BOUNDS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/csr.h"
#include "scheduler/memory/lifetimes.h"

namespace weft::scheduler::memory {

// The most bytes live at once in execution `e` of `lifetimes` among
// `copies` (one device's, with aligned `sizes`): a copy is live from the
// start of its first use (not counting an upload, which starts no later)
// to the end of its last, an output forever. Copies live at one instant
// conflict pairwise, so no arena is smaller. Fills `live_at_peak` with those
// live at the peak (local indices). O(copies log copies + uses), and
// O(copies + uses) where the execution starts and ends copies nearly in
// order of first use.
int64_t ExecutionPeak(const Lifetimes& lifetimes,
                      absl::Span<const int32_t> copies,
                      absl::Span<const int64_t> sizes, int e,
                      std::vector<int32_t>* live_at_peak);

// A clique of `conflicts` (each copy conflicts with every other) at least
// as heavy by `sizes` as `clique`, which must be one: adds copies that
// conflict with every member, heaviest first, and otherwise swaps one
// member for the copies that conflict with all the others where that gains
// bytes, for at most `max_rounds` rounds. Each round costs the members'
// degrees plus a clique check per copy adjacent to all members but one.
std::vector<int32_t> GrowClique(const Csr& conflicts,
                                absl::Span<const int64_t> sizes,
                                std::vector<int32_t> clique, int max_rounds);

// A clique of `conflicts` containing `v`, the heaviest by `sizes` unless
// the search stops first: a greedy one (v's neighbors heaviest first, each
// that conflicts with all taken), then branch and bound over v's neighbors
// with greedy coloring bounds (a clique takes at most one copy of a color
// class, so the heaviest of each class bounds it). Weighs only v's
// heaviest sqrt(max_work) neighbors (at least 64), whose adjacency it
// tests against one another up front (by merging rows, or by looking each
// one up in a much longer row). Stops after `max_work` adjacency tests,
// row entries and candidate visits with the heaviest found; subtracts the
// work done from `*work_left` where given.
std::vector<int32_t> HeaviestCliqueAround(const Csr& conflicts,
                                          absl::Span<const int64_t> sizes,
                                          int32_t v, int64_t max_work,
                                          int64_t* work_left = nullptr);

// The bytes of a clique among `copies` (one device's, by first use, with
// aligned `sizes`) found without their conflict graph: the
// `max_candidates` copies whose issue intervals lie nearest position `at`
// (those live there first, heaviest first among equals), their conflicts
// tested pairwise (Lifetimes::MayBeLiveTogether), then a clique grown from
// those live at `at` (GrowClique) and the heaviest around the heaviest of
// them (HeaviestCliqueAround, up to `max_work`). O(copies +
// max_candidates^2) plus the searches.
int64_t LocalCliqueBound(const Lifetimes& lifetimes,
                         absl::Span<const int32_t> copies,
                         absl::Span<const int64_t> sizes, int32_t at,
                         int max_candidates, int64_t max_work);

// The bytes of a clique among `copies` (one device's, with aligned
// `sizes`) around copy `seed` (a local index), found without their
// conflict graph: every copy that may be live together with the seed
// (Lifetimes::MayBeLiveTogether, one test per copy), the heaviest
// `max_neighbors` of them kept, their conflicts tested pairwise, then the
// heaviest clique containing the seed (HeaviestCliqueAround, up to
// `max_work`). The exact neighbourhood where LocalCliqueBound takes the
// copies nearest in issue order: a copy's conflicts reach as far as the
// plan leaves its streams unordered. O(copies + max_neighbors^2) plus the
// search.
int64_t NeighborhoodCliqueBound(const Lifetimes& lifetimes,
                                absl::Span<const int32_t> copies,
                                absl::Span<const int64_t> sizes, int32_t seed,
                                int max_neighbors, int64_t max_work);

// The heaviest set of `copies` (one device's, with aligned `sizes`) no two
// of which one happens before the other, by Dilworth's theorem: the total
// less a maximum flow from the copies' last uses to their first uses
// through the plan's happens-before (a flow of a copy's size from its end
// and into its start, chains through the plan's nodes unbounded). Copies
// used on several streams enter at their first use and leave from their
// last, which may order pairs the plan does not: the set is then lighter,
// still a bound. Copies that may be live together pairwise need disjoint
// bytes, so no arena is smaller. Dinic's algorithm on 2 nodes per issue
// position.
int64_t AntichainBound(const Lifetimes& lifetimes,
                       absl::Span<const int32_t> copies,
                       absl::Span<const int64_t> sizes);

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_ARENA_BOUNDS_H_
