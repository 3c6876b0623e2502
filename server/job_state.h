// A job's state and the moves between states.
//
//   (admission) -> QUEUED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED
//                  QUEUED -> CANCELLED   (cancelled, or the daemon shut down)
//                  QUEUED -> FAILED      (reserved: dispatch-time failures
//                                         before any device work)
//
// No other move is legal (CheckTransition answers FAILED_PRECONDITION), and
// every accepted job reaches exactly one terminal state.
#ifndef WEFT_SERVER_JOB_STATE_H_
#define WEFT_SERVER_JOB_STATE_H_

#include <ostream>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace weft::server {

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };

// "QUEUED", "RUNNING", ... (the weft.v1.JobState names).
absl::string_view JobStateName(JobState state);
bool IsTerminal(JobState state);
inline std::ostream& operator<<(std::ostream& os, JobState state) {
  return os << JobStateName(state);
}
// OK when `from -> to` is a legal move of the lifecycle above, else
// FAILED_PRECONDITION naming both states.
absl::Status CheckTransition(JobState from, JobState to);

}  // namespace weft::server

#endif  // WEFT_SERVER_JOB_STATE_H_
