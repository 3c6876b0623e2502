// Live bytes of a plan's buffer copies over its simulated time, for the
// memory views of `weftctl plan` (trace counters, SVG charts).
//
// The Plan carries each copy of a buffer on a device (Plan.buffers) but not
// which nodes use it, so the uses come from the submitted graph: the plan's
// issue order is replayed as the executor keeps copies (docs/memory.md).
// A device node uses the copies on its device of the buffers it names (a
// control node: those of its bodies and its condition or selector, and,
// where its bodies' plans (Plan.bodies) put body nodes on other devices,
// the copies there of what those nodes use, while it runs); a
// node that needs a buffer whose latest version is on another device also
// uses that copy, as the source of the transfer; host data first used by a
// device node is uploaded there before anything runs; and the copy holding
// an output's last version lives to the end of the plan. A copy is live
// from the estimated start of its first use to the estimated end of its
// last, in [start, end) (uploads from 0, outputs to the makespan).
//
// This is the planner's model laid over simulated time, not issue order,
// so its peak may differ from DeviceMemory.peak_live_bytes. Pure functions
// of their inputs.
#ifndef WEFT_CLIENT_PLAN_MEMORY_H_
#define WEFT_CLIENT_PLAN_MEMORY_H_

#include <cstdint>
#include <vector>

#include "weft/v1/weft.pb.h"

namespace weft::client {

// Bytes live on a device from `time_us` until the next sample.
struct LiveSample {
  double time_us = 0;
  int64_t bytes = 0;
  friend bool operator==(const LiveSample& a, const LiveSample& b) {
    return a.time_us == b.time_us && a.bytes == b.bytes;
  }
};

struct DeviceLiveBytes {
  int device = 0;
  // Ascending times, one sample at every change, starting with a sample at
  // 0 and ending with one of 0 bytes when the last copy dies. Empty when no
  // copy on the device has a use.
  std::vector<LiveSample> samples;
  int64_t peak_bytes = 0;
};

// One entry per device that Plan.memory or Plan.buffers names, by device.
// Copies in Plan.buffers (with their aligned sizes) that the replay finds
// no use of are left out; empty when the plan has no buffers.
std::vector<DeviceLiveBytes> LiveBytesByDevice(const weft::v1::Plan& plan,
                                               const weft::v1::Graph& graph);

}  // namespace weft::client

#endif  // WEFT_CLIENT_PLAN_MEMORY_H_
