#include "server/device_reservations.h"

#include <algorithm>

#include "scheduler/memory/memory_plan.h"

namespace weft::server {

std::vector<int64_t> JobDeviceBytes(const scheduler::Graph& graph,
                                    const scheduler::Plan& plan,
                                    int num_devices) {
  std::vector<int64_t> bytes(std::max(num_devices, 0), 0);
  if (!plan.memory.empty()) {
    for (const scheduler::DeviceMemory& m : plan.memory) {
      if (m.device >= 0 && m.device < num_devices) {
        bytes[m.device] += m.arena_bytes;
      }
    }
  } else {
    // No memory plan: every buffer a device's nodes use lives there for
    // the whole run, allocated by itself.
    const std::vector<uint64_t> separate =
        scheduler::memory::BytesWithoutReuse(graph, plan, num_devices);
    for (size_t d = 0; d < bytes.size() && d < separate.size(); ++d) {
      bytes[d] = static_cast<int64_t>(separate[d]);
    }
  }
  // Bodies planned over other devices than their control node's allocate
  // there too.
  const std::vector<uint64_t> bodies =
      scheduler::memory::BodyBytesBeyondPlan(graph, plan, num_devices);
  for (size_t d = 0; d < bytes.size() && d < bodies.size(); ++d) {
    bytes[d] += static_cast<int64_t>(bodies[d]);
  }
  return bytes;
}

bool DeviceReservations::Fits(const std::vector<int64_t>& need) const {
  return FirstShort(need) < 0;
}

int DeviceReservations::FirstShort(const std::vector<int64_t>& need) const {
  const size_t n = std::min(need.size(), capacity_.size());
  for (size_t d = 0; d < n; ++d) {
    if (capacity_[d] > 0 && reserved_[d] + need[d] > capacity_[d]) {
      return static_cast<int>(d);
    }
  }
  return -1;
}

bool DeviceReservations::FitsBeside(const std::vector<int64_t>& waiting,
                                    const std::vector<int64_t>& need) const {
  for (size_t d = 0; d < need.size(); ++d) {
    if (need[d] == 0 || d >= capacity_.size() || capacity_[d] == 0) continue;
    const int64_t held =
        reserved_[d] + (d < waiting.size() ? waiting[d] : int64_t{0});
    // Where `waiting` does not fit, held is above the capacity already.
    if (held + need[d] > capacity_[d]) return false;
  }
  return true;
}

void DeviceReservations::Reserve(const std::vector<int64_t>& need) {
  const size_t n = std::min(need.size(), reserved_.size());
  for (size_t d = 0; d < n; ++d) reserved_[d] += need[d];
  ++version_;
}

void DeviceReservations::Release(const std::vector<int64_t>& need) {
  const size_t n = std::min(need.size(), reserved_.size());
  for (size_t d = 0; d < n; ++d) reserved_[d] -= need[d];
  ++version_;
}

}  // namespace weft::server
