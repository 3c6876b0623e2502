// The device side of device loops and device cases (Backend::
// LaunchDeviceLoop / LaunchDeviceCase on CUDA): single-thread kernels that
// read a condition or selector from device memory, decide, and tell CUDA's
// graph machinery what to run next, plus the graph-node plumbing that puts
// them into CUDA graphs.
//
// - The loop check reads element 0 of the condition and sets a WHILE
//   conditional node's value: 1 (run the body once more) while the element
//   is nonzero and fewer than `max_iterations` iterations have run, 0
//   otherwise. It counts iterations in a ControlState in device memory and
//   raises `flag` when the condition still holds at the bound.
// - The case select reads an INT32 or INT64 selector and sets a SWITCH
//   conditional node's value to it when it lies in [0, branches), or to
//   `branches` (no body) otherwise; ControlState::value is the branch taken
//   or -1.
// - The case launch reads the selector and launches the chosen branch's
//   executable graph from the device (cudaGraphLaunch with
//   cudaStreamGraphFireAndForget), writing the branch taken and the launch's
//   result straight into a ControlState in pinned, mapped host memory.
// - The nested loop check and nested case select do the same for a loop or
//   case inside another's body. A nested loop counts its iterations over
//   all of its runs in `value` and those of its current run in `run`; a
//   nested case counts its runs in `run` and keeps its last branch in
//   `value`. Both share an abort word with the outermost control (its
//   ControlState::error): a nested loop at its bound raises its flag and
//   the abort word, after which every check of the launch ends its loop
//   and every select picks no branch, so the whole launch winds down.
// - A loop by tail launch: the start kernel (in a host-launched graph)
//   checks the condition before the first iteration and launches the
//   body's executable graph, instantiated for device launch, fire and
//   forget; the tail check at the end of that body checks it again and
//   relaunches the body (cudaGetCurrentGraphExec) as a tail launch, which
//   runs once the body has completed. Both count iterations in a
//   TailLoopState and, when the loop ends, copy its ControlState to the
//   launch's pinned, mapped host slot.
// - The report copies ControlStates from device memory into pinned,
//   mapped host slots, so that a host callback after the graph can read
//   them.
//
// cudaGraphSetConditional and the device-side cudaGraphLaunch are builtins
// of the device runtime that ptxas resolves: the kernels need neither
// relocatable device code nor libcudadevrt.
//
// Plain C++ like kernels.h: the caller makes the device current and passes
// device (or mapped host) pointers that stay valid while the graphs run.
#ifndef WEFT_RUNTIME_CUDA_CONTROL_KERNELS_H_
#define WEFT_RUNTIME_CUDA_CONTROL_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace weft::runtime::cuda {

// How element 0 of a condition buffer is read (scheduler::DType on the
// device): its width in bytes and whether it is floating point.
enum class ConditionKind : int32_t {
  kByte = 1,  // BYTES: the first byte
  kInt32 = 4,
  kInt64 = 8,
  kFloat32 = -4,  // nonzero compares as a float: -0.0 is zero, NaN is not
  kFloat64 = -8,
};

// What a control kernel leaves for the host: a loop's iterations and
// whether it hit its bound (flag 1); a case's branch taken (-1 for none)
// and, for the device-launch path, the cudaError_t of the branch's launch
// in `error` (0 when it launched or none was chosen). The outermost
// control's `error` is the abort word of the controls nested in it, and
// `run` counts what the nested kernels say above.
struct ControlState {
  int64_t value = 0;
  int32_t flag = 0;
  int32_t error = 0;
  int64_t run = 0;
};

// A loop by tail launch's device word: its ControlState (iterations, the
// bound's flag, a failed relaunch's cudaError_t in `error`) and where the
// current launch reports it.
struct TailLoopState {
  ControlState state;
  ControlState* out = nullptr;
};

// A single-thread kernel node's placement in a graph.
struct NodeDeps {
  const cudaGraphNode_t* deps = nullptr;
  size_t count = 0;
};

// The loop check as a kernel node of `graph` (the check before the first
// iteration: with `reset` it zeroes `state` first) or captured on `stream`
// (the check at the end of each iteration, inside the WHILE body).
absl::Status AddLoopCheckNode(cudaGraph_t graph, NodeDeps deps,
                              cudaGraphConditionalHandle handle,
                              const void* condition, ConditionKind kind,
                              ControlState* state, uint64_t max_iterations,
                              bool reset, cudaGraphNode_t* node);
absl::Status LaunchLoopCheck(cudaGraphConditionalHandle handle,
                             const void* condition, ConditionKind kind,
                             ControlState* state, uint64_t max_iterations,
                             cudaStream_t stream);
// New parameters (a new condition address, say) for a loop check node of
// a graph; an executable instantiated from it takes them on its next
// cudaGraphExecUpdate.
absl::Status SetLoopCheckNode(cudaGraphNode_t node,
                              cudaGraphConditionalHandle handle,
                              const void* condition, ConditionKind kind,
                              ControlState* state, uint64_t max_iterations,
                              bool reset);

// The check of a loop nested in another control's body, captured on
// `stream`: before the loop's conditional node with `start` (a new run),
// and at the end of its body without. `abort` is the outermost control's
// abort word.
absl::Status LaunchNestedLoopCheck(cudaGraphConditionalHandle handle,
                                   const void* condition, ConditionKind kind,
                                   ControlState* state, uint64_t max_iterations,
                                   bool start, int32_t* abort,
                                   cudaStream_t stream);
// The select of a nested case, captured on `stream` before its node.
absl::Status LaunchNestedCaseSelect(cudaGraphConditionalHandle handle,
                                    const void* selector, bool is_int64,
                                    uint32_t branches, ControlState* state,
                                    int32_t* abort, cudaStream_t stream);

// A loop by tail launch: the start kernel as a node of the host-launched
// graph (`body` is the body's executable, instantiated for device launch
// and uploaded; `out` pinned, mapped host memory), its parameters updated
// in an executable per launch, and the tail check captured on `stream` at
// the end of the body.
absl::Status AddTailLoopStartNode(cudaGraph_t graph, NodeDeps deps,
                                  const void* condition, ConditionKind kind,
                                  TailLoopState* state, uint64_t max_iterations,
                                  cudaGraphExec_t body, ControlState* out,
                                  cudaGraphNode_t* node);
absl::Status SetTailLoopStartNode(cudaGraphExec_t exec, cudaGraphNode_t node,
                                  const void* condition, ConditionKind kind,
                                  TailLoopState* state, uint64_t max_iterations,
                                  cudaGraphExec_t body, ControlState* out);
absl::Status LaunchTailLoopCheck(const void* condition, ConditionKind kind,
                                 TailLoopState* state, uint64_t max_iterations,
                                 cudaStream_t stream);

// The case select as a kernel node, and new parameters for one (as
// SetLoopCheckNode). `is_int64` picks the selector's width.
absl::Status AddCaseSelectNode(cudaGraph_t graph, NodeDeps deps,
                               cudaGraphConditionalHandle handle,
                               const void* selector, bool is_int64,
                               uint32_t branches, ControlState* state,
                               cudaGraphNode_t* node);
absl::Status SetCaseSelectNode(cudaGraphNode_t node,
                               cudaGraphConditionalHandle handle,
                               const void* selector, bool is_int64,
                               uint32_t branches, ControlState* state);

// The case launch as a kernel node. `execs` is a device array of
// `branches` executable graphs instantiated for device launch and
// uploaded; a null entry is an empty branch. `out` is pinned, mapped host
// memory. SetCaseLaunchNode updates the node of an executable in place.
absl::Status AddCaseLaunchNode(cudaGraph_t graph, NodeDeps deps,
                               const void* selector, bool is_int64,
                               const cudaGraphExec_t* execs, uint32_t branches,
                               ControlState* out, cudaGraphNode_t* node);
absl::Status SetCaseLaunchNode(cudaGraphExec_t exec, cudaGraphNode_t node,
                               const void* selector, bool is_int64,
                               const cudaGraphExec_t* execs, uint32_t branches,
                               ControlState* out);

// The report (copies `count` states from `state` to `out`, pinned mapped
// host memory) as a kernel node, and its destination updated in place per
// launch.
absl::Status AddReportNode(cudaGraph_t graph, NodeDeps deps,
                           const ControlState* state, ControlState* out,
                           int32_t count, cudaGraphNode_t* node);
absl::Status SetReportNode(cudaGraphExec_t exec, cudaGraphNode_t node,
                           const ControlState* state, ControlState* out,
                           int32_t count);

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_CONTROL_KERNELS_H_
