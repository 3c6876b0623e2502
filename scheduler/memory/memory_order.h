// A memory-aware topological order (QNN HTP's pre-scheduler, XLA's list
// scheduler, Serenity's dynamic programming).
//
// Model: one memory; a buffer is live from the step of its first user to
// the step of its last, an output to the end, and host data from the start
// when the executor prefetches it (MemoryOrderOptions::prefetched_inputs).
// A step holds what is live before it plus what its node allocates; the
// peak is the largest step. The model ignores devices, streams and
// alignment: it ranks orders, and the arena planner (arena_planner.h) then
// places what a plan of the chosen order keeps live.
//
// MemoryAwareOrder starts from the best of three orders (XLA keeps the
// best of its schedulers too): a greedy list schedule that, among the
// ready nodes, takes the one whose step adds least to what is live (bytes
// allocated minus bytes freed; then fewer bytes allocated; then the
// submitted order; keys only fall while a node waits, so a lazy heap serves
// it in O((V + uses) log V)), a depth-first post-order from the sinks, and
// the submitted order. So it is never worse than the submitted order. Then,
// while the budget lasts, an exact dynamic programme over the downsets of a
// window of nodes around the peak step (the set of nodes run decides what is
// live, so the best order of a window depends on nothing else) replaces the
// window's order when it lowers that step; the state count of a window is
// bounded (a beam of the best states beyond it). OptimalOrder runs the same
// programme over a whole small graph.
//
// Thread-safe (stateless).
#ifndef WEFT_SCHEDULER_MEMORY_MEMORY_ORDER_H_
#define WEFT_SCHEDULER_MEMORY_MEMORY_ORDER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"

namespace weft::scheduler::memory {

struct MemoryOrderOptions {
  // Host data (BufferSpec::Init::kData) is live from the start.
  bool prefetched_inputs = true;
  // Nodes per dynamic-programming window (at most 32; 0: no windows).
  int window = 12;
  // States kept per window level; beyond it the best of them.
  int max_states = 512;
  // Windows tried.
  int max_windows = 32;
};

struct MemoryOrder {
  std::vector<NodeId> order;
  int64_t peak_bytes = 0;
};

// Peak live bytes of `order` (a topological order of all of `graph`'s
// nodes) in the model above.
int64_t PeakLiveBytes(const Graph& graph, absl::Span<const NodeId> order,
                      const MemoryOrderOptions& options = {});

// REQUIRES: `dag` is InferDependencies(graph).
MemoryOrder MemoryAwareOrder(const Graph& graph, const Dag& dag,
                             const MemoryOrderOptions& options = {});

// The order of least peak, by dynamic programming over every downset;
// nullopt when the graph has more than 32 nodes or a level more than
// `max_states` downsets.
std::optional<MemoryOrder> OptimalOrder(const Graph& graph, const Dag& dag,
                                        int max_states = 1 << 20,
                                        const MemoryOrderOptions& options = {});

// Reissues `dag` in MemoryAwareOrder(graph, *dag): its order, and the
// reachability index relabelled for it (interval labels kept).
void IssueInMemoryOrder(const Graph& graph, Dag* dag,
                        const MemoryOrderOptions& options = {});

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_MEMORY_ORDER_H_
