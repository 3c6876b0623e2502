#include "server/cancel_reactor.h"

#include <optional>
#include <utility>

#include "absl/time/clock.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "server/job_proto.h"
#include "server/stream_reactors.h"
#include "weft/v1/weft.pb.h"

namespace weft::server {

CancelReactor::CancelReactor(grpc::ByteBuffer* response, WatchWaker* waker)
    : response_(response), waker_(waker), gate_(std::make_shared<Gate>()) {
  absl::MutexLock lock(&gate_->mu);
  gate_->reactor = this;
}

CancelReactor* CancelReactor::Take(Gate& gate) {
  absl::MutexLock lock(&gate.mu);
  return std::exchange(gate.reactor, nullptr);
}

void CancelReactor::Reply(const JobInfo& job) {
  bool own_buffer = false;
  grpc::Status status = grpc::SerializationTraits<weft::v1::Job>::Serialize(
      JobToProto(job), response_, &own_buffer);
  Finish(std::move(status));
}

void CancelReactor::Release() {
  if (holds_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

void CancelReactor::Answer(const JobInfo& job) {
  if (CancelReactor* self = Take(*gate_)) self->Reply(job);
  Release();
}

void CancelReactor::Fail(grpc::Status status) {
  if (CancelReactor* self = Take(*gate_)) self->Finish(std::move(status));
  Release();
}

void CancelReactor::AnswerWhenTerminal(std::unique_ptr<JobWatch> watch,
                                       absl::Time deadline) {
  watch_ = std::move(watch);
  bool cancelled;
  {
    absl::MutexLock lock(&gate_->mu);
    gate_->handed_over = true;
    cancelled = gate_->cancelled;
  }
  if (cancelled) {
    if (CancelReactor* self = Take(*gate_)) self->Finish(ClientGone());
    Release();
    return;
  }
  // From here on the job's end, the alarm and OnCancel race to answer.
  std::shared_ptr<Gate> gate = gate_;
  WatchWaker* const waker = waker_;
  std::optional<JobInfo> ended =
      watch_->SetTerminalListener([gate, waker](const JobInfo& job) {
        // Under the job's lock: answer from the waker's thread.
        waker->Post([gate, job] {
          if (CancelReactor* self = Take(*gate)) self->Reply(job);
        });
      });
  if (ended.has_value()) {
    if (CancelReactor* self = Take(*gate_)) self->Reply(*ended);
  } else if (deadline <= absl::Now()) {
    if (CancelReactor* self = Take(*gate_)) self->Reply(self->watch_->Job());
  } else if (deadline < absl::InfiniteFuture()) {
    alarm_.Set(absl::ToChronoTime(deadline), [gate](bool expired) {
      if (!expired) return;  // cancelled: the call is over
      if (CancelReactor* self = Take(*gate)) self->Reply(self->watch_->Job());
    });
  }
  Release();
}

void CancelReactor::OnCancel() {
  {
    absl::MutexLock lock(&gate_->mu);
    if (!gate_->handed_over) {
      gate_->cancelled = true;  // the handler answers
      return;
    }
  }
  if (CancelReactor* self = Take(*gate_)) self->Finish(ClientGone());
}

void CancelReactor::OnDone() { Release(); }

}  // namespace weft::server
