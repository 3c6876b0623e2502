// One control node of a running job (weft.v1.WhileLoop, weft.v1.CaseOf),
// driven from the host without blocking.
//
// The job brings the node's condition (or selector) into host memory on the
// node's stream once its predecessors are done, and then hands the node to
// a ControlRun. The run reads element 0, and for a loop starts the body's
// plan as a nested job over the job's buffers (Hooks::start_body) while the
// value is nonzero; each nested job brings the condition back to host
// memory before it ends, and the run continues in the completion
// (OnBodyDone): the executor's turn never waits for a condition. A
// case..of runs the chosen branch once, or nothing when the selector picks
// none. A loop that would begin iteration max_iterations + 1 fails with an
// error naming the loop; a stop request (cancellation, a deadline, another
// node's failure) ends the loop between iterations, after cancelling the
// body job in flight. Iterations a LoopRelay begins in the completion
// callbacks count as the run's own (OnBodyDone's `relayed`).
//
// Not thread-safe: every call runs in the executor's turn (executor.cc).
#ifndef WEFT_RUNTIME_CONTROL_RUN_H_
#define WEFT_RUNTIME_CONTROL_RUN_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/control_condition.h"
#include "runtime/executor.h"
#include "scheduler/graph.h"

namespace weft::runtime {

class ControlRun {
 public:
  struct Hooks {
    // Starts body `body` (ControlSpec::bodies index) as a nested job;
    // its completion must come back through OnBodyDone. Returns the job's
    // id for `cancel_body`.
    std::function<absl::StatusOr<uint64_t>(int body)> start_body;
    std::function<void(uint64_t job, absl::Status reason)> cancel_body;
    // Stops iterations begun outside the run (a LoopRelay); may be unset.
    std::function<void()> interrupt;
    // Host memory holding the condition's current value (valid whenever
    // the run is called).
    std::function<const char*()> condition;
    // Progress: an iteration begins, or a branch was chosen.
    std::function<void(ControlEventKind kind, int64_t value,
                       const std::string& message)>
        report;
    // The node is finished (once).
    std::function<void(absl::Status status)> finished;
  };

  // `node` is a control node (node.control set) and outlives the run.
  ControlRun(const scheduler::NodeSpec& node, scheduler::DType dtype,
             Hooks hooks);

  ControlRun(const ControlRun&) = delete;
  ControlRun& operator=(const ControlRun&) = delete;

  // The condition is in host memory: decide and start.
  void Start();
  // The body job started last ended with `status`; for a loop the
  // condition is in host memory again. `relayed`: iterations begun since
  // then outside the run (a LoopRelay continuing the loop), the last of
  // which ended with `status`.
  void OnBodyDone(absl::Status status, int64_t relayed = 0);
  // Iteration `iteration`, begun outside the run, is running: reports it,
  // unless an iteration as late was reported already (the relay's latest
  // and the count it ends with may be the same).
  void Progress(int64_t iteration);
  // Ends the run with `reason` at the next iteration boundary, cancelling
  // the body job in flight.
  void Stop(absl::Status reason);

  // Iterations begun so far (loops), or 1 once a branch ran.
  int64_t iterations() const { return iterations_; }
  bool finished() const { return done_; }

 private:
  void Next();
  void Finish(absl::Status status);

  const scheduler::NodeSpec& node_;
  const scheduler::ControlSpec& control_;
  const scheduler::DType dtype_;
  const Hooks hooks_;

  int64_t iterations_ = 0;
  int64_t reported_ = 0;   // the latest iteration reported
  uint64_t body_job_ = 0;  // in flight; 0 when none
  absl::Status stop_;      // non-OK once stopped
  bool done_ = false;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_CONTROL_RUN_H_
