// Where each buffer's up-to-date copies live while the planner places nodes.
//
// The plan-time model of GrCUDA (its "array up-to-date locations"): every
// buffer starts on the host. Placing a node on device d then updates the
// buffers it uses, in issue order: a buffer the node only reads gains d (a
// copy is made there, the others stay valid); a buffer it writes (WRITE or
// READ_WRITE) is up to date on d alone. A set is a bit mask: bit d for
// device d, kHostBit for the host, so the model supports up to kMaxDevices
// devices.
//
// Not thread-safe.
#ifndef WEFT_SCHEDULER_DATA_LOCATION_H_
#define WEFT_SCHEDULER_DATA_LOCATION_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/graph.h"

namespace weft::scheduler {

// Calls f(memory) for each place in `mask` (DataLocations::Mask): a device
// for bits 0-62, Topology::kHost (-1) for the host bit.
template <typename F>
void ForEachMemory(uint64_t mask, F f) {
  while (mask != 0) {
    const int bit = __builtin_ctzll(mask);
    mask &= mask - 1;
    f(bit == 63 ? -1 : bit);
  }
}

class DataLocations {
 public:
  using Mask = uint64_t;
  static constexpr int kMaxDevices = 63;
  static constexpr Mask kHostBit = Mask{1} << 63;

  explicit DataLocations(int num_buffers) : mask_(num_buffers, kHostBit) {}

  Mask mask(BufferId b) const { return mask_[b]; }
  bool OnDevice(BufferId b, int device) const {
    return (mask_[b] >> device) & 1;
  }
  bool OnHost(BufferId b) const { return (mask_[b] & kHostBit) != 0; }
  // Up to date on at least one device (not only on the host).
  bool OnSomeDevice(BufferId b) const { return (mask_[b] & ~kHostBit) != 0; }

  // Records that a node with these buffer uses runs on `device`.
  // REQUIRES: 0 <= device < kMaxDevices and every buffer below
  // num_buffers. Inline: device policies apply every node's uses.
  void Apply(absl::Span<const BufferUse> uses, int device) {
    const Mask bit = Mask{1} << device;
    // Reads first, then writes: a buffer both read and written ends on
    // `device` alone whatever the argument order.
    for (const BufferUse& use : uses) {
      if (!Writes(use.access)) mask_[use.buffer] |= bit;
    }
    for (const BufferUse& use : uses) {
      if (Writes(use.access)) mask_[use.buffer] = bit;
    }
  }

 private:
  std::vector<Mask> mask_;
};

// Copies between devices. Replays DataLocations over `order` (a
// topological order of all nodes) with each node on `device[v]`, and
// returns, by NodeId, the source device of every COPY-engine node whose
// read inputs are not all up to date on its own device: among the devices
// holding those inputs, the one holding the most of their bytes (ties: the
// lowest id); -1 for every other node, and for inputs only on the host.
// Returns an empty vector when no node has a source device. O(V + uses).
std::vector<int> CopySourceDevices(const Graph& graph,
                                   absl::Span<const NodeId> order,
                                   absl::Span<const int> device);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_DATA_LOCATION_H_
