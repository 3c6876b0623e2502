#include "runtime/sim/sim_device_control.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/control_condition.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

// One control node while it runs; its checks hold it.
struct Run : std::enable_shared_from_this<Run> {
  Backend* backend = nullptr;
  StreamGraphRunner* graphs = nullptr;
  const SimDeviceControl::Reader* read = nullptr;
  std::string name;
  bool loop = true;
  // A loop's body, or a case's branches (nullopt: an empty branch).
  std::vector<std::optional<DeviceGraph>> bodies;
  DevicePtr value_ptr;  // the condition or the selector
  scheduler::DType dtype = scheduler::DType::kInt32;
  uint32_t max_iterations = 0;
  // A loop's iterations or a case's branch; stored when it ends.
  std::shared_ptr<std::atomic<int64_t>> result;
  StreamHandle body_stream;
  int device = 0;
  uint64_t scope = 0;
  GateHandle gate;
  EventHandle start;
  EventHandle end;   // recorded after each body run
  int64_t done = 0;  // bodies run
  int64_t taken = -1;
  // A loop nested in a graph counts its iterations over all of its runs.
  bool accumulate = false;

  // The body stream has drained with `status`: decide.
  void Check(absl::Status status) {
    if (!status.ok()) {
      Finish(std::move(status));
      return;
    }
    char value[8] = {};
    const uint64_t bytes = static_cast<uint64_t>(scheduler::DTypeSize(dtype));
    if (absl::Status s = (*read)(value_ptr, bytes, value); !s.ok()) {
      Finish(std::move(s));
      return;
    }
    int body = 0;
    if (loop) {
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
    } else {
      if (done > 0) {  // the branch has run
        Finish(absl::OkStatus());
        return;
      }
      const int64_t selected = SelectorValue(dtype, value);
      if (selected < 0 || selected >= static_cast<int64_t>(bodies.size())) {
        Finish(absl::OkStatus());
        return;
      }
      taken = selected;
      body = static_cast<int>(selected);
      if (!bodies[body].has_value()) {
        Finish(absl::OkStatus());
        return;
      }
    }
    ++done;
    absl::Status s = graphs->Launch(*bodies[body], body_stream, device, scope);
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
    if (!loop) {
      result->store(taken);
    } else if (accumulate) {
      result->fetch_add(done);
    } else {
      result->store(done);
    }
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

// Checks what every launch needs, prepares the bodies' device graphs on
// the caller's thread unless they are (so checks launch cached instances),
// and starts `run`: the caller's stream waits behind its gate, the body
// stream for the caller's earlier work, then the first check.
absl::Status Start(const std::shared_ptr<Run>& run, Backend* backend,
                   StreamGraphRunner* graphs, StreamHandle stream, int device,
                   bool prepare = true) {
  if (run->result == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("device control node '", run->name, "' has no result"));
  }
  if (run->value_ptr.device != device) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device control node '", run->name,
        "': its condition or selector must be on the device of its stream "
        "(device ",
        device, ")"));
  }
  for (const std::optional<DeviceGraph>& body : run->bodies) {
    if (!body.has_value()) continue;
    if (body->device != device) {
      return absl::InvalidArgumentError(
          absl::StrCat("device control node '", run->name,
                       "': its bodies must be on the device of its stream "
                       "(device ",
                       device, ")"));
    }
    if (prepare) WEFT_RETURN_IF_ERROR(graphs->Prepare(*body));
  }
  if (stream == run->body_stream) {
    return absl::InvalidArgumentError(
        absl::StrCat("device control node '", run->name,
                     "': its bodies need a stream of their own"));
  }
  WEFT_ASSIGN_OR_RETURN(run->start, backend->CreateEvent(device));
  WEFT_ASSIGN_OR_RETURN(run->end, backend->CreateEvent(device));
  WEFT_RETURN_IF_ERROR(backend->RecordEvent(run->start, stream));
  WEFT_ASSIGN_OR_RETURN(run->gate, backend->EnqueueHostGate(stream));
  absl::Status s = backend->SetErrorScope(run->body_stream, run->scope);
  if (s.ok()) s = backend->StreamWaitEvent(run->body_stream, run->start);
  if (s.ok()) {
    s = backend->AddHostCallback(run->body_stream, [run](absl::Status status) {
      run->Check(std::move(status));
    });
  }
  if (!s.ok()) run->Finish(s);
  return s;
}

// A run of control node `name` with what every launch gives it; the
// caller adds the bodies, the value and the result.
std::shared_ptr<Run> NewRun(Backend* backend, StreamGraphRunner* graphs,
                            const SimDeviceControl::Reader* read,
                            const std::string& name, bool loop,
                            StreamHandle body_stream, int device,
                            uint64_t scope) {
  auto run = std::make_shared<Run>();
  run->backend = backend;
  run->graphs = graphs;
  run->read = read;
  run->name = name;
  run->loop = loop;
  run->body_stream = body_stream;
  run->device = device;
  run->scope = scope;
  return run;
}

}  // namespace

absl::Status SimDeviceControl::Launch(const DeviceGraphControl& control,
                                      StreamHandle stream,
                                      StreamHandle body_stream, int device,
                                      uint64_t scope) {
  std::shared_ptr<Run> run = NewRun(backend_, graphs_, &read_, control.name,
                                    control.loop, body_stream, device, scope);
  for (const DeviceGraph& body : control.bodies) {
    if (body.nodes.empty()) {
      run->bodies.emplace_back(std::nullopt);
    } else {
      run->bodies.emplace_back(body);
    }
  }
  run->value_ptr = control.value;
  run->dtype = control.dtype;
  run->max_iterations = control.max_iterations;
  run->result = control.result;
  run->accumulate = true;
  return Start(run, backend_, graphs_, stream, device, /*prepare=*/false);
}

absl::Status SimDeviceControl::Launch(const DeviceLoop& loop,
                                      StreamHandle stream,
                                      StreamHandle body_stream, int device,
                                      uint64_t scope) {
  if (loop.body == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("device loop '", loop.name, "' has no body"));
  }
  std::shared_ptr<Run> run = NewRun(backend_, graphs_, &read_, loop.name,
                                    /*loop=*/true, body_stream, device, scope);
  run->bodies.emplace_back(*loop.body);
  run->value_ptr = loop.condition;
  run->dtype = loop.dtype;
  run->max_iterations = loop.max_iterations;
  run->result = loop.iterations;
  return Start(run, backend_, graphs_, stream, device);
}

absl::Status SimDeviceControl::Launch(const DeviceCase& choice,
                                      StreamHandle stream,
                                      StreamHandle body_stream, int device,
                                      uint64_t scope) {
  if (choice.dtype != scheduler::DType::kInt32 &&
      choice.dtype != scheduler::DType::kInt64) {
    return absl::InvalidArgumentError(
        absl::StrCat("device case '", choice.name,
                     "': its selector must be INT32 or INT64"));
  }
  std::shared_ptr<Run> run = NewRun(backend_, graphs_, &read_, choice.name,
                                    /*loop=*/false, body_stream, device, scope);
  for (const DeviceGraph* branch : choice.branches) {
    if (branch == nullptr || branch->nodes.empty()) {
      run->bodies.emplace_back(std::nullopt);
    } else {
      run->bodies.emplace_back(*branch);
    }
  }
  run->value_ptr = choice.selector;
  run->dtype = choice.dtype;
  run->result = choice.taken;
  return Start(run, backend_, graphs_, stream, device);
}

}  // namespace weft::runtime
