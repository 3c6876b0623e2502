// LoopRelay: the iterations of a host-driven loop whose body runs as a
// device graph, continued where the condition arrives.
//
// A loop the host drives brings its condition back to host memory after
// every iteration (control_run.h). Deciding on the next iteration in the
// executor's turn costs a turn per iteration, and a thread handoff where
// another thread holds the turn: the backend's callback thread posts the
// condition's arrival, and whoever runs the turn launches the next body.
// The relay decides in the completion callback itself, without the turn, on the
// backend's callback thread (a Backend callback may enqueue work; backend.h):
// while the condition holds, the loop is below its bound and no one has stopped
// it, it launches the body's graph again with the condition's copy and itself
// behind it. Anything else (the condition false, the bound reached, a
// failed body, a stop, iterations that are traced one by one) hands the
// loop back to the executor's turn, which decides as it always does
// (ControlRun), counting the iterations the relay began. While the relay
// runs it reports the latest iteration at most every kProgressEvery, so
// that progress and metrics keep up with a long loop. For a traced job the
// caller hands it marker events, two per iteration it may begin: it
// records them around each iteration (the trace spans them afterwards,
// RecordedMarkers) and hands back when they run out.
//
// Thread-safe: the executor's turn starts a run of iterations (Launch)
// and may Stop the relay at any time; from Launch to the hand-back only
// the backend's callbacks touch the rest.
#ifndef WEFT_RUNTIME_LOOP_RELAY_H_
#define WEFT_RUNTIME_LOOP_RELAY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/backend.h"
#include "runtime/device_graph.h"
#include "scheduler/graph.h"

namespace weft::runtime {

class LoopRelay : public std::enable_shared_from_this<LoopRelay> {
 public:
  static constexpr absl::Duration kProgressEvery = absl::Milliseconds(2);

  struct Loop {
    Backend* backend = nullptr;
    // The body's graph; outlives every launch of the relay.
    const DeviceGraph* body = nullptr;
    StreamHandle stream;  // where the body runs
    DevicePtr condition;
    char* value = nullptr;  // host memory the condition comes back to
    uint64_t bytes = 0;
    scheduler::DType dtype = scheduler::DType::kInt32;
    int64_t max_iterations = 0;
    // Called on the backend's callback thread. `hand_back`: the loop is the
    // executor's turn's again; `ran` iterations were begun by the relay
    // since Launch, and `status` is the last body's (or the error that
    // kept the relay from launching the next). `progress`: iteration
    // `iteration` has begun.
    std::function<void(int64_t ran, absl::Status status)> hand_back;
    std::function<void(int64_t iteration)> progress;
  };

  explicit LoopRelay(Loop loop) : loop_(std::move(loop)) {}
  LoopRelay(const LoopRelay&) = delete;
  LoopRelay& operator=(const LoopRelay&) = delete;

  // Enqueues iteration `iteration`, begun by the caller: the body, the
  // condition's copy to host memory, then the relay's callback. With
  // `relay` the callback may begin the next iterations itself; without, it
  // hands back at once. On an error part of the iteration may have been
  // enqueued, and no callback will come.
  absl::Status Launch(int64_t iteration, bool relay,
                      std::vector<EventHandle> markers = {});
  // After the hand-back: the markers recorded since Launch, a start and an
  // end for each iteration the relay began, in order.
  std::vector<EventHandle> RecordedMarkers() const {
    return std::vector<EventHandle>(markers_.begin(),
                                    markers_.begin() + recorded_);
  }
  // The relay begins no further iteration; the one running hands back.
  void Stop() { stopped_.store(true, std::memory_order_release); }

 private:
  absl::Status Enqueue();
  void OnDone(absl::Status status);

  const Loop loop_;
  std::atomic<bool> stopped_{false};
  // The callbacks' state from Launch to the hand-back.
  int64_t iteration_ = 0;
  int64_t ran_ = 0;
  bool relay_ = false;
  std::vector<EventHandle> markers_;  // empty: not traced
  size_t recorded_ = 0;
  absl::Time last_progress_;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_LOOP_RELAY_H_
