// The conflict graph of one device's buffer copies: which pairs may be live
// together (lifetimes.h: neither has every use happen before every use of
// the other), so must not share addresses.
//
// Built in one sweep over issue order: a copy conflicts with the copies
// whose issue intervals overlap its own (the executor may run them in issue
// order) and with earlier ones that the streams of its first uses do not
// yet know have finished. The latter are found from the retired copies
// (issue interval closed) kept by the stream of each of their last uses,
// in order along it: a first use knows a prefix of each such list by its
// clock, and conflicts with exactly the suffix past it. So the sweep costs
// O(first uses * streams + conflicts), and rows need no full sort (each is
// its earlier conflicts sorted, then the later ones as met).
//
// Thread-safe (stateless).
#ifndef WEFT_SCHEDULER_MEMORY_CONFLICT_GRAPH_H_
#define WEFT_SCHEDULER_MEMORY_CONFLICT_GRAPH_H_

#include <cstdint>
#include <vector>

#include "scheduler/csr.h"
#include "scheduler/memory/lifetimes.h"

namespace weft::scheduler::memory {

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

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_CONFLICT_GRAPH_H_
