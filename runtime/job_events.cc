#include "runtime/job_events.h"

#include <vector>

#include "scheduler/status_macros.h"

namespace weft::runtime {

JobEvents::JobEvents(absl::Span<EventPool* const> pools, int num_plan_events)
    : pools_(pools),
      plan_events_(num_plan_events),
      plan_event_devices_(num_plan_events, -1) {}

absl::StatusOr<EventHandle> JobEvents::Acquire(int device) {
  WEFT_ASSIGN_OR_RETURN(EventHandle event, pools_[device]->Acquire());
  held_.emplace_back(event, device);
  return event;
}

absl::StatusOr<EventHandle> JobEvents::ForSignal(int event, int device) {
  if (plan_events_[event].value != 0 && plan_event_devices_[event] == device) {
    return plan_events_[event];
  }
  // First signal, or a signal from another device than the last one. The
  // previous handle stays held: waits already enqueued on it have captured
  // their recording.
  WEFT_ASSIGN_OR_RETURN(EventHandle handle, Acquire(device));
  plan_events_[event] = handle;
  plan_event_devices_[event] = device;
  return handle;
}

void JobEvents::ReleaseAll() {
  // In reverse: the pools hand them out last in, first out, so the next
  // job of this shape takes the same events in the same order.
  // Each pool's events go back together, under one lock (the order
  // matters within a pool only): counted by pool, then laid out pool
  // after pool, each in reverse.
  std::vector<int> start(pools_.size() + 1, 0);
  for (const auto& [event, pool] : held_) ++start[pool + 1];
  for (size_t d = 0; d < pools_.size(); ++d) start[d + 1] += start[d];
  std::vector<EventHandle> laid(held_.size());
  std::vector<int> next(start.begin(), start.end() - 1);
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
    laid[next[it->second]++] = it->first;
  }
  const absl::Span<const EventHandle> all(laid);
  for (size_t d = 0; d < pools_.size(); ++d) {
    if (start[d + 1] > start[d]) {
      pools_[d]->Release(all.subspan(start[d], start[d + 1] - start[d]));
    }
  }
  held_.clear();
}

}  // namespace weft::runtime
