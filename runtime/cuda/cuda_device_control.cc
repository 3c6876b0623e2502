#include "runtime/cuda/cuda_device_control.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/cuda/control_args.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/device_control_keys.h"
#include "scheduler/status_macros.h"

namespace weft::runtime::cuda {
namespace {

using internal::CannotBuild;
using internal::CaseKey;
using internal::Empty;
using internal::Field;
using scheduler::DType;

absl::Status RemoveNodes(cudaGraph_t graph) {
  size_t count = 0;
  WEFT_CUDA_RETURN_IF_ERROR(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) {
    WEFT_CUDA_RETURN_IF_ERROR(cudaGraphGetNodes(graph, nodes.data(), &count));
  }
  for (cudaGraphNode_t node : nodes) {
    WEFT_CUDA_RETURN_IF_ERROR(cudaGraphDestroyNode(node));
  }
  return absl::OkStatus();
}

// Adds a conditional node of `type` with `size` bodies after `dep`.
absl::Status AddConditionalNode(cudaGraph_t graph, cudaGraphNode_t dep,
                                cudaGraphConditionalHandle handle,
                                cudaGraphConditionalNodeType type,
                                unsigned int size, cudaGraphNode_t* node,
                                std::vector<cudaGraph_t>* bodies) {
  cudaGraphNodeParams params = {};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type = type;
  params.conditional.size = size;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaGraphAddNode(node, graph, &dep, nullptr, 1, &params));
  bodies->assign(params.conditional.phGraph_out,
                 params.conditional.phGraph_out + size);
  return absl::OkStatus();
}

// What the report of a launch needs of a control nested in it.
struct NestedReport {
  std::string name;
  bool loop = true;
  uint32_t max_iterations = 0;
  std::shared_ptr<std::atomic<int64_t>> result;
};

std::vector<NestedReport> NestedReports(
    absl::Span<const DeviceGraph* const> bodies) {
  std::vector<const DeviceGraphControl*> controls;
  for (const DeviceGraph* body : bodies) {
    if (body != nullptr) NestedControls(*body, controls);
  }
  std::vector<NestedReport> reports;
  reports.reserve(controls.size());
  for (const DeviceGraphControl* control : controls) {
    reports.push_back(NestedReport{control->name, control->loop,
                                   control->max_iterations, control->result});
  }
  return reports;
}

// Stores each nested control's result from its word (`states`, in
// preorder) and returns the error of the first loop that hit its bound.
absl::Status ReportNested(const ControlState* states,
                          const std::vector<NestedReport>& nested) {
  absl::Status first;
  for (size_t i = 0; i < nested.size(); ++i) {
    const ControlState& state = states[i];
    const NestedReport& report = nested[i];
    if (report.result != nullptr) {
      report.result->store(report.loop     ? state.value
                           : state.run > 0 ? state.value
                                           : -1);
    }
    if (report.loop && state.flag != 0 && first.ok()) {
      first = absl::FailedPreconditionError(absl::StrCat(
          "loop '", report.name, "' would exceed max_iterations ",
          report.max_iterations, ": its condition still holds after ",
          state.run, " iterations (evaluated on the device)"));
    }
  }
  return first;
}

}  // namespace

void NestedControls(const DeviceGraph& graph,
                    std::vector<const DeviceGraphControl*>& out) {
  for (const DeviceGraphNode& node : graph.nodes) {
    if (node.kind != DeviceGraphNodeKind::kControl || node.control == nullptr) {
      continue;
    }
    out.push_back(node.control.get());
    for (const DeviceGraph& body : node.control->bodies) {
      NestedControls(body, out);
    }
  }
}

ConditionKind ConditionKindOf(DType dtype) {
  switch (dtype) {
    case DType::kBytes:
      return ConditionKind::kByte;
    case DType::kFloat32:
      return ConditionKind::kFloat32;
    case DType::kFloat64:
      return ConditionKind::kFloat64;
    case DType::kInt32:
      return ConditionKind::kInt32;
    case DType::kInt64:
      return ConditionKind::kInt64;
  }
  return ConditionKind::kByte;
}

// ---- Lifetime.

CudaDeviceControl::CudaDeviceControl(Hooks hooks, Options options)
    : hooks_(std::move(hooks)), options_(options) {}

CudaDeviceControl::~CudaDeviceControl() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, c] : loops_) Destroy(*c);
  for (auto& [key, c] : cases_) Destroy(*c);
  for (auto& c : retired_) Destroy(*c);
  for (auto& [key, l] : launchers_) Destroy(*l);
  for (auto& [key, t] : tail_loops_) Destroy(*t);
  (void)cudaGetLastError();
}

void CudaDeviceControl::Destroy(Conditional& c) {
  if (c.device >= 0) (void)cudaSetDevice(c.device);
  // The last launch has finished with the device word before it goes.
  if (c.done != nullptr) {
    (void)cudaEventSynchronize(c.done);
    (void)cudaEventDestroy(c.done);
  }
  if (c.exec != nullptr) (void)cudaGraphExecDestroy(c.exec);
  if (c.graph != nullptr) (void)cudaGraphDestroy(c.graph);
  if (c.state != nullptr) (void)cudaFree(c.state);
  c = Conditional{};
  (void)cudaGetLastError();
}

void CudaDeviceControl::SweepRetired() {
  for (size_t i = 0; i < retired_.size();) {
    Conditional& c = *retired_[i];
    if (c.done != nullptr && cudaEventQuery(c.done) == cudaErrorNotReady) {
      ++i;
      continue;
    }
    Destroy(c);
    retired_[i] = std::move(retired_.back());
    retired_.pop_back();
  }
  (void)cudaGetLastError();
}

template <typename Entry>
void CudaDeviceControl::Trim(
    absl::flat_hash_map<std::string, std::unique_ptr<Entry>>& cache,
    const Entry* keep) {
  const size_t bound = static_cast<size_t>(std::max(1, options_.max_cached));
  while (cache.size() > bound) {
    auto oldest = cache.end();
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if (it->second.get() == keep) continue;
      if (oldest == cache.end() ||
          it->second->last_use < oldest->second->last_use) {
        oldest = it;
      }
    }
    if (oldest == cache.end()) return;
    Destroy(*oldest->second);
    cache.erase(oldest);
  }
}

DeviceControlStats CudaDeviceControl::stats() const {
  absl::MutexLock lock(&mu_);
  DeviceControlStats stats = stats_;
  stats.cached = static_cast<int>(loops_.size() + cases_.size() +
                                  launchers_.size() + tail_loops_.size());
  return stats;
}

// ---- Conditional nodes (WHILE, SWITCH).

absl::Status CudaDeviceControl::FillLoop(Conditional& c,
                                         const DeviceLoop& loop) {
  const ConditionKind kind = ConditionKindOf(loop.dtype);
  const void* condition = reinterpret_cast<const void*>(loop.condition.address);
  const cudaGraphConditionalHandle handle = c.handle;
  ControlState* state = c.state;
  const uint64_t max = loop.max_iterations;
  WEFT_RETURN_IF_ERROR(RemoveNodes(c.bodies[0]));
  // The body, then the check that decides on the next iteration.
  int next = 0;
  WEFT_RETURN_IF_ERROR(
      CaptureBody(c, next, *loop.body, c.bodies[0], [=](cudaStream_t origin) {
        return LaunchLoopCheck(handle, condition, kind, state, max, origin);
      }));
  if (next != c.nested) {
    return absl::InternalError(absl::StrCat(
        "captured ", next, " nested controls, expected ", c.nested));
  }
  return SetLoopCheckNode(c.check, handle, condition, kind, state, max,
                          /*reset=*/true);
}

absl::Status CudaDeviceControl::CaptureBody(
    Conditional& c, int& next, const DeviceGraph& body, cudaGraph_t target,
    const CudaGraphCache::CaptureTail& tail) {
  CudaGraphCache::CaptureControl control =
      [this, &c, &next](const DeviceGraphControl& nested, cudaStream_t lane,
                        const CudaGraphCache::CaptureBody& capture_body)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return CaptureNested(c, next, nested, lane, capture_body);
          };
  return hooks_.capture(body, target, tail, control).status();
}

absl::Status CudaDeviceControl::CaptureNested(
    Conditional& c, int& next, const DeviceGraphControl& control,
    cudaStream_t lane, const CudaGraphCache::CaptureBody& capture_body) {
  const int index = ++next;
  if (index > c.nested) {
    return absl::InternalError(
        absl::StrCat("nested control '", control.name, "' has no device word"));
  }
  ControlState* state = c.state + index;
  int32_t* abort = &c.state->error;
  const void* value = reinterpret_cast<const void*>(control.value.address);
  const unsigned int size =
      control.loop ? 1u : static_cast<unsigned int>(control.bodies.size());
  // The graph being captured into: the handle and the node belong to it.
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  WEFT_CUDA_RETURN_IF_ERROR(cudaStreamGetCaptureInfo(
      lane, &capturing, nullptr, &graph, nullptr, nullptr, nullptr));
  if (capturing != cudaStreamCaptureStatusActive || graph == nullptr) {
    return absl::InternalError(absl::StrCat("nested control '", control.name,
                                            "': its lane is not capturing"));
  }
  cudaGraphConditionalHandle handle = 0;
  WEFT_CUDA_RETURN_IF_ERROR(cudaGraphConditionalHandleCreate(
      &handle, graph, control.loop ? 0u : size, cudaGraphCondAssignDefault));
  const ConditionKind kind = ConditionKindOf(control.dtype);
  const uint64_t max = control.max_iterations;
  if (control.loop) {
    WEFT_RETURN_IF_ERROR(LaunchNestedLoopCheck(handle, value, kind, state, max,
                                               /*start=*/true, abort, lane));
  } else {
    WEFT_RETURN_IF_ERROR(LaunchNestedCaseSelect(handle, value,
                                                control.dtype == DType::kInt64,
                                                size, state, abort, lane));
  }
  // The conditional node after the kernel just captured.
  const cudaGraphNode_t* deps = nullptr;
  size_t count = 0;
  WEFT_CUDA_RETURN_IF_ERROR(cudaStreamGetCaptureInfo(
      lane, &capturing, nullptr, &graph, &deps, nullptr, &count));
  const std::vector<cudaGraphNode_t> after(deps, deps + count);
  cudaGraphNodeParams params = {};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type =
      control.loop ? cudaGraphCondTypeWhile : cudaGraphCondTypeSwitch;
  params.conditional.size = size;
  cudaGraphNode_t node = nullptr;
  WEFT_CUDA_RETURN_IF_ERROR(cudaGraphAddNode(&node, graph, after.data(),
                                             nullptr, after.size(), &params));
  const std::vector<cudaGraph_t> bodies(params.conditional.phGraph_out,
                                        params.conditional.phGraph_out + size);
  for (unsigned int i = 0; i < size; ++i) {
    const DeviceGraph& body = control.bodies[i];
    if (body.nodes.empty()) {
      cudaGraphNode_t empty = nullptr;
      WEFT_CUDA_RETURN_IF_ERROR(
          cudaGraphAddEmptyNode(&empty, bodies[i], nullptr, 0));
      continue;
    }
    CudaGraphCache::CaptureTail tail;
    if (control.loop) {
      tail = [=](cudaStream_t origin) {
        return LaunchNestedLoopCheck(handle, value, kind, state, max,
                                     /*start=*/false, abort, origin);
      };
    }
    WEFT_RETURN_IF_ERROR(capture_body(body, bodies[i], tail));
  }
  // Later work on the lane follows the whole conditional node.
  return WEFT_CUDA_STATUS(cudaStreamUpdateCaptureDependencies(
      lane, &node, nullptr, 1, cudaStreamSetCaptureDependencies));
}

absl::Status CudaDeviceControl::FillCase(Conditional& c,
                                         const DeviceCase& choice) {
  const uint32_t n = static_cast<uint32_t>(choice.branches.size());
  int next = 0;
  for (uint32_t i = 0; i < n; ++i) {
    WEFT_RETURN_IF_ERROR(RemoveNodes(c.bodies[i]));
    if (Empty(choice.branches[i])) {
      cudaGraphNode_t empty = nullptr;
      WEFT_CUDA_RETURN_IF_ERROR(
          cudaGraphAddEmptyNode(&empty, c.bodies[i], nullptr, 0));
      continue;
    }
    WEFT_RETURN_IF_ERROR(CaptureBody(c, next, *choice.branches[i], c.bodies[i],
                                     CudaGraphCache::CaptureTail()));
  }
  if (next != c.nested) {
    return absl::InternalError(absl::StrCat(
        "captured ", next, " nested controls, expected ", c.nested));
  }
  return SetCaseSelectNode(
      c.check, c.handle, reinterpret_cast<const void*>(choice.selector.address),
      choice.dtype == DType::kInt64, n, c.state);
}

absl::Status CudaDeviceControl::Refresh(Conditional& c) {
  if (c.exec != nullptr) {
    cudaGraphExecUpdateResultInfo info;
    if (cudaGraphExecUpdate(c.exec, c.graph, &info) == cudaSuccess) {
      ++stats_.updates;
      return absl::OkStatus();
    }
    // CUDA could not map the new parameters onto the executable: build it
    // anew (a graph with conditional nodes has one executable at a time).
    (void)cudaGetLastError();
    (void)cudaGraphExecDestroy(c.exec);
    c.exec = nullptr;
  }
  WEFT_CUDA_RETURN_IF_ERROR(cudaGraphInstantiate(&c.exec, c.graph, 0));
  ++stats_.instantiations;
  return absl::OkStatus();
}

absl::StatusOr<CudaDeviceControl::Conditional*>
CudaDeviceControl::FindConditional(ConditionalCache& cache,
                                   const std::string& key,
                                   const std::string& parameters, int device,
                                   const ConditionalBuild& build) {
  SweepRetired();
  if (auto it = cache.find(key);
      it != cache.end() &&
      (it->second->parameters == parameters || it->second->nested == 0)) {
    Conditional* c = it->second.get();
    c->last_use = ++tick_;
    if (c->parameters != parameters) {
      absl::Status s = build.fill(*c);
      if (s.ok()) s = Refresh(*c);
      if (!s.ok()) {
        Destroy(*c);
        cache.erase(it);
        return CannotBuild(build.what, build.name, s);
      }
      c->parameters = parameters;
    }
    return c;
  } else if (it != cache.end()) {
    // Nested controls: built anew (see the header).
    retired_.push_back(std::move(it->second));
    cache.erase(it);
  }
  auto c = std::make_unique<Conditional>();
  c->device = device;
  c->nested = build.nested;
  auto make = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
    WEFT_CUDA_RETURN_IF_ERROR(cudaGraphCreate(&c->graph, 0));
    WEFT_CUDA_RETURN_IF_ERROR(cudaGraphConditionalHandleCreate(
        &c->handle, c->graph, build.default_value, cudaGraphCondAssignDefault));
    const size_t words = 1 + static_cast<size_t>(c->nested);
    WEFT_CUDA_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&c->state),
                                         sizeof(ControlState) * words));
    NodeDeps check_deps;
    if (c->nested > 0) {
      // The nested words start every launch at zero.
      cudaMemsetParams zero = {};
      zero.dst = c->state + 1;
      zero.value = 0;
      zero.elementSize = 4;
      zero.width = (words - 1) * sizeof(ControlState) / 4;
      zero.height = 1;
      WEFT_CUDA_RETURN_IF_ERROR(
          cudaGraphAddMemsetNode(&c->reset, c->graph, nullptr, 0, &zero));
      check_deps = NodeDeps{&c->reset, 1};
    }
    WEFT_RETURN_IF_ERROR(build.add_check(*c, check_deps));
    cudaGraphNode_t node = nullptr;
    WEFT_RETURN_IF_ERROR(AddConditionalNode(c->graph, c->check, c->handle,
                                            build.type, build.size, &node,
                                            &c->bodies));
    WEFT_RETURN_IF_ERROR(AddReportNode(c->graph, NodeDeps{&node, 1}, c->state,
                                       nullptr, static_cast<int32_t>(words),
                                       &c->report));
    WEFT_RETURN_IF_ERROR(build.fill(*c));
    return Refresh(*c);
  };
  if (absl::Status s = make(); !s.ok()) {
    Destroy(*c);
    return CannotBuild(build.what, build.name, s);
  }
  c->parameters = parameters;
  c->last_use = ++tick_;
  Conditional* found = c.get();
  cache.emplace(key, std::move(c));
  Trim(cache, found);
  return found;
}

absl::StatusOr<CudaDeviceControl::Conditional*> CudaDeviceControl::FindLoop(
    const DeviceLoop& loop, const std::string& key,
    const std::string& parameters, int device) {
  std::vector<const DeviceGraphControl*> controls;
  NestedControls(*loop.body, controls);
  const int nested = static_cast<int>(controls.size());
  auto add_check = [&](Conditional& c, NodeDeps deps) {
    return AddLoopCheckNode(
        c.graph, deps, c.handle,
        reinterpret_cast<const void*>(loop.condition.address),
        ConditionKindOf(loop.dtype), c.state, loop.max_iterations,
        /*reset=*/true, &c.check);
  };
  auto fill = [&](Conditional& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return FillLoop(c, loop);
  };
  return FindConditional(
      loops_, key, parameters, device,
      ConditionalBuild{"loop", loop.name, cudaGraphCondTypeWhile, 1, 0, nested,
                       add_check, fill});
}

absl::StatusOr<CudaDeviceControl::Conditional*> CudaDeviceControl::FindCase(
    const DeviceCase& choice, const std::string& key,
    const std::string& parameters, int device) {
  const uint32_t n = static_cast<uint32_t>(choice.branches.size());
  std::vector<const DeviceGraphControl*> controls;
  for (const DeviceGraph* branch : choice.branches) {
    if (branch != nullptr) NestedControls(*branch, controls);
  }
  const int nested = static_cast<int>(controls.size());
  auto add_check = [&](Conditional& c, NodeDeps deps) {
    return AddCaseSelectNode(
        c.graph, deps, c.handle,
        reinterpret_cast<const void*>(choice.selector.address),
        choice.dtype == DType::kInt64, n, c.state, &c.check);
  };
  auto fill = [&](Conditional& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return FillCase(c, choice);
  };
  // No branch (default n) unless the select kernel says otherwise.
  return FindConditional(
      cases_, key, parameters, device,
      ConditionalBuild{"case..of", choice.name, cudaGraphCondTypeSwitch, n, n,
                       nested, add_check, fill});
}

absl::Status CudaDeviceControl::LaunchConditional(Conditional& c,
                                                  StreamHandle stream,
                                                  ControlState* slot,
                                                  Report report) {
  if (c.launched) ++stats_.cache_hits;
  c.launched = true;
  absl::StatusOr<cudaStream_t> raw = hooks_.stream(stream);
  absl::Status s = raw.status();
  const int words = 1 + c.nested;
  if (s.ok()) s = SetReportNode(c.exec, c.report, c.state, slot, words);
  if (s.ok()) s = WEFT_CUDA_STATUS(cudaGraphLaunch(c.exec, *raw));
  if (!s.ok()) {
    slots_.Release(slot, words);
    return s;
  }
  WEFT_CUDA_RETURN_IF_ERROR(cudaEventRecord(c.done, *raw));
  // If the report cannot be enqueued the slot stays taken: the graph
  // enqueued above still writes to it.
  return hooks_.report(stream, std::move(report));
}

namespace {

std::string BranchParameters(const DeviceGraph* branch) {
  return Empty(branch) ? std::string() : DeviceGraphParameters(*branch);
}

}  // namespace

absl::Status CudaDeviceControl::LaunchLoop(const DeviceLoop& loop,
                                           StreamHandle stream, int device) {
  WEFT_RETURN_IF_ERROR(CheckDeviceLoop(loop, device));
  const std::string key =
      absl::StrCat("loop|", device, "|", scheduler::DTypeName(loop.dtype), "|",
                   loop.max_iterations, "|", DeviceGraphSignature(*loop.body));
  const std::string parameters = absl::StrCat(
      loop.condition.address, "|", DeviceGraphParameters(*loop.body));
  std::vector<NestedReport> nested =
      NestedReports({static_cast<const DeviceGraph*>(loop.body)});
  const int words = 1 + static_cast<int>(nested.size());
  WEFT_ASSIGN_OR_RETURN(ControlState * slot, slots_.Acquire(words));
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Conditional*> c = FindLoop(loop, key, parameters, device);
  if (!c.ok()) {
    slots_.Release(slot, words);
    return c.status();
  }
  Report report = [slots = &slots_, slot, words, nested = std::move(nested),
                   iterations = loop.iterations, name = loop.name,
                   max = loop.max_iterations](absl::Status status) {
    const ControlState state = *slot;
    const absl::Status inner =
        status.ok() ? ReportNested(slot + 1, nested) : absl::OkStatus();
    slots->Release(slot, words);
    if (!status.ok()) return absl::OkStatus();  // the stream's error stands
    iterations->store(state.value);
    if (!inner.ok()) return inner;
    if (state.flag != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("loop '", name, "' would exceed max_iterations ", max,
                       ": its condition still holds after ", state.value,
                       " iterations (evaluated on the device)"));
    }
    return absl::OkStatus();
  };
  return LaunchConditional(**c, stream, slot, std::move(report));
}

absl::Status CudaDeviceControl::LaunchCase(const DeviceCase& choice,
                                           StreamHandle stream, int device) {
  WEFT_RETURN_IF_ERROR(CheckDeviceCase(choice, device));
  if (choice.branches.empty()) {
    // Nothing can be chosen: no graph, only the report.
    return hooks_.report(stream, [taken = choice.taken](absl::Status) {
      taken->store(-1);
      return absl::OkStatus();
    });
  }
  const std::string key = CaseKey("case", choice, device);
  std::string parameters = absl::StrCat(choice.selector.address);
  for (const DeviceGraph* branch : choice.branches) {
    absl::StrAppend(&parameters, "|", Field(BranchParameters(branch)));
  }
  std::vector<NestedReport> nested =
      NestedReports(absl::MakeConstSpan(choice.branches));
  const int words = 1 + static_cast<int>(nested.size());
  WEFT_ASSIGN_OR_RETURN(ControlState * slot, slots_.Acquire(words));
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Conditional*> c = FindCase(choice, key, parameters, device);
  if (!c.ok()) {
    slots_.Release(slot, words);
    return c.status();
  }
  Report report = [slots = &slots_, slot, words, nested = std::move(nested),
                   taken = choice.taken](absl::Status status) {
    const ControlState state = *slot;
    const absl::Status inner =
        status.ok() ? ReportNested(slot + 1, nested) : absl::OkStatus();
    slots->Release(slot, words);
    taken->store(status.ok() ? state.value : -1);
    return inner;
  };
  return LaunchConditional(**c, stream, slot, std::move(report));
}
// For cuda_device_launch.cc.
template void CudaDeviceControl::Trim<CudaDeviceControl::Launcher>(
    absl::flat_hash_map<std::string, std::unique_ptr<Launcher>>& cache,
    const Launcher* keep);
template void CudaDeviceControl::Trim<CudaDeviceControl::TailLoop>(
    absl::flat_hash_map<std::string, std::unique_ptr<TailLoop>>& cache,
    const TailLoop* keep);

}  // namespace weft::runtime::cuda
