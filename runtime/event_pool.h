// A per-device pool of backend events.
//
// Creating events is cheap on the simulator but not on a GPU, and a busy
// daemon needs thousands per second, so events are recycled: Acquire hands
// out the event released last (creating one only when none is free) and
// Release puts it back. Last in, first out: a job that releases its events
// in the reverse of the order it took them (JobEvents::ReleaseAll) hands
// the next job of its shape the same events in the same order, so that a
// device graph holding them relaunches unchanged (a CUDA graph whose event
// nodes changed must be captured and updated again). Re-using an event is
// safe once the waits issued on it have been enqueued: a wait captures the
// event's last recording when it is enqueued, and a new recording replaces
// it.
//
// Thread-safe. Calls into the backend are made without holding the lock.
#ifndef WEFT_RUNTIME_EVENT_POOL_H_
#define WEFT_RUNTIME_EVENT_POOL_H_

#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "runtime/backend.h"

namespace weft::runtime {

class EventPool {
 public:
  // `backend` is not owned and must outlive the pool.
  EventPool(Backend* backend, int device);
  // Destroys the free events. Events still held are the holders' to leak;
  // REQUIRES: every acquired event was released.
  ~EventPool();

  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  int device() const { return device_; }

  absl::StatusOr<EventHandle> Acquire() ABSL_LOCKS_EXCLUDED(mu_);
  void Release(EventHandle event) ABSL_LOCKS_EXCLUDED(mu_);
  // Releases `events` in their order (so the last of them is handed out
  // first), under one lock.
  void Release(absl::Span<const EventHandle> events) ABSL_LOCKS_EXCLUDED(mu_);

  // Events handed out and not yet released.
  int in_use() const ABSL_LOCKS_EXCLUDED(mu_);
  // Events alive: in use plus free.
  int total() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Constant after construction.
  Backend* const backend_;
  const int device_;

  mutable absl::Mutex mu_;
  std::deque<uint64_t> free_ ABSL_GUARDED_BY(mu_);
  int in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_EVENT_POOL_H_
