#include "runtime/sim/sim_device_loops.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/control_condition.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

// One loop while it runs; its checks hold it.
struct Run : std::enable_shared_from_this<Run> {
  Backend* backend = nullptr;
  StreamGraphRunner* graphs = nullptr;
  const SimDeviceLoops::Reader* read = nullptr;
  std::string name;
  DeviceGraph body;
  DevicePtr condition;
  scheduler::DType dtype = scheduler::DType::kInt32;
  uint32_t max_iterations = 0;
  std::shared_ptr<std::atomic<int64_t>> iterations;
  StreamHandle body_stream;
  int device = 0;
  uint64_t scope = 0;
  GateHandle gate;
  EventHandle start;
  EventHandle end;  // recorded after each iteration
  int64_t done = 0;

  // The body stream has drained with `status`: decide.
  void Check(absl::Status status) {
    if (!status.ok()) {
      Finish(std::move(status));
      return;
    }
    char value[8] = {};
    const uint64_t bytes = static_cast<uint64_t>(scheduler::DTypeSize(dtype));
    if (absl::Status s = (*read)(condition, bytes, value); !s.ok()) {
      Finish(std::move(s));
      return;
    }
    if (!ConditionHolds(dtype, value)) {
      Finish(absl::OkStatus());
      return;
    }
    if (done >= max_iterations) {
      Finish(absl::FailedPreconditionError(
          absl::StrCat("loop '", name, "' would exceed max_iterations ",
                       max_iterations, ": its condition still holds after ",
                       done, " iterations (evaluated on the device)")));
      return;
    }
    ++done;
    absl::Status s = graphs->Launch(body, body_stream, device, scope);
    if (s.ok()) s = backend->RecordEvent(end, body_stream);
    if (s.ok()) {
      s = backend->AddHostCallback(
          body_stream, [self = shared_from_this()](absl::Status status) {
            self->Check(std::move(status));
          });
    }
    if (!s.ok()) Finish(std::move(s));
  }

  void Finish(absl::Status status) {
    iterations->store(done);
    double busy_us = 0;
    if (done > 0) {
      absl::StatusOr<double> begin = backend->EventTimeUs(start);
      absl::StatusOr<double> finish = backend->EventTimeUs(end);
      if (begin.ok() && finish.ok() && *finish > *begin) {
        busy_us = *finish - *begin;
      }
    }
    backend->OpenHostGate(gate, std::move(status), busy_us).IgnoreError();
    backend->DestroyEvent(start).IgnoreError();
    backend->DestroyEvent(end).IgnoreError();
  }
};

}  // namespace

absl::Status SimDeviceLoops::Launch(const DeviceLoop& loop, StreamHandle stream,
                                    StreamHandle body_stream, int device,
                                    uint64_t scope) {
  if (loop.body == nullptr || loop.iterations == nullptr) {
    return absl::InvalidArgumentError("device loop without body or counter");
  }
  if (loop.body->device != device || loop.condition.device != device) {
    return absl::InvalidArgumentError(
        absl::StrCat("device loop '", loop.name,
                     "': its body and condition must be on "
                     "the device of its stream (device ",
                     device, ")"));
  }
  if (stream == body_stream) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device loop '", loop.name, "': the body needs a stream of its own"));
  }
  // Instantiated here, on the caller's thread, so that checks relaunch a
  // cached instance.
  WEFT_RETURN_IF_ERROR(graphs_->Prepare(*loop.body));
  auto run = std::make_shared<Run>();
  run->backend = backend_;
  run->graphs = graphs_;
  run->read = &read_;
  run->name = loop.name;
  run->body = *loop.body;
  run->condition = loop.condition;
  run->dtype = loop.dtype;
  run->max_iterations = loop.max_iterations;
  run->iterations = loop.iterations;
  run->body_stream = body_stream;
  run->device = device;
  run->scope = scope;
  WEFT_ASSIGN_OR_RETURN(run->start, backend_->CreateEvent(device));
  WEFT_ASSIGN_OR_RETURN(run->end, backend_->CreateEvent(device));
  // The caller's stream: its earlier work, then the gate the loop opens.
  WEFT_RETURN_IF_ERROR(backend_->RecordEvent(run->start, stream));
  WEFT_ASSIGN_OR_RETURN(run->gate, backend_->EnqueueHostGate(stream));
  // The body stream: after that work, the first check.
  absl::Status s = backend_->SetErrorScope(body_stream, scope);
  if (s.ok()) s = backend_->StreamWaitEvent(body_stream, run->start);
  if (s.ok()) {
    s = backend_->AddHostCallback(body_stream, [run](absl::Status status) {
      run->Check(std::move(status));
    });
  }
  if (!s.ok()) run->Finish(s);
  return s;
}

}  // namespace weft::runtime
