#include "runtime/control_run.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace weft::runtime {

using scheduler::ControlSpec;
using scheduler::DType;

ControlRun::ControlRun(const scheduler::NodeSpec& node, DType dtype,
                       Hooks hooks)
    : node_(node),
      control_(*node.control),
      dtype_(dtype),
      hooks_(std::move(hooks)) {}

void ControlRun::Start() {
  if (control_.kind == ControlSpec::Kind::kWhile) {
    Next();
    return;
  }
  const int64_t value = SelectorValue(dtype_, hooks_.condition());
  const int64_t branches = static_cast<int64_t>(control_.bodies.size());
  if (value < 0 || value >= branches) {
    hooks_.report(ControlEventKind::kBranch, -1,
                  absl::StrCat("selector ", value, " picks none of ", branches,
                               " branches"));
    Finish(absl::OkStatus());
    return;
  }
  hooks_.report(ControlEventKind::kBranch, value,
                absl::StrCat("branch ", value));
  iterations_ = 1;
  absl::StatusOr<uint64_t> job = hooks_.start_body(static_cast<int>(value));
  if (!job.ok()) {
    Finish(job.status());
    return;
  }
  body_job_ = *job;
}

void ControlRun::Next() {
  if (!stop_.ok()) {
    Finish(stop_);
    return;
  }
  if (!ConditionHolds(dtype_, hooks_.condition())) {
    Finish(absl::OkStatus());
    return;
  }
  if (iterations_ >= control_.max_iterations) {
    Finish(absl::FailedPreconditionError(absl::StrCat(
        "loop '", node_.name, "' would exceed max_iterations ",
        control_.max_iterations, ": its condition still holds after ",
        iterations_, " iterations")));
    return;
  }
  ++iterations_;
  reported_ = iterations_;
  hooks_.report(ControlEventKind::kIteration, iterations_,
                absl::StrCat("iteration ", iterations_));
  absl::StatusOr<uint64_t> job = hooks_.start_body(0);
  if (!job.ok()) {
    Finish(job.status());
    return;
  }
  body_job_ = *job;
}

void ControlRun::OnBodyDone(absl::Status status, int64_t relayed) {
  body_job_ = 0;
  if (done_) return;
  if (relayed > 0) {
    iterations_ += relayed;
    Progress(iterations_);
  }
  if (!status.ok()) {
    if (!stop_.ok() && status.code() == stop_.code()) {
      Finish(stop_);
      return;
    }
    const bool loop = control_.kind == ControlSpec::Kind::kWhile;
    Finish(absl::Status(
        status.code(), loop ? absl::StrCat("loop '", node_.name, "' iteration ",
                                           iterations_, ": ", status.message())
                            : absl::StrCat("case..of '", node_.name,
                                           "': ", status.message())));
    return;
  }
  if (control_.kind == ControlSpec::Kind::kWhile) {
    Next();
  } else {
    Finish(absl::OkStatus());
  }
}

void ControlRun::Progress(int64_t iteration) {
  if (done_ || iteration <= reported_) return;
  reported_ = iteration;
  hooks_.report(ControlEventKind::kIteration, iteration,
                absl::StrCat("iteration ", iteration));
}

void ControlRun::Stop(absl::Status reason) {
  if (done_ || !stop_.ok()) return;
  stop_ = reason.ok() ? absl::CancelledError("stopped") : std::move(reason);
  if (hooks_.interrupt) hooks_.interrupt();
  if (body_job_ != 0) hooks_.cancel_body(body_job_, stop_);
}

void ControlRun::Finish(absl::Status status) {
  if (done_) return;
  done_ = true;
  hooks_.finished(std::move(status));
}

}  // namespace weft::runtime
