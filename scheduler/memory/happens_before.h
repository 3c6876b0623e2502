// Happens-before of a plan's execution, as vector clocks over its streams.
//
// A plan runs every logical stream in FIFO order; a node waits for the
// events it lists (each recorded after one earlier node), and a copy with a
// peer stream joins its two streams (plan.h). Those are the only orders the
// executor promises between nodes, so "x finishes before y starts" holds
// exactly when a chain of stream order, event waits and peer joins leads
// from x to y: a partial order, not the issue order (which is one linear
// extension of it). Prefetch uploads (the executor uploads host data to
// its first user's device on one upload stream per device before issuing
// any node) are points of their own, on a virtual upload stream per
// device, ordered only before the nodes that wait for them.
//
// A point of the execution is (stream, seq): the seq-th node issued on that
// stream (from 1), or the seq-th upload of a device's upload stream. Each
// node's clock holds, per stream, how many of its points finished before
// the node starts. Clocks change only at waits and joins; a node without
// either shares the snapshot of the node before it on its stream, so
// memory is one entry per stream per join, plus 12 bytes per node.
// Building is O(V + waits * streams); a query is O(1).
//
// Immutable once built; thread-compatible.
#ifndef WEFT_SCHEDULER_MEMORY_HAPPENS_BEFORE_H_
#define WEFT_SCHEDULER_MEMORY_HAPPENS_BEFORE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "scheduler/plan.h"

namespace weft::scheduler::memory {

struct Point {
  int32_t stream = 0;
  int32_t seq = 0;  // from 1
  friend bool operator==(Point a, Point b) {
    return a.stream == b.stream && a.seq == b.seq;
  }
};

// A node that waits for the seq-th prefetch upload of `device` (and so for
// every upload before it there).
struct UploadWait {
  int32_t position = 0;  // issue position of the waiting node
  int32_t device = 0;
  int32_t seq = 0;
};

class HappensBefore {
 public:
  HappensBefore() = default;

  // The order of `plan`, with `uploads_per_device[d]` prefetch uploads on
  // device d and the nodes in `upload_waits` (sorted by position) waiting
  // for them. INVALID_ARGUMENT (naming the node's issue position) when a
  // node has a stream, peer stream or event out of range, or waits on an
  // event not recorded by an earlier node.
  static absl::StatusOr<HappensBefore> Build(
      const Plan& plan, absl::Span<const int32_t> uploads_per_device,
      absl::Span<const UploadWait> upload_waits);

  int num_positions() const { return static_cast<int>(stream_.size()); }
  // Plan streams, then one upload stream per device.
  int num_streams() const { return width_; }
  int upload_stream(int device) const { return num_plan_streams_ + device; }
  Point point(int32_t position) const {
    return {stream_[position], seq_[position]};
  }
  Point upload(int device, int32_t seq) const {
    return {upload_stream(device), seq};
  }

  // Whether `p` finishes before the node at issue position `position`
  // starts (false when p is that node).
  bool Before(Point p, int32_t position) const {
    return Known(position, p.stream) >= p.seq;
  }
  // Whether all of `points` finish before the node at `position` starts.
  bool AllBefore(absl::Span<const Point> points, int32_t position) const {
    for (const Point& p : points) {
      if (!Before(p, position)) return false;
    }
    return true;
  }
  // How many points of `stream` finish before the node at `position`
  // starts.
  int32_t Known(int32_t position, int32_t stream) const {
    if (stream == stream_[position]) return seq_[position] - 1;
    return clocks_[static_cast<size_t>(snapshot_[position]) * width_ + stream];
  }
  // Snapshots taken (one per clock change).
  int num_snapshots() const {
    return width_ == 0 ? 0 : static_cast<int>(clocks_.size() / width_);
  }

 private:
  int width_ = 0;
  int num_plan_streams_ = 0;
  std::vector<int32_t> stream_;    // by issue position
  std::vector<int32_t> seq_;       // by issue position
  std::vector<int32_t> snapshot_;  // by issue position
  // Snapshots, width_ entries each; a snapshot's entry for the stream of
  // the nodes that use it is not read (their own seq stands in).
  std::vector<int32_t> clocks_;
};

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_HAPPENS_BEFORE_H_
