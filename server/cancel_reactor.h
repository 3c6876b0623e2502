// The CancelJob call on gRPC's callback API: a CancelReactor per call.
//
// A cancellation is requested at once (JobManager::Cancel); a job that is
// not running any more is answered at once. A running job drains first: the
// call is answered when the job reaches a terminal state, when its wait
// (Options::cancel_wait, bounded by the call's deadline) passes, or when
// its client goes away, whichever comes first. Nothing holds a thread
// meanwhile: the job's end is announced by a one-shot listener
// (JobWatch::SetTerminalListener), the wait by a gRPC alarm, the client's
// going away by OnCancel. The job's end is announced under the job's lock,
// so that answer is sent from the WatchWaker's thread.
#ifndef WEFT_SERVER_CANCEL_REACTOR_H_
#define WEFT_SERVER_CANCEL_REACTOR_H_

#include <atomic>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/alarm.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "server/job_info.h"
#include "server/job_watch.h"
#include "server/watch_reactor.h"

namespace weft::server {

// One CancelJob call. The method handler creates it, returns it to gRPC and
// then (on any thread) calls exactly one of Answer, Fail and
// AnswerWhenTerminal, once; it must not touch the call's request or context
// after that call. The reactor finishes the call exactly once, and deletes
// itself when both gRPC and the handler are done with it.
//
// Whoever answers first takes the reactor from `gate_` (Take); every later
// would-be answer (the job's end, the alarm, OnCancel) finds it taken and
// does nothing. Those come through callbacks that may outlive the reactor,
// so they hold the gate, never the reactor itself.
class CancelReactor final : public grpc::ServerUnaryReactor {
 public:
  // Answers into `response` (gRPC's, kept until the call ends). `waker`
  // outlives the call.
  CancelReactor(grpc::ByteBuffer* response, WatchWaker* waker);
  CancelReactor(const CancelReactor&) = delete;
  CancelReactor& operator=(const CancelReactor&) = delete;

  // Answers with `job` now.
  void Answer(const JobInfo& job);
  // Fails the call with `status` now.
  void Fail(grpc::Status status);
  // Answers with the job of `watch` when it is terminal, or as it is at
  // `deadline`, whichever comes first; with CANCELLED if the client goes
  // away first.
  void AnswerWhenTerminal(std::unique_ptr<JobWatch> watch, absl::Time deadline);

  // The client went away or the deadline passed.
  void OnCancel() override;
  void OnDone() override;

 private:
  struct Gate {
    absl::Mutex mu;
    // Null once the call is answered (or being answered).
    CancelReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
    // Whether OnCancel may answer: not before the handler has handed the
    // call over, since gRPC may free the call's request and context once
    // it is answered.
    bool handed_over ABSL_GUARDED_BY(mu) = false;
    // OnCancel came before the hand-over.
    bool cancelled ABSL_GUARDED_BY(mu) = false;
  };

  ~CancelReactor() override = default;

  // The reactor, to the one caller that is to answer; null to every other.
  static CancelReactor* Take(Gate& gate) ABSL_LOCKS_EXCLUDED(gate.mu);
  // Serializes `job` into the response and finishes the call. REQUIRES: the
  // caller took the reactor. Touches nothing of this object after Finish.
  void Reply(const JobInfo& job);
  // Lets go of one of the two holds (gRPC's, the handler's).
  void Release();

  grpc::ByteBuffer* const response_;
  WatchWaker* const waker_;
  const std::shared_ptr<Gate> gate_;
  // Set once, before anything can answer from it.
  std::unique_ptr<JobWatch> watch_;
  grpc::Alarm alarm_;
  // gRPC's (until OnDone) and the handler's (until it has handed over).
  std::atomic<int> holds_{2};
};

}  // namespace weft::server

#endif  // WEFT_SERVER_CANCEL_REACTOR_H_
