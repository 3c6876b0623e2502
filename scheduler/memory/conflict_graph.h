// The conflict graph of one device's buffer copies: which pairs may be live
// together (lifetimes.h: neither has every use happen before every use of
// the other), so must not share addresses.
//
// Built in one sweep over issue order: a copy conflicts with the copies
// whose issue intervals overlap its own (the executor may run them in issue
// order) and with earlier ones that the streams of its first uses do not
// yet know have finished. The latter are kept per stream in lists that
// forget a copy once the stream's last issued node knows it finished
// (stream knowledge only grows), so the sweep costs
// O(copies * streams + conflicts) plus clock checks.
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
