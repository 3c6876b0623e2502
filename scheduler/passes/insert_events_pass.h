// Event insertion: one event wait per cross-stream dependency that the
// waiting stream does not already know is satisfied.
//
// Each stream keeps a sparse vector clock: for every other stream, the last
// node (by sequence number on that stream) known to have finished. Walking
// the nodes in issue order, a dependency p -> v between different streams
// is a candidate wait unless v's stream already knows p finished. The
// candidates are taken latest-issued first and each is dropped when the
// waits already chosen for v cover it (through their own clocks, which is
// how knowledge passes through third streams). A wait adopts the waited
// node's clock. So no chosen wait is implied by the stream's history or by
// the node's other waits. Each waited-on node signals one event, shared by
// all its waiters; ids are allocated in order of first wait.
//
// A node with a peer stream (a copy between devices) joins its two
// streams: before it, its stream learns everything the peer stream knows
// (and every node before it there), so a dependency on either stream needs
// no event; its waits go on its own stream; after it, both streams know
// what it knew and that it finished. A node counts as done once either of
// its streams has passed it.
//
// Keeps every node's sequence number and clock version in the context for
// later passes. Cost: O(V + E) plus O(S) per node with waits for clocks of
// S entries (S at most the number of streams); snapshots live in one arena
// and are taken only when a stream's clock changes, and a stream's current
// clock is its latest snapshot (no per-stream copies). Dense snapshots
// hold 16-bit counters when no stream has more than
// ClockArena::kNarrowMax nodes (half the memory to fill), else 32-bit.
//
// Snapshots take at most max_clock_bytes (dense clocks): past that, the
// arena keeps a window of the latest snapshots (ClockArena), so a huge
// plan fills a few megabytes that stay in cache instead of hundreds that
// the kernel must first zero. A wait on a node whose snapshot has left the
// window knows only that node's own position: at worst an event more is
// planned, never one fewer than needed. Dependencies reach back that far
// (tens of thousands of nodes in issue order) only in rare graphs; plans
// whose snapshots fit are unchanged. Later passes then read such a
// node's clock as empty (split_streams_pass.h: a link more).
#ifndef WEFT_SCHEDULER_PASSES_INSERT_EVENTS_PASS_H_
#define WEFT_SCHEDULER_PASSES_INSERT_EVENTS_PASS_H_

#include <cstddef>

#include "scheduler/passes/stream_pass.h"

namespace weft::scheduler {

class InsertEventsPass final : public StreamPass {
 public:
  static constexpr size_t kDefaultMaxClockBytes = size_t{16} << 20;

  explicit InsertEventsPass(size_t max_clock_bytes = kDefaultMaxClockBytes)
      : max_clock_bytes_(max_clock_bytes) {}

  absl::string_view name() const override { return "insert_events"; }
  // REQUIRES: every node has a stream below streams.size(). INTERNAL
  // otherwise.
  absl::Status Run(StreamContext& context) const override;

 private:
  size_t max_clock_bytes_;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_INSERT_EVENTS_PASS_H_
