// The pooled events one job holds.
//
// A job records events for three reasons: the plan's events (one pooled
// event per plan event and device: events belong to a device, so a plan
// event signalled from another device than last time takes a new one),
// transfers the plan does not know about (a copy's ready event), and
// markers (a join between the two streams of a peer copy, trace
// timestamps). All of them stay held until the job has drained, because a
// wait already enqueued on an event must keep the recording it captured;
// ReleaseAll then gives every one back to its device's pool. Events the
// job replaced (a plan event re-signalled from another device) stay held
// too, for the same reason.
//
// Not thread-safe: used by one job in the executor's turn (executor.cc).
#ifndef WEFT_RUNTIME_JOB_EVENTS_H_
#define WEFT_RUNTIME_JOB_EVENTS_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/backend.h"
#include "runtime/event_pool.h"

namespace weft::runtime {

class JobEvents {
 public:
  // `pools`, by device, are not owned and outlive this. `num_plan_events`
  // is the plan's num_events.
  JobEvents(absl::Span<EventPool* const> pools, int num_plan_events);

  JobEvents(const JobEvents&) = delete;
  JobEvents& operator=(const JobEvents&) = delete;

  // A pooled event of `device`, held until ReleaseAll.
  absl::StatusOr<EventHandle> Acquire(int device);

  // The pooled event that plan event `event` is recorded on next, from a
  // stream of `device`: the one it had when it was last signalled from
  // `device`, otherwise a new one.
  absl::StatusOr<EventHandle> ForSignal(int event, int device);
  // The pooled event plan event `event` was last given by ForSignal;
  // value 0 while it was never signalled (a wait on it is a no-op, as in
  // CUDA).
  EventHandle plan_event(int event) const { return plan_events_[event]; }

  // Gives back every event held. REQUIRES: no work the job enqueued is
  // still pending.
  void ReleaseAll();
  int held() const { return static_cast<int>(held_.size()); }

 private:
  // Constant after construction.
  const absl::Span<EventPool* const> pools_;

  // Plan event -> pooled event and its device.
  std::vector<EventHandle> plan_events_;
  std::vector<int> plan_event_devices_;
  // Every pooled event acquired, with its device.
  std::vector<std::pair<EventHandle, int>> held_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_JOB_EVENTS_H_
