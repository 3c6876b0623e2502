// Lifetimes of a plan's buffers on each device, judged by happens-before.
//
// A buffer has a copy on every device whose nodes use it, as the executor
// keeps it (runtime/job.h): a copy is created by a prefetch upload before
// the first node (host data whose first user is a device node), or at its
// first use there (made in place, or transferred from the latest version
// on another device, which is then used too, as the source of the copy),
// or by an eager copy (Plan::copies), which counts as a use of its
// destination from its writer's position and of its source up to its
// reader's;
// it is used by every node on that device that touches the buffer; the
// copy an output's last version is on is downloaded after everything,
// so it lives to the end of the job, unless host memory holds that version
// (a spill after its last write), which then serves the download. A
// control node uses its copies on its device, where its bodies run, and
// every copy of a buffer it uses lives to the end: the bodies run over it
// once the node has started, unordered against what follows the node in
// the plan. Where the plan holds its bodies' plans (Plan::bodies) and they
// run nodes on other devices (a body that pins a node, CONTROL_HOST), the
// buffers those nodes use are used there too, from the control node on
// (and where all the bodies run on one other device, every buffer the
// control node uses, as the device decides it there). Host nodes use host
// memory and only read device copies (as sources). A spill (kSpillOp) reads
// like a host node; a fill (kFillOp) starts a new copy of its buffer on its
// device (a residency of its own, placed apart), made current as any use makes
// it; host data whose first user is a fill (or a control node) is not
// prefetched. Replaying the plan's issue order as the executor does gives each
// copy its uses: points of the execution (happens_before.h).
//
// Two copies on a device may share addresses only if every use of one
// happens before every use of the other: the executor runs streams side by
// side, so an order between their issue positions is not enough. Before()
// answers that exactly: with the last use of `a` on each stream and the
// first use of `b` on each stream, it asks whether each first use of `b`
// knows (by its vector clock) that every last use of `a` has finished.
//
// Copies are numbered in order of creation: uploads first, then by first
// use. Immutable once built; thread-compatible.
#ifndef WEFT_SCHEDULER_MEMORY_LIFETIMES_H_
#define WEFT_SCHEDULER_MEMORY_LIFETIMES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "scheduler/csr.h"
#include "scheduler/graph.h"
#include "scheduler/memory/happens_before.h"
#include "scheduler/plan.h"

namespace weft::scheduler::memory {

// One buffer's memory on one device.
struct BufferCopy {
  BufferId buffer = -1;
  int device = 0;
  uint64_t size_bytes = 0;
  // Issue positions of the first and last use there: -1 for a prefetch
  // upload (before every node); `last` is the number of nodes for a copy
  // that lives to the end.
  int32_t first = 0;
  int32_t last = 0;
  bool uploaded = false;  // prefetched before the first node
  // An output downloaded from here at the end, or a copy of a buffer a
  // control node uses.
  bool live_to_end = false;
};

class Lifetimes {
 public:
  Lifetimes() = default;

  // REQUIRES: `plan` is a plan of `graph` (its nodes are `graph`'s, in a
  // topological order). INVALID_ARGUMENT when a node id, device or stream
  // of the plan is out of range.
  static absl::StatusOr<Lifetimes> Compute(const Graph& graph,
                                           const Plan& plan);

  int num_devices() const { return num_devices_; }
  int num_positions() const { return hb_.num_positions(); }
  int num_copies() const { return static_cast<int>(copies_.size()); }
  const BufferCopy& copy(int c) const { return copies_[c]; }
  const std::vector<BufferCopy>& copies() const { return copies_; }
  // The copy of `buffer` on `device`, or -1.
  int Find(BufferId buffer, int device) const;
  // Issue positions of every use of copy `c`, ascending (-1: its upload).
  absl::Span<const int32_t> Uses(int c) const { return uses_.Row(c); }
  // The last use of `c` on each stream it is used on.
  absl::Span<const Point> Ends(int c) const {
    return absl::Span<const Point>(ends_.data() + end_offsets_[c],
                                   end_offsets_[c + 1] - end_offsets_[c]);
  }
  // Issue positions of the first use of `c` on each stream it is used on
  // (without its upload).
  absl::Span<const int32_t> Starts(int c) const { return starts_.Row(c); }

  // Whether every use of copy `a` happens before every use of copy `b`.
  // REQUIRES: both on one device.
  bool Before(int a, int b) const;
  // Whether copies `a` and `b` may be live at once in some execution of
  // the plan (true for a == b).
  bool MayBeLiveTogether(int a, int b) const {
    return a == b || (!Before(a, b) && !Before(b, a));
  }
  const HappensBefore& happens_before() const { return hb_; }

  // Times of a few executions the plan allows (every node as soon as the
  // nodes it must follow have finished, on unlimited hardware): with each
  // node's cost plus 1 us, and with unit costs. Copies whose uses overlap
  // in time in one of them may be live together: the most bytes live at
  // once there is a lower bound on any arena (arena_planner.h).
  static constexpr int kExecutions = 2;
  double start_us(int execution, int32_t position) const {
    return times_[execution][2 * position];
  }
  double end_us(int execution, int32_t position) const {
    return times_[execution][2 * position + 1];
  }

 private:
  int num_devices_ = 0;
  std::vector<BufferCopy> copies_;
  std::vector<int32_t> copy_index_;  // buffer * num_devices_ + device
  Csr uses_;
  std::vector<int32_t> end_offsets_{0};
  std::vector<Point> ends_;
  Csr starts_;
  HappensBefore hb_;
  std::vector<double> times_[kExecutions];  // start, end by position
};

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_LIFETIMES_H_
