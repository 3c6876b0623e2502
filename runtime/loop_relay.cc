#include "runtime/loop_relay.h"

#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "runtime/control_condition.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {

absl::Status LoopRelay::Launch(int64_t iteration, bool relay,
                               std::vector<EventHandle> markers) {
  iteration_ = iteration;
  ran_ = 0;
  relay_ = relay;
  markers_ = std::move(markers);
  recorded_ = 0;
  last_progress_ = absl::Now();
  return Enqueue();
}

absl::Status LoopRelay::Enqueue() {
  Backend* backend = loop_.backend;
  WEFT_RETURN_IF_ERROR(backend->LaunchDeviceGraph(*loop_.body, loop_.stream));
  WEFT_RETURN_IF_ERROR(backend->CopyDeviceToHost(loop_.value, loop_.condition,
                                                 loop_.bytes, loop_.stream));
  return backend->AddHostCallback(
      loop_.stream, [self = shared_from_this()](absl::Status status) {
        self->OnDone(std::move(status));
      });
}

void LoopRelay::OnDone(absl::Status status) {
  const bool traced = !markers_.empty();
  if (status.ok() && relay_ && !stopped_.load(std::memory_order_acquire) &&
      iteration_ < loop_.max_iterations &&
      (!traced || recorded_ + 2 <= markers_.size()) &&
      ConditionHolds(loop_.dtype, loop_.value)) {
    ++iteration_;
    ++ran_;
    if (traced) {
      status = loop_.backend->RecordEvent(markers_[recorded_], loop_.stream);
    }
    if (status.ok()) status = Enqueue();
    if (status.ok() && traced) {
      status =
          loop_.backend->RecordEvent(markers_[recorded_ + 1], loop_.stream);
      if (status.ok()) recorded_ += 2;
    }
    if (status.ok()) {
      const absl::Time now = absl::Now();
      if (now - last_progress_ >= kProgressEvery) {
        last_progress_ = now;
        loop_.progress(iteration_);
      }
      return;
    }
  }
  loop_.hand_back(ran_, std::move(status));
}

}  // namespace weft::runtime
