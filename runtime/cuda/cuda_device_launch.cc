// CudaDeviceControl by device graph launch (cuda_device_control.h): cases
// whose branch a kernel launches from the device, and loops whose body
// relaunches itself by tail launch. Conditional nodes are in
// cuda_device_control.cc.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/control_args.h"
#include "runtime/cuda/cuda_device_control.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/device_control_keys.h"
#include "scheduler/status_macros.h"

namespace weft::runtime::cuda {

using internal::CannotBuild;
using internal::CaseKey;
using internal::Empty;
using scheduler::DType;

void CudaDeviceControl::Destroy(Launcher& l) {
  if (l.device >= 0) (void)cudaSetDevice(l.device);
  // No launch in flight may still launch a branch destroyed below.
  if (l.done != nullptr) (void)cudaEventSynchronize(l.done);
  if (l.exec != nullptr) (void)cudaGraphExecDestroy(l.exec);
  if (l.graph != nullptr) (void)cudaGraphDestroy(l.graph);
  if (l.table != nullptr) (void)cudaFree(l.table);
  for (cudaGraphExec_t branch : l.branches) {
    if (branch != nullptr) (void)cudaGraphExecDestroy(branch);
  }
  if (l.done != nullptr) (void)cudaEventDestroy(l.done);
  l = Launcher{};
  (void)cudaGetLastError();
}

void CudaDeviceControl::Destroy(TailLoop& t) {
  if (t.device >= 0) (void)cudaSetDevice(t.device);
  // The last launch (its iterations included) has finished with the body
  // and the device word.
  if (t.done != nullptr) {
    (void)cudaEventSynchronize(t.done);
    (void)cudaEventDestroy(t.done);
  }
  if (t.exec != nullptr) (void)cudaGraphExecDestroy(t.exec);
  if (t.graph != nullptr) (void)cudaGraphDestroy(t.graph);
  if (t.body != nullptr) (void)cudaGraphExecDestroy(t.body);
  if (t.state != nullptr) (void)cudaFree(t.state);
  t = TailLoop{};
  (void)cudaGetLastError();
}

// ---- Device graph launch.

absl::StatusOr<CudaDeviceControl::Launcher*> CudaDeviceControl::FindLauncher(
    const DeviceCase& choice, const std::string& key, int device,
    cudaStream_t stream) {
  if (auto it = launchers_.find(key); it != launchers_.end()) {
    it->second->last_use = ++tick_;
    return it->second.get();
  }
  const uint32_t n = static_cast<uint32_t>(choice.branches.size());
  auto l = std::make_unique<Launcher>();
  l->device = device;
  l->branches.assign(n, nullptr);
  l->parameters.assign(n, std::string());
  auto build = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    for (uint32_t i = 0; i < n; ++i) {
      // A device graph may not be empty: an empty branch is a null entry,
      // which the launch kernel skips.
      if (Empty(choice.branches[i])) continue;
      WEFT_ASSIGN_OR_RETURN(
          cudaGraph_t captured,
          hooks_.capture(*choice.branches[i], nullptr, nullptr, nullptr));
      const absl::Status made = WEFT_CUDA_STATUS(cudaGraphInstantiate(
          &l->branches[i], captured, cudaGraphInstantiateFlagDeviceLaunch));
      (void)cudaGraphDestroy(captured);
      WEFT_RETURN_IF_ERROR(made);
      WEFT_CUDA_RETURN_IF_ERROR(cudaGraphUpload(l->branches[i], stream));
      l->parameters[i] = DeviceGraphParameters(*choice.branches[i]);
    }
    WEFT_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&l->table),
                                         sizeof(cudaGraphExec_t) * n));
    WEFT_CUDA_RETURN_IF_ERROR(cudaMemcpy(l->table, l->branches.data(),
                                         sizeof(cudaGraphExec_t) * n,
                                         cudaMemcpyHostToDevice));
    // The launching graph is an ordinary host-launched graph: a kernel of
    // one may launch device graphs of its device.
    WEFT_CUDA_RETURN_IF_ERROR(cudaGraphCreate(&l->graph, 0));
    WEFT_RETURN_IF_ERROR(AddCaseLaunchNode(
        l->graph, NodeDeps{},
        reinterpret_cast<const void*>(choice.selector.address),
        choice.dtype == DType::kInt64, l->table, n, nullptr, &l->launch));
    WEFT_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&l->exec, l->graph, 0));
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&l->done, cudaEventDisableTiming));
    return absl::OkStatus();
  };
  if (absl::Status s = build(); !s.ok()) {
    Destroy(*l);
    return CannotBuild("case..of", choice.name, s);
  }
  ++stats_.instantiations;
  l->last_use = ++tick_;
  Launcher* found = l.get();
  launchers_.emplace(key, std::move(l));
  Trim(launchers_, found);
  return found;
}

absl::Status CudaDeviceControl::LaunchCaseByDeviceLaunch(
    const DeviceCase& choice, StreamHandle stream, int device) {
  WEFT_RETURN_IF_ERROR(CheckDeviceCase(choice, device));
  if (choice.branches.empty()) {
    return hooks_.report(stream, [taken = choice.taken](absl::Status) {
      taken->store(-1);
      return absl::OkStatus();
    });
  }
  WEFT_ASSIGN_OR_RETURN(cudaStream_t raw, hooks_.stream(stream));
  const std::string key = CaseKey("launch", choice, device);
  const uint32_t n = static_cast<uint32_t>(choice.branches.size());
  WEFT_ASSIGN_OR_RETURN(ControlState * slot, slots_.Acquire());
  absl::MutexLock lock(&mu_);
  auto fail = [&](absl::Status s) {
    slots_.Release(slot);
    return s;
  };
  absl::StatusOr<Launcher*> found = FindLauncher(choice, key, device, raw);
  if (!found.ok()) return fail(found.status());
  Launcher* l = *found;
  if (l->launched) ++stats_.cache_hits;
  // New parameters: each changed branch is updated in place and uploaded
  // again, once no earlier launch can still launch it.
  bool waited = false;
  bool updated = false;
  for (uint32_t i = 0; i < n; ++i) {
    if (l->branches[i] == nullptr) continue;
    std::string parameters = DeviceGraphParameters(*choice.branches[i]);
    if (parameters == l->parameters[i]) continue;
    if (l->launched && !waited) {
      if (absl::Status s = WEFT_CUDA_STATUS(cudaEventSynchronize(l->done));
          !s.ok()) {
        return fail(s);
      }
      waited = true;
    }
    absl::StatusOr<cudaGraph_t> captured =
        hooks_.capture(*choice.branches[i], nullptr, nullptr, nullptr);
    if (!captured.ok()) return fail(captured.status());
    cudaGraphExecUpdateResultInfo info;
    const cudaError_t result =
        cudaGraphExecUpdate(l->branches[i], *captured, &info);
    (void)cudaGraphDestroy(*captured);
    if (result != cudaSuccess) {
      // Build the whole case anew, with every branch's parameters.
      (void)cudaGetLastError();
      Destroy(*l);
      launchers_.erase(key);
      found = FindLauncher(choice, key, device, raw);
      if (!found.ok()) return fail(found.status());
      l = *found;
      updated = false;
      break;
    }
    if (absl::Status s = WEFT_CUDA_STATUS(cudaGraphUpload(l->branches[i], raw));
        !s.ok()) {
      return fail(s);
    }
    l->parameters[i] = std::move(parameters);
    updated = true;
  }
  if (updated) ++stats_.updates;
  l->launched = true;
  if (absl::Status s = SetCaseLaunchNode(
          l->exec, l->launch,
          reinterpret_cast<const void*>(choice.selector.address),
          choice.dtype == DType::kInt64, l->table, n, slot);
      !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = WEFT_CUDA_STATUS(cudaGraphLaunch(l->exec, raw));
      !s.ok()) {
    return fail(s);
  }
  WEFT_CUDA_RETURN_IF_ERROR(cudaEventRecord(l->done, raw));
  return hooks_.report(stream, [slots = &slots_, slot, taken = choice.taken,
                                name = choice.name](absl::Status status) {
    const ControlState state = *slot;
    slots->Release(slot);
    taken->store(status.ok() ? state.value : -1);
    if (status.ok() && state.error != 0) {
      const absl::Status launch =
          CudaStatus(static_cast<cudaError_t>(state.error),
                     "cudaGraphLaunch on the device", __FILE__, __LINE__);
      return absl::Status(
          launch.code(), absl::StrCat("case '", name, "': branch ", state.value,
                                      ": ", launch.message()));
    }
    return absl::OkStatus();
  });
}

// ---- Loops by tail launch.

absl::StatusOr<cudaGraph_t> CudaDeviceControl::CaptureTailBody(
    const DeviceLoop& loop, TailLoopState* state) {
  const void* condition = reinterpret_cast<const void*>(loop.condition.address);
  const ConditionKind kind = ConditionKindOf(loop.dtype);
  const uint64_t max = loop.max_iterations;
  return hooks_.capture(
      *loop.body, nullptr,
      [=](cudaStream_t origin) {
        return LaunchTailLoopCheck(condition, kind, state, max, origin);
      },
      nullptr);
}

absl::StatusOr<CudaDeviceControl::TailLoop*> CudaDeviceControl::FindTailLoop(
    const DeviceLoop& loop, const std::string& key, int device,
    cudaStream_t stream) {
  if (auto it = tail_loops_.find(key); it != tail_loops_.end()) {
    it->second->last_use = ++tick_;
    return it->second.get();
  }
  auto t = std::make_unique<TailLoop>();
  t->device = device;
  auto build = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaMalloc(reinterpret_cast<void**>(&t->state), sizeof(TailLoopState)));
    WEFT_ASSIGN_OR_RETURN(cudaGraph_t captured,
                          CaptureTailBody(loop, t->state));
    const absl::Status made = WEFT_CUDA_STATUS(cudaGraphInstantiate(
        &t->body, captured, cudaGraphInstantiateFlagDeviceLaunch));
    (void)cudaGraphDestroy(captured);
    WEFT_RETURN_IF_ERROR(made);
    WEFT_CUDA_RETURN_IF_ERROR(cudaGraphUpload(t->body, stream));
    // The start graph is an ordinary host-launched graph: a kernel of one
    // may launch device graphs of its device.
    WEFT_CUDA_RETURN_IF_ERROR(cudaGraphCreate(&t->graph, 0));
    WEFT_RETURN_IF_ERROR(AddTailLoopStartNode(
        t->graph, NodeDeps{},
        reinterpret_cast<const void*>(loop.condition.address),
        ConditionKindOf(loop.dtype), t->state, loop.max_iterations, t->body,
        nullptr, &t->start));
    WEFT_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&t->exec, t->graph, 0));
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&t->done, cudaEventDisableTiming));
    return absl::OkStatus();
  };
  if (absl::Status s = build(); !s.ok()) {
    Destroy(*t);
    return CannotBuild("loop", loop.name, s);
  }
  ++stats_.instantiations;
  t->last_use = ++tick_;  // parameters: set by the launch that built it
  TailLoop* found = t.get();
  tail_loops_.emplace(key, std::move(t));
  Trim(tail_loops_, found);
  return found;
}

absl::Status CudaDeviceControl::LaunchLoopByTailLaunch(const DeviceLoop& loop,
                                                       StreamHandle stream,
                                                       int device) {
  WEFT_RETURN_IF_ERROR(CheckDeviceLoop(loop, device));
  WEFT_ASSIGN_OR_RETURN(cudaStream_t raw, hooks_.stream(stream));
  // The condition's dtype and the bound are in the body's tail check.
  const std::string key =
      absl::StrCat("tail|", device, "|", scheduler::DTypeName(loop.dtype), "|",
                   loop.max_iterations, "|", DeviceGraphSignature(*loop.body));
  std::string parameters = absl::StrCat(loop.condition.address, "|",
                                        DeviceGraphParameters(*loop.body));
  WEFT_ASSIGN_OR_RETURN(ControlState * slot, slots_.Acquire());
  absl::MutexLock lock(&mu_);
  auto fail = [&](absl::Status s) {
    slots_.Release(slot);
    return s;
  };
  absl::StatusOr<TailLoop*> found = FindTailLoop(loop, key, device, raw);
  if (!found.ok()) return fail(found.status());
  TailLoop* t = *found;
  if (t->launched) ++stats_.cache_hits;
  if (t->parameters.empty()) t->parameters = parameters;
  if (t->parameters != parameters) {
    // No launch may still run the body while it is replaced.
    if (t->launched) {
      if (absl::Status s = WEFT_CUDA_STATUS(cudaEventSynchronize(t->done));
          !s.ok()) {
        return fail(s);
      }
    }
    absl::StatusOr<cudaGraph_t> captured = CaptureTailBody(loop, t->state);
    if (!captured.ok()) return fail(captured.status());
    cudaGraphExecUpdateResultInfo info;
    const cudaError_t result = cudaGraphExecUpdate(t->body, *captured, &info);
    (void)cudaGraphDestroy(*captured);
    if (result != cudaSuccess) {
      (void)cudaGetLastError();
      Destroy(*t);
      tail_loops_.erase(key);
      found = FindTailLoop(loop, key, device, raw);
      if (!found.ok()) return fail(found.status());
      t = *found;
    } else {
      if (absl::Status s = WEFT_CUDA_STATUS(cudaGraphUpload(t->body, raw));
          !s.ok()) {
        return fail(s);
      }
      ++stats_.updates;
    }
    t->parameters = std::move(parameters);
  }
  t->launched = true;
  if (absl::Status s = SetTailLoopStartNode(
          t->exec, t->start,
          reinterpret_cast<const void*>(loop.condition.address),
          ConditionKindOf(loop.dtype), t->state, loop.max_iterations, t->body,
          slot);
      !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = WEFT_CUDA_STATUS(cudaGraphLaunch(t->exec, raw));
      !s.ok()) {
    return fail(s);
  }
  WEFT_CUDA_RETURN_IF_ERROR(cudaEventRecord(t->done, raw));
  return hooks_.report(
      stream,
      [slots = &slots_, slot, iterations = loop.iterations, name = loop.name,
       max = loop.max_iterations](absl::Status status) {
        const ControlState state = *slot;
        slots->Release(slot);
        if (!status.ok()) return absl::OkStatus();  // the stream's error stands
        iterations->store(state.value);
        if (state.error != 0) {
          const absl::Status launch =
              CudaStatus(static_cast<cudaError_t>(state.error),
                         "cudaGraphLaunch on the device", __FILE__, __LINE__);
          return absl::Status(
              launch.code(), absl::StrCat("loop '", name, "' iteration ",
                                          state.value, ": ", launch.message()));
        }
        if (state.flag != 0) {
          return absl::FailedPreconditionError(absl::StrCat(
              "loop '", name, "' would exceed max_iterations ", max,
              ": its condition still holds after ", state.value,
              " iterations (evaluated on the device)"));
        }
        return absl::OkStatus();
      });
}

}  // namespace weft::runtime::cuda
