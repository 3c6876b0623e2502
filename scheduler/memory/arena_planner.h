// Arena offsets: one arena per device per job, every buffer copy on the
// device at an offset in it, address ranges shared only by copies that are
// never live together (lifetimes.h: every use of one happens before every
// use of the other).
//
// Per device: the conflict graph of its copies (conflict_graph.h), a cheap
// lower bound (the largest copy, the peak of live bytes along issue order
// and at the peaks of the executions Lifetimes times), then one placement
// rule (arena_placement.h) applied in several orders: by size (largest
// first), by first use (a heap simulator in issue order, which respects
// happens-before), by conflict degree, by lifetime length, and by lifetime
// trying both ends of an arena of the lower bound first. The smallest arena
// wins (XLA's ChooseBestHeapAlgorithm). An arena equal to the lower bound
// stops the search: none is smaller. Only when no order reaches the cheap
// bound is the bound raised by the dearer ones (arena_bounds.h: cliques of
// the conflict graph grown from the peaks, the heaviest cliques around the
// copies at the top of each best arena, the heaviest antichain by a
// maximum flow), and both-ends placement retried under the raised bound.
// Then a local search lowers the best arena a step at a time (LowerTop in
// arena_placement.h), each new top searched for a clique that proves it,
// under a budget of work per copy, so results do not depend on timing.
// arena / lower_bound says how far an arena is from the bound. Sizes are
// rounded up to the alignment first, so offsets are aligned and the bound
// is a bound for aligned copies. A device whose conflict graph would be too
// large is placed without one (release_placement.h), its bound raised by
// cliques found from pairwise tests: among the copies nearest its peaks,
// and among those that may be live together with the copies ending
// highest. Where that arena is over the device's budget, a larger graph is
// built after all and the copies placed against it by size.
//
// Thread-safe (stateless).
#ifndef WEFT_SCHEDULER_MEMORY_ARENA_PLANNER_H_
#define WEFT_SCHEDULER_MEMORY_ARENA_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

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
  // Bytes each device may hold, by device (0 or missing: no budget):
  // reported, and a device placed without a conflict graph over it tries a
  // larger graph (below). Nothing is spilled here to fit one
  // (scheduler/spill_fitting.h does that).
  std::vector<int64_t> budget_bytes;
  // A device whose conflict graph would hold more pairs than this (0: 64
  // per copy plus 2^20) is placed without one (kReleaseOrder, see
  // PlaceByRelease). Where that arena is over the device's budget
  // (budget_bytes), or always with place_large_graphs, a graph of up to
  // max_large_conflicts pairs (0: 128 per copy plus 2^22; at most
  // max_conflicts: never) is built after all and the copies are placed
  // against it by size; the smaller arena is kept and lowered by LowerTop.
  // No other order and no re-placement rounds there: each costs a pass
  // over every pair.
  int64_t max_conflicts = 0;
  int64_t max_large_conflicts = 0;
  bool place_large_graphs = false;
  // Rounds of re-placing the best assignment (by descending end, then by
  // ascending offset) while its arena shrinks.
  int improve_rounds = 0;
  // Rounds of local search growing the lower bound's cliques (0: none).
  int clique_rounds = 8;
  // Also bound by AntichainBound on plans of at most this many nodes (its
  // maximum flow costs seconds at 100,000).
  int antichain_max_positions = 20000;
  // Copies at the top of each best arena whose heaviest clique
  // (HeaviestCliqueAround) raises the lower bound, the work one such search
  // may do, and per copy the work all of them may do together (at least
  // one search's; adjacency tests, 2^20 take about 10 ms).
  int top_clique_seeds = 4;
  int64_t top_clique_search_work = int64_t{1} << 20;
  int64_t top_clique_work_per_copy = 64;
  // Work LowerTop may do per copy to lower the best arena (placed
  // neighbors visited, times their logarithm where sorted or searched; 0:
  // no local search).
  int64_t lower_top_work_per_copy = 2048;
  // Without a conflict graph: cliques among this many copies nearest each
  // issue-order peak and the first use of each copy at the top of the
  // arena (LocalCliqueBound; 0: none), and the work each search around
  // one copy may do.
  int local_clique_candidates = 256;
  int64_t local_clique_search_work = int64_t{1} << 16;
  // Without a conflict graph: the heaviest clique around each of the
  // top_clique_seeds copies that end highest in the best arena, among the
  // heaviest this many of the copies that may be live together with it
  // (NeighborhoodCliqueBound; 0: none), up to top_clique_search_work each.
  int neighborhood_clique_neighbors = 256;
};

struct DeviceArena {
  int device = 0;
  int num_copies = 0;
  int64_t arena_bytes = 0;
  // Most bytes live at once along issue order.
  int64_t peak_live_bytes = 0;
  // No offset assignment fits in less: the largest of peak_live_bytes, the
  // peaks of the timed executions and the largest copy, raised by cliques
  // and the antichain (arena_bounds.h) only when no arena met it.
  int64_t lower_bound_bytes = 0;
  int64_t no_reuse_bytes = 0;   // the sum of the (aligned) copy sizes
  int64_t budget_bytes = 0;     // 0: none
  int64_t spilled_bytes = 0;    // what spilling moved out to fit the budget
  int32_t orderings_added = 0;  // edges added to make reuse safe
  int64_t conflicts = 0;        // pairs of copies that may be live together
  // The arena before the re-placement rounds (ArenaOptions::improve_rounds;
  // arena_bytes without them): what the same call with no rounds returns.
  int64_t unimproved_arena_bytes = 0;
  // The winner: the order whose placement LowerTop started from.
  ArenaHeuristic heuristic = ArenaHeuristic::kBySize;
};

struct ArenaPlan {
  std::vector<DeviceArena> devices;  // by device
  std::vector<int64_t> offsets;      // by copy (Lifetimes numbering)
  std::vector<int64_t> sizes;        // by copy, aligned
};

// Offsets for every copy of `lifetimes`, per device the smallest arena of
// the heuristics tried.
ArenaPlan PlanArenas(const Lifetimes& lifetimes,
                     const ArenaOptions& options = {});

// The re-placement rounds (options.improve_rounds) applied to `plan`, an
// ArenaPlan of `lifetimes` (devices with their arena_bytes and
// lower_bound_bytes, offsets by copy; the aligned sizes are filled here):
// what PlanArenas with those rounds gives where `plan` is PlanArenas' own
// without them, at the cost of the conflict graphs and the rounds alone.
// Devices placed without a conflict graph are left as they are, as
// PlanArenas leaves them. REQUIRES: plan->devices by device, offsets by
// copy.
void ImproveArenaPlan(const Lifetimes& lifetimes, const ArenaOptions& options,
                      ArenaPlan* plan);

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_ARENA_PLANNER_H_
