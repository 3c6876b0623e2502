// Arena offsets: one arena per device per job, every buffer copy on the
// device at an offset in it, address ranges shared only by copies that are
// never live together (lifetimes.h: every use of one happens before every
// use of the other).
//
// The copies of a device and which of them may be live together form a
// conflict graph, built in one sweep over issue order: a copy conflicts
// with the copies whose issue intervals overlap its own (the executor may
// run them in issue order) and with earlier ones that the streams of its
// first uses do not yet know have finished. The latter are kept per stream
// in lists that forget a copy once the stream's last issued node knows it
// finished (stream knowledge only grows), so the sweep costs
// O(copies * streams + conflicts) plus clock checks.
//
// Offsets come from one placement rule (each copy at the smallest gap
// between the placed copies it conflicts with that fits it, else above
// them all: TFLite's greedy by size, XLA's best-fit heap) applied in
// several orders: by size (largest first), by first use (a heap simulator
// in issue order, which respects happens-before), by conflict degree, by
// lifetime length, and by lifetime trying both ends of an arena of the
// lower bound first. The smallest arena wins (XLA's
// ChooseBestHeapAlgorithm).
//
// The lower bound is the heaviest clique of the conflict graph found
// cheaply: the copies live at the peak along issue order (one valid
// execution: copies live at one issue position conflict pairwise) and at
// the peaks of the executions Lifetimes times (copies whose uses overlap in
// time there conflict pairwise), each grown by local search (GrowClique),
// the heaviest antichain of copies by a maximum flow (AntichainBound) and
// the largest copy. arena / lower_bound says how far an arena is from it. Sizes
// are rounded up to the alignment first, so offsets are aligned and the bound
// is a bound for aligned copies.
//
// Thread-safe (stateless).
#ifndef WEFT_SCHEDULER_MEMORY_ARENA_PLANNER_H_
#define WEFT_SCHEDULER_MEMORY_ARENA_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/csr.h"
#include "scheduler/memory/lifetimes.h"

namespace weft::scheduler::memory {

enum class ArenaHeuristic {
  kBySize,
  kInOrder,
  kByConflicts,
  kByLifetime,
  // By lifetime, each copy at the bottom or the top of an arena of the
  // lower bound where it is free there, else as the others.
  kTwoEnded,
  // Without a conflict graph (see ArenaOptions::max_conflicts).
  kReleaseOrder,
};
inline constexpr ArenaHeuristic kAllArenaHeuristics[] = {
    ArenaHeuristic::kBySize, ArenaHeuristic::kInOrder,
    ArenaHeuristic::kByConflicts, ArenaHeuristic::kByLifetime,
    ArenaHeuristic::kTwoEnded};
const char* ArenaHeuristicName(ArenaHeuristic heuristic);

struct ArenaOptions {
  // Offsets and sizes are multiples of this (a power of two, at least 1).
  uint64_t alignment = 256;
  // The heuristics to try; empty: all.
  std::vector<ArenaHeuristic> heuristics;
  // Bytes each device may hold, by device (0 or missing: no budget). Only
  // reported for now: nothing is spilled to fit one.
  std::vector<int64_t> budget_bytes;
  // A device whose conflict graph would hold more pairs than this (0: 64
  // per copy plus 2^20) is placed without one (kReleaseOrder, see
  // PlaceByRelease).
  int64_t max_conflicts = 0;
  // Rounds of re-placing the best assignment (by descending end, then by
  // ascending offset) while its arena shrinks.
  int improve_rounds = 0;
  // Rounds of local search growing the lower bound's cliques (0: none).
  int clique_rounds = 8;
  // Also bound by AntichainBound on plans of at most this many nodes (its
  // maximum flow costs seconds at 100,000).
  int antichain_max_positions = 20000;
};

struct DeviceArena {
  int device = 0;
  int num_copies = 0;
  int64_t arena_bytes = 0;
  // Most bytes live at once along issue order.
  int64_t peak_live_bytes = 0;
  // No offset assignment fits in less: the largest of peak_live_bytes, the
  // peaks of the timed executions and the largest copy.
  int64_t lower_bound_bytes = 0;
  int64_t no_reuse_bytes = 0;   // the sum of the (aligned) copy sizes
  int64_t budget_bytes = 0;     // 0: none
  int64_t spilled_bytes = 0;    // what spilling moved out to fit the budget
  int32_t orderings_added = 0;  // edges added to make reuse safe
  int64_t conflicts = 0;        // pairs of copies that may be live together
  ArenaHeuristic heuristic = ArenaHeuristic::kBySize;  // the winner
};

struct ArenaPlan {
  std::vector<DeviceArena> devices;  // by device
  std::vector<int64_t> offsets;      // by copy (Lifetimes numbering)
  std::vector<int64_t> sizes;        // by copy, aligned
};

// The copies on one device (ids in Lifetimes numbering, ascending) and
// which may be live together: row k lists the local indices of copies
// that conflict with copies[k], ascending.
// `complete` is false when the sweep stopped at `max_conflicts` pairs
// (conflicts is then empty).
struct ConflictGraph {
  std::vector<int32_t> copies;
  Csr conflicts;
  bool complete = true;
};
ConflictGraph BuildConflictGraph(const Lifetimes& lifetimes, int device,
                                 int64_t max_conflicts = INT64_MAX);

// A heap simulation in issue order whose free blocks remember the copy
// that last held them: a copy takes the best-fitting block (the longest
// free first among blocks of one size, at most 32 tried) whose last holder
// happens before it (every earlier holder happens before that one), or
// grows the free block at the top if that one is known free, or goes on
// top. Adjacent free blocks merge only when one holder happens before the
// other. O(copies log copies) plus the clock checks.
//
// kReleaseOrder for the copies of one device (Lifetimes numbering, by first
// use) with their aligned sizes: fills `offsets` (by local index) and
// returns the arena size.
int64_t PlaceByRelease(const Lifetimes& lifetimes,
                       absl::Span<const int32_t> copies,
                       absl::Span<const int64_t> sizes,
                       std::vector<int64_t>* offsets);

// Offsets for every copy of `lifetimes`, per device the smallest arena of
// the heuristics tried.
ArenaPlan PlanArenas(const Lifetimes& lifetimes,
                     const ArenaOptions& options = {});

// Places `sizes` (aligned) in `order` against the conflict graph: each at
// the smallest gap among its placed conflicting copies that fits it.
// Returns the arena size; fills `offsets` (by local index).
int64_t PlaceInOrder(const Csr& conflicts, absl::Span<const int64_t> sizes,
                     absl::Span<const int32_t> order,
                     std::vector<int64_t>* offsets);

// A clique of `conflicts` (each copy conflicts with every other) at least
// as heavy by `sizes` as `clique`, which must be one: adds copies that
// conflict with every member, heaviest first, and otherwise swaps one
// member for the copies that conflict with all the others where that gains
// bytes, for at most `max_rounds` rounds. Each round costs the members'
// degrees plus a clique check per copy adjacent to all members but one.
std::vector<int32_t> GrowClique(const Csr& conflicts,
                                absl::Span<const int64_t> sizes,
                                std::vector<int32_t> clique, int max_rounds);

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

// As PlaceInOrder, or with `first_fit` each copy at the lowest gap that fits
// it (placing copies by ascending offset of an assignment that way moves
// none of them up). With a `height`, a copy goes at offset 0 or at the top
// of [0, height) first, where it conflicts with nothing placed there
// (chains whose long-lived tensors alternate ends, as in inverted residual
// blocks, need that).
int64_t Place(const Csr& conflicts, absl::Span<const int64_t> sizes,
              absl::Span<const int32_t> order, bool first_fit,
              std::vector<int64_t>* offsets, int64_t height = 0);

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_ARENA_PLANNER_H_
