#include "server/job_state.h"

#include "absl/strings/str_cat.h"

namespace weft::server {

absl::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "QUEUED";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kCancelled:
      return "CANCELLED";
  }
  return "UNKNOWN";
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

absl::Status CheckTransition(JobState from, JobState to) {
  bool legal = false;
  switch (from) {
    case JobState::kQueued:
      legal = to == JobState::kRunning || to == JobState::kCancelled ||
              to == JobState::kFailed;
      break;
    case JobState::kRunning:
      legal = IsTerminal(to);
      break;
    default:
      legal = false;  // terminal states are final
  }
  if (legal) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("illegal job state transition ", JobStateName(from), " -> ",
                   JobStateName(to)));
}

}  // namespace weft::server
