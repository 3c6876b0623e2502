// Kernels of device loops and device cases. Built by nvcc (see BUILD);
// everything host code needs is declared in control_kernels.h.
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/control_kernels.h"
#include "runtime/cuda/cuda_status.h"

namespace weft::runtime::cuda {
namespace {

__device__ bool Nonzero(const void* data, int32_t kind) {
  switch (kind) {
    case static_cast<int32_t>(ConditionKind::kByte):
      return *static_cast<const unsigned char*>(data) != 0;
    case static_cast<int32_t>(ConditionKind::kInt32):
      return *static_cast<const int32_t*>(data) != 0;
    case static_cast<int32_t>(ConditionKind::kInt64):
      return *static_cast<const int64_t*>(data) != 0;
    case static_cast<int32_t>(ConditionKind::kFloat32):
      return *static_cast<const float*>(data) != 0.0f;
    case static_cast<int32_t>(ConditionKind::kFloat64):
      return *static_cast<const double*>(data) != 0.0;
  }
  return false;
}

__device__ int64_t Selector(const void* data, int32_t is_int64) {
  return is_int64 ? *static_cast<const int64_t*>(data)
                  : static_cast<int64_t>(*static_cast<const int32_t*>(data));
}

// One thread. Runs before every iteration: before the first (with `reset`)
// and at the end of each body.
__global__ void LoopCheckKernel(cudaGraphConditionalHandle handle,
                                const void* condition, int32_t kind,
                                ControlState* state,
                                unsigned long long max_iterations,
                                int32_t reset) {
  if (reset) {
    state->value = 0;
    state->flag = 0;
    state->error = 0;
    state->run = 0;
  }
  unsigned int again = 0;
  // A nested loop at its bound aborts the launch (`error`, see the header).
  if (state->error == 0 && Nonzero(condition, kind)) {
    if (static_cast<unsigned long long>(state->value) >= max_iterations) {
      state->flag = 1;
    } else {
      ++state->value;
      again = 1;
    }
  }
  cudaGraphSetConditional(handle, again);
}

__global__ void NestedLoopCheckKernel(cudaGraphConditionalHandle handle,
                                      const void* condition, int32_t kind,
                                      ControlState* state,
                                      unsigned long long max_iterations,
                                      int32_t start, int32_t* abort) {
  if (start) state->run = 0;
  unsigned int again = 0;
  if (*abort == 0 && Nonzero(condition, kind)) {
    if (static_cast<unsigned long long>(state->run) >= max_iterations) {
      state->flag = 1;
      *abort = 1;
    } else {
      ++state->run;
      ++state->value;
      again = 1;
    }
  }
  cudaGraphSetConditional(handle, again);
}

__global__ void NestedCaseSelectKernel(cudaGraphConditionalHandle handle,
                                       const void* selector, int32_t is_int64,
                                       unsigned int branches,
                                       ControlState* state,
                                       const int32_t* abort) {
  unsigned int chosen = branches;
  if (*abort == 0) {
    const int64_t value = Selector(selector, is_int64);
    const bool in_range = value >= 0 && value < static_cast<int64_t>(branches);
    ++state->run;
    state->value = in_range ? value : -1;
    if (in_range) chosen = static_cast<unsigned int>(value);
  }
  cudaGraphSetConditional(handle, chosen);
}

__device__ void EndTailLoop(TailLoopState* loop) {
  *loop->out = loop->state;
  __threadfence_system();
}

// Before the first iteration of a loop by tail launch.
__global__ void TailLoopStartKernel(const void* condition, int32_t kind,
                                    TailLoopState* loop,
                                    unsigned long long max_iterations,
                                    cudaGraphExec_t body, ControlState* out) {
  loop->state = ControlState{};
  loop->out = out;
  if (Nonzero(condition, kind)) {
    if (max_iterations == 0) {
      loop->state.flag = 1;
    } else {
      loop->state.value = 1;
      const cudaError_t launched =
          cudaGraphLaunch(body, cudaStreamGraphFireAndForget);
      if (launched == cudaSuccess) return;
      loop->state.error = static_cast<int32_t>(launched);
    }
  }
  EndTailLoop(loop);
}

// The last node of the body's graph: decides on the next iteration.
__global__ void TailLoopCheckKernel(const void* condition, int32_t kind,
                                    TailLoopState* loop,
                                    unsigned long long max_iterations) {
  if (Nonzero(condition, kind)) {
    if (static_cast<unsigned long long>(loop->state.value) >= max_iterations) {
      loop->state.flag = 1;
    } else {
      ++loop->state.value;
      const cudaError_t launched =
          cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch);
      if (launched == cudaSuccess) return;
      loop->state.error = static_cast<int32_t>(launched);
    }
  }
  EndTailLoop(loop);
}

__global__ void CaseSelectKernel(cudaGraphConditionalHandle handle,
                                 const void* selector, int32_t is_int64,
                                 unsigned int branches, ControlState* state) {
  const int64_t value = Selector(selector, is_int64);
  const bool in_range = value >= 0 && value < static_cast<int64_t>(branches);
  state->value = in_range ? value : -1;
  state->flag = 0;
  state->error = 0;
  cudaGraphSetConditional(
      handle, in_range ? static_cast<unsigned int>(value) : branches);
}

__global__ void CaseLaunchKernel(const void* selector, int32_t is_int64,
                                 const cudaGraphExec_t* execs,
                                 unsigned int branches, ControlState* out) {
  const int64_t value = Selector(selector, is_int64);
  int32_t error = 0;
  int64_t taken = -1;
  if (value >= 0 && value < static_cast<int64_t>(branches)) {
    taken = value;
    cudaGraphExec_t exec = execs[value];
    if (exec != nullptr) {
      error = static_cast<int32_t>(
          cudaGraphLaunch(exec, cudaStreamGraphFireAndForget));
    }
  }
  out->value = taken;
  out->flag = 0;
  out->error = error;
  __threadfence_system();
}

__global__ void ReportKernel(const ControlState* state, ControlState* out,
                             int32_t count) {
  for (int32_t i = 0; i < count; ++i) out[i] = state[i];
  __threadfence_system();
}

// Kernel node parameters of a single-thread kernel. `args` points at the
// argument values, in order; they only need to live until CUDA has copied
// them (the call that takes the parameters).
cudaKernelNodeParams SingleThread(const void* func, void** args) {
  cudaKernelNodeParams params = {};
  params.func = const_cast<void*>(func);
  params.gridDim = dim3(1);
  params.blockDim = dim3(1);
  params.sharedMemBytes = 0;
  params.kernelParams = args;
  params.extra = nullptr;
  return params;
}

// The launch configuration of a single-thread kernel on `stream`.
cudaLaunchConfig_t OneThreadOn(cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(1);
  config.blockDim = dim3(1);
  config.stream = stream;
  return config;
}

absl::Status AddNode(cudaGraph_t graph, NodeDeps deps,
                     const cudaKernelNodeParams& params,
                     cudaGraphNode_t* node) {
  return WEFT_CUDA_STATUS(
      cudaGraphAddKernelNode(node, graph, deps.deps, deps.count, &params));
}

absl::Status SetNode(cudaGraphExec_t exec, cudaGraphNode_t node,
                     const cudaKernelNodeParams& params) {
  return WEFT_CUDA_STATUS(
      cudaGraphExecKernelNodeSetParams(exec, node, &params));
}

// The argument values of each kernel, as locals whose addresses make the
// kernelParams array.
struct LoopCheckArgs {
  cudaGraphConditionalHandle handle;
  const void* condition;
  int32_t kind;
  ControlState* state;
  unsigned long long max_iterations;
  int32_t reset;
  void* ptrs[6];

  LoopCheckArgs(cudaGraphConditionalHandle h, const void* c, ConditionKind k,
                ControlState* s, uint64_t max, bool r)
      : handle(h),
        condition(c),
        kind(static_cast<int32_t>(k)),
        state(s),
        max_iterations(max),
        reset(r ? 1 : 0),
        ptrs{&handle, &condition, &kind, &state, &max_iterations, &reset} {}
  LoopCheckArgs(const LoopCheckArgs&) = delete;
  LoopCheckArgs& operator=(const LoopCheckArgs&) = delete;

  cudaKernelNodeParams params() {
    return SingleThread(reinterpret_cast<const void*>(&LoopCheckKernel), ptrs);
  }
};

struct CaseSelectArgs {
  cudaGraphConditionalHandle handle;
  const void* selector;
  int32_t is_int64;
  unsigned int branches;
  ControlState* state;
  void* ptrs[5];

  CaseSelectArgs(cudaGraphConditionalHandle h, const void* sel, bool wide,
                 uint32_t n, ControlState* s)
      : handle(h),
        selector(sel),
        is_int64(wide ? 1 : 0),
        branches(n),
        state(s),
        ptrs{&handle, &selector, &is_int64, &branches, &state} {}
  CaseSelectArgs(const CaseSelectArgs&) = delete;
  CaseSelectArgs& operator=(const CaseSelectArgs&) = delete;

  cudaKernelNodeParams params() {
    return SingleThread(reinterpret_cast<const void*>(&CaseSelectKernel), ptrs);
  }
};

struct TailLoopStartArgs {
  const void* condition;
  int32_t kind;
  TailLoopState* loop;
  unsigned long long max_iterations;
  cudaGraphExec_t body;
  ControlState* out;
  void* ptrs[6];

  TailLoopStartArgs(const void* c, ConditionKind k, TailLoopState* l,
                    uint64_t max, cudaGraphExec_t b, ControlState* o)
      : condition(c),
        kind(static_cast<int32_t>(k)),
        loop(l),
        max_iterations(max),
        body(b),
        out(o),
        ptrs{&condition, &kind, &loop, &max_iterations, &body, &out} {}
  TailLoopStartArgs(const TailLoopStartArgs&) = delete;
  TailLoopStartArgs& operator=(const TailLoopStartArgs&) = delete;

  cudaKernelNodeParams params() {
    return SingleThread(reinterpret_cast<const void*>(&TailLoopStartKernel),
                        ptrs);
  }
};

struct CaseLaunchArgs {
  const void* selector;
  int32_t is_int64;
  const cudaGraphExec_t* execs;
  unsigned int branches;
  ControlState* out;
  void* ptrs[5];

  CaseLaunchArgs(const void* sel, bool wide, const cudaGraphExec_t* e,
                 uint32_t n, ControlState* o)
      : selector(sel),
        is_int64(wide ? 1 : 0),
        execs(e),
        branches(n),
        out(o),
        ptrs{&selector, &is_int64, &execs, &branches, &out} {}
  CaseLaunchArgs(const CaseLaunchArgs&) = delete;
  CaseLaunchArgs& operator=(const CaseLaunchArgs&) = delete;

  cudaKernelNodeParams params() {
    return SingleThread(reinterpret_cast<const void*>(&CaseLaunchKernel), ptrs);
  }
};

struct ReportArgs {
  const ControlState* state;
  ControlState* out;
  int32_t count;
  void* ptrs[3];

  ReportArgs(const ControlState* s, ControlState* o, int32_t n)
      : state(s), out(o), count(n), ptrs{&state, &out, &count} {}
  ReportArgs(const ReportArgs&) = delete;
  ReportArgs& operator=(const ReportArgs&) = delete;

  cudaKernelNodeParams params() {
    return SingleThread(reinterpret_cast<const void*>(&ReportKernel), ptrs);
  }
};

}  // namespace

absl::Status AddLoopCheckNode(cudaGraph_t graph, NodeDeps deps,
                              cudaGraphConditionalHandle handle,
                              const void* condition, ConditionKind kind,
                              ControlState* state, uint64_t max_iterations,
                              bool reset, cudaGraphNode_t* node) {
  LoopCheckArgs args(handle, condition, kind, state, max_iterations, reset);
  return AddNode(graph, deps, args.params(), node);
}

absl::Status LaunchLoopCheck(cudaGraphConditionalHandle handle,
                             const void* condition, ConditionKind kind,
                             ControlState* state, uint64_t max_iterations,
                             cudaStream_t stream) {
  cudaLaunchConfig_t config = OneThreadOn(stream);
  return WEFT_CUDA_STATUS(cudaLaunchKernelEx(
      &config, LoopCheckKernel, handle, condition, static_cast<int32_t>(kind),
      state, static_cast<unsigned long long>(max_iterations), int32_t{0}));
}

absl::Status LaunchNestedLoopCheck(cudaGraphConditionalHandle handle,
                                   const void* condition, ConditionKind kind,
                                   ControlState* state, uint64_t max_iterations,
                                   bool start, int32_t* abort,
                                   cudaStream_t stream) {
  cudaLaunchConfig_t config = OneThreadOn(stream);
  return WEFT_CUDA_STATUS(
      cudaLaunchKernelEx(&config, NestedLoopCheckKernel, handle, condition,
                         static_cast<int32_t>(kind), state,
                         static_cast<unsigned long long>(max_iterations),
                         static_cast<int32_t>(start ? 1 : 0), abort));
}

absl::Status LaunchNestedCaseSelect(cudaGraphConditionalHandle handle,
                                    const void* selector, bool is_int64,
                                    uint32_t branches, ControlState* state,
                                    int32_t* abort, cudaStream_t stream) {
  cudaLaunchConfig_t config = OneThreadOn(stream);
  return WEFT_CUDA_STATUS(
      cudaLaunchKernelEx(&config, NestedCaseSelectKernel, handle, selector,
                         static_cast<int32_t>(is_int64 ? 1 : 0),
                         static_cast<unsigned int>(branches), state,
                         static_cast<const int32_t*>(abort)));
}

absl::Status SetLoopCheckNode(cudaGraphNode_t node,
                              cudaGraphConditionalHandle handle,
                              const void* condition, ConditionKind kind,
                              ControlState* state, uint64_t max_iterations,
                              bool reset) {
  LoopCheckArgs args(handle, condition, kind, state, max_iterations, reset);
  const cudaKernelNodeParams params = args.params();
  return WEFT_CUDA_STATUS(cudaGraphKernelNodeSetParams(node, &params));
}

absl::Status AddTailLoopStartNode(cudaGraph_t graph, NodeDeps deps,
                                  const void* condition, ConditionKind kind,
                                  TailLoopState* state,
                                  uint64_t max_iterations,
                                  cudaGraphExec_t body, ControlState* out,
                                  cudaGraphNode_t* node) {
  TailLoopStartArgs args(condition, kind, state, max_iterations, body, out);
  return AddNode(graph, deps, args.params(), node);
}

absl::Status SetTailLoopStartNode(cudaGraphExec_t exec, cudaGraphNode_t node,
                                  const void* condition, ConditionKind kind,
                                  TailLoopState* state,
                                  uint64_t max_iterations,
                                  cudaGraphExec_t body, ControlState* out) {
  TailLoopStartArgs args(condition, kind, state, max_iterations, body, out);
  return SetNode(exec, node, args.params());
}

absl::Status LaunchTailLoopCheck(const void* condition, ConditionKind kind,
                                 TailLoopState* state, uint64_t max_iterations,
                                 cudaStream_t stream) {
  cudaLaunchConfig_t config = OneThreadOn(stream);
  return WEFT_CUDA_STATUS(cudaLaunchKernelEx(
      &config, TailLoopCheckKernel, condition, static_cast<int32_t>(kind),
      state, static_cast<unsigned long long>(max_iterations)));
}

absl::Status AddCaseSelectNode(cudaGraph_t graph, NodeDeps deps,
                               cudaGraphConditionalHandle handle,
                               const void* selector, bool is_int64,
                               uint32_t branches, ControlState* state,
                               cudaGraphNode_t* node) {
  CaseSelectArgs args(handle, selector, is_int64, branches, state);
  return AddNode(graph, deps, args.params(), node);
}

absl::Status SetCaseSelectNode(cudaGraphNode_t node,
                               cudaGraphConditionalHandle handle,
                               const void* selector, bool is_int64,
                               uint32_t branches, ControlState* state) {
  CaseSelectArgs args(handle, selector, is_int64, branches, state);
  const cudaKernelNodeParams params = args.params();
  return WEFT_CUDA_STATUS(cudaGraphKernelNodeSetParams(node, &params));
}

absl::Status AddCaseLaunchNode(cudaGraph_t graph, NodeDeps deps,
                               const void* selector, bool is_int64,
                               const cudaGraphExec_t* execs, uint32_t branches,
                               ControlState* out, cudaGraphNode_t* node) {
  CaseLaunchArgs args(selector, is_int64, execs, branches, out);
  return AddNode(graph, deps, args.params(), node);
}

absl::Status SetCaseLaunchNode(cudaGraphExec_t exec, cudaGraphNode_t node,
                               const void* selector, bool is_int64,
                               const cudaGraphExec_t* execs, uint32_t branches,
                               ControlState* out) {
  CaseLaunchArgs args(selector, is_int64, execs, branches, out);
  return SetNode(exec, node, args.params());
}

absl::Status AddReportNode(cudaGraph_t graph, NodeDeps deps,
                           const ControlState* state, ControlState* out,
                           int32_t count, cudaGraphNode_t* node) {
  ReportArgs args(state, out, count);
  return AddNode(graph, deps, args.params(), node);
}

absl::Status SetReportNode(cudaGraphExec_t exec, cudaGraphNode_t node,
                           const ControlState* state, ControlState* out,
                           int32_t count) {
  ReportArgs args(state, out, count);
  return SetNode(exec, node, args.params());
}

}  // namespace weft::runtime::cuda
