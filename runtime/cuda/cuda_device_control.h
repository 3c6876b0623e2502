// Device loops and device cases on CUDA (Backend::LaunchDeviceLoop and
// LaunchDeviceCase of the CUDA backend): control flow the GPU decides by
// itself, with CUDA graphs' conditional nodes.
//
// A loop is one CUDA graph: a check kernel, a WHILE conditional node and a
// report kernel. The check (control_kernels.h) reads element 0 of the
// condition, counts iterations in a device word and sets the node's value;
// it runs once before the node and again as the last node of the WHILE
// body, after the loop's body (the DeviceGraph, captured into the body by
// CudaGraphCache::CaptureToGraph). When the condition still holds after
// `max_iterations` iterations the check ends the loop and raises a flag.
// The report copies count and flag into a pinned host slot of this launch;
// a host callback then fills DeviceLoop::iterations and, when the flag is
// up, fails the stream's error scope with FAILED_PRECONDITION naming the
// loop. A case is the same with a SWITCH node of one body per branch
// (an empty body for a null branch) and a select kernel: a selector in
// [0, n) runs that branch, anything else none.
//
// The graphs run on the caller's stream: the body stream a Backend caller
// hands over stays unused on CUDA, since a conditional node's bodies run
// inside the graph, ordered like any graph node.
//
// Device launch (LaunchCaseByDeviceLaunch): the branches are executable
// graphs instantiated for device launch and uploaded; a one-kernel graph
// launched from the host reads the selector and launches the chosen
// branch from the device (fire and forget). Work after it on the stream
// waits for the branch: a fire-and-forget launch belongs to the execution
// of the graph that made it. New parameters update a branch's executable
// in place and upload it again, after waiting on the host for the case's
// previous launch (a launch still queued could otherwise start the branch
// while it is being replaced).
//
// Loops by tail launch (LaunchLoopByTailLaunch): the body is an
// executable graph instantiated for device launch and uploaded, ending in
// a tail check kernel; a one-kernel graph launched from the host checks
// the condition and launches the body fire and forget, and each tail
// check relaunches the body that runs it as a tail launch while the
// condition holds (seed 002's device-side loop: no conditional node, one
// graph launch per iteration, all from the device). A tail launch runs
// once its launching graph has completed and belongs to the same
// execution, so work after the loop on the stream waits for the last
// iteration. The kernel that ends the loop writes its count and flag into
// the launch's pinned host slot. New parameters update the body's
// executable in place and upload it again, after waiting on the host for
// the loop's previous launch, as for a case by device launch.
//
// Executables are cached per structure: the body's DeviceGraphSignature
// (each branch's for a case), the condition's dtype, max_iterations, the
// device. A launch with other parameters (addresses, scalars) re-captures
// the bodies into the cached graph and updates the executable in place
// (cudaGraphExecUpdate); only when CUDA refuses is it instantiated anew.
// Each executable's device word serves one launch at a time: CUDA runs
// launches of an executable one after another.
//
// Nested control. A loop's body or a case's branches may hold loops and
// cases themselves (DeviceGraphControl nodes), to any depth: each becomes
// a conditional node inside its parent's body graph, captured in place
// (its check or select kernel, then the node, whose bodies are captured on
// lanes of the next depth). Each nested control has a device word after
// the outermost one's, zeroed at the start of every launch and reported
// with it: a nested loop's DeviceGraphControl::result gets its iterations
// over all of its runs in the launch, a nested case's the branch of its
// last run (-1 for none). New parameters build such a conditional anew
// (CUDA keeps a body graph's conditional handles until the graph goes, so
// re-capturing in place would leave the old ones behind); the old one is
// destroyed once its last launch has completed, without waiting for it. A
// nested loop at its bound stops the whole launch (every check after it ends
// its loop) and the launch fails with FAILED_PRECONDITION naming that loop.
//
// Conditional bodies hold kernel, copy, memset, empty and conditional
// nodes only: a body whose ops allocate stream-ordered memory when
// captured (reduce_sum and dot over 4096 floats or more) cannot be built,
// and the launch fails with FAILED_PRECONDITION naming the loop or case,
// enqueueing nothing.
// Device-launched branches are further limited to device memory (no copies from
// or to pageable host memory) and hold no control nodes.
//
// Thread-safe (one mutex; builds and launches are serialized).
#ifndef WEFT_RUNTIME_CUDA_CUDA_DEVICE_CONTROL_H_
#define WEFT_RUNTIME_CUDA_CUDA_DEVICE_CONTROL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/backend.h"
#include "runtime/cuda/control_kernels.h"
#include "runtime/cuda/cuda_graph_cache.h"
#include "runtime/cuda/report_slots.h"
#include "runtime/device_graph.h"

namespace weft::runtime::cuda {

struct DeviceControlStats {
  uint64_t instantiations = 0;  // executables built (misses and rebuilds)
  uint64_t cache_hits = 0;      // launches of a cached executable
  uint64_t updates = 0;         // hits with new parameters, updated in place
  int cached = 0;
};

class CudaDeviceControl {
 public:
  // Runs on the backend's callback thread once the work before it on the
  // stream has completed, with that work's status; a non-OK return fails
  // the host callbacks added to the stream's error scope after it.
  using Report = std::function<absl::Status(absl::Status)>;

  // What device control needs from its backend.
  struct Hooks {
    std::function<absl::StatusOr<cudaStream_t>(StreamHandle)> stream;
    // CudaGraphCache::CaptureToGraph.
    std::function<absl::StatusOr<cudaGraph_t>(
        const DeviceGraph&, cudaGraph_t, const CudaGraphCache::CaptureTail&,
        const CudaGraphCache::CaptureControl&)>
        capture;
    // Enqueues `report` on `stream`, ordered before every host callback
    // added to the stream later.
    std::function<absl::Status(StreamHandle, Report)> report;
  };
  struct Options {
    int max_cached = 128;  // executables of each kind
  };

  CudaDeviceControl(Hooks hooks, Options options);
  // Destroys the executables and graphs (launches in flight complete
  // first) and frees the device words and host slots.
  ~CudaDeviceControl();
  CudaDeviceControl(const CudaDeviceControl&) = delete;
  CudaDeviceControl& operator=(const CudaDeviceControl&) = delete;

  // Backend::LaunchDeviceLoop / LaunchDeviceCase on `stream`, a stream of
  // `device`, which is current on the calling thread.
  absl::Status LaunchLoop(const DeviceLoop& loop, StreamHandle stream,
                          int device) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status LaunchCase(const DeviceCase& choice, StreamHandle stream,
                          int device) ABSL_LOCKS_EXCLUDED(mu_);
  // A case by device graph launch (see above). A branch that captures no
  // node is an empty one.
  absl::Status LaunchCaseByDeviceLaunch(const DeviceCase& choice,
                                        StreamHandle stream, int device)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A loop by tail launch (see above). The body holds no control nodes
  // and no copies to or from pageable host memory.
  absl::Status LaunchLoopByTailLaunch(const DeviceLoop& loop,
                                      StreamHandle stream, int device)
      ABSL_LOCKS_EXCLUDED(mu_);

  DeviceControlStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A loop or SWITCH case: the graph the executable was instantiated from
  // (kept: its nodes address the executable's nodes), its conditional
  // bodies and nodes.
  struct Conditional {
    int device = -1;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaGraphConditionalHandle handle = 0;
    std::vector<cudaGraph_t> bodies;  // owned by the conditional node
    cudaGraphNode_t reset = nullptr;  // zeroes the nested words, if any
    cudaGraphNode_t check = nullptr;  // loop check or case select
    cudaGraphNode_t report = nullptr;
    // Device words: the control's, then one per nested control in
    // preorder (NestedControls).
    ControlState* state = nullptr;
    int nested = 0;
    cudaEvent_t done = nullptr;  // recorded after each launch
    std::string parameters;
    uint64_t last_use = 0;
    bool launched = false;
  };
  // A case by device launch.
  struct Launcher {
    int device = -1;
    std::vector<cudaGraphExec_t> branches;  // null: empty branch
    cudaGraphExec_t* table = nullptr;       // the same, in device memory
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaGraphNode_t launch = nullptr;
    cudaEvent_t done = nullptr;           // recorded after each launch
    std::vector<std::string> parameters;  // per branch
    uint64_t last_use = 0;
    bool launched = false;
  };
  // A loop by tail launch.
  struct TailLoop {
    int device = -1;
    cudaGraphExec_t body = nullptr;  // instantiated for device launch
    cudaGraph_t graph = nullptr;     // the host-launched start graph
    cudaGraphExec_t exec = nullptr;
    cudaGraphNode_t start = nullptr;
    TailLoopState* state = nullptr;  // device word
    cudaEvent_t done = nullptr;      // recorded after each launch
    std::string parameters;
    uint64_t last_use = 0;
    bool launched = false;
  };
  using ConditionalCache =
      absl::flat_hash_map<std::string, std::unique_ptr<Conditional>>;
  // How a loop or a SWITCH case is built: a check node (loop check or case
  // select), then a conditional node of `type` with `size` bodies whose
  // handle starts at `default_value`, then a report node; `fill`
  // (re)captures the bodies and sets the check for new parameters.
  struct ConditionalBuild {
    absl::string_view what;  // "loop" or "case..of", for errors
    absl::string_view name;
    cudaGraphConditionalNodeType type;
    unsigned int size;
    unsigned int default_value;
    int nested;  // control nodes in the bodies, to any depth
    absl::FunctionRef<absl::Status(Conditional&, NodeDeps)> add_check;
    absl::FunctionRef<absl::Status(Conditional&)> fill;
  };

  // The cached executable of `key` in `cache`, brought to `parameters`, or
  // a new one built as `build` says. FAILED_PRECONDITION (CannotBuild) when
  // CUDA will not build it; nothing of it is cached then.
  absl::StatusOr<Conditional*> FindConditional(ConditionalCache& cache,
                                               const std::string& key,
                                               const std::string& parameters,
                                               int device,
                                               const ConditionalBuild& build)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FindConditional for a loop (WHILE) and a case (SWITCH).
  absl::StatusOr<Conditional*> FindLoop(const DeviceLoop& loop,
                                        const std::string& key,
                                        const std::string& parameters,
                                        int device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Conditional*> FindCase(const DeviceCase& choice,
                                        const std::string& key,
                                        const std::string& parameters,
                                        int device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // (Re)captures the loop's body and sets its check nodes; the graph only.
  absl::Status FillLoop(Conditional& c, const DeviceLoop& loop)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FillCase(Conditional& c, const DeviceCase& choice)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Captures a control node nested in `c`'s bodies (CudaGraphCache::
  // CaptureControl): its check or select kernel and conditional node onto
  // `lane`, with the device word after the `next` taken so far.
  absl::Status CaptureNested(Conditional& c, int& next,
                             const DeviceGraphControl& control,
                             cudaStream_t lane,
                             const CudaGraphCache::CaptureBody& capture_body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Captures `body` into `target` then `tail`, with its control nodes
  // through CaptureNested.
  absl::Status CaptureBody(Conditional& c, int& next, const DeviceGraph& body,
                           cudaGraph_t target,
                           const CudaGraphCache::CaptureTail& tail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Brings the executable to the graph's parameters: in place, or anew.
  absl::Status Refresh(Conditional& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Points the report at `slot` (1 + c.nested slots), launches, then
  // enqueues `report`. Takes `slot`: releases it when nothing was
  // launched.
  absl::Status LaunchConditional(Conditional& c, StreamHandle stream,
                                 ControlState* slot, Report report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<Launcher*> FindLauncher(const DeviceCase& choice,
                                         const std::string& key, int device,
                                         cudaStream_t stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Destroys the retired conditionals whose last launch has completed.
  void SweepRetired() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The cached loop of `key`, or a new one built for `loop`.
  absl::StatusOr<TailLoop*> FindTailLoop(const DeviceLoop& loop,
                                         const std::string& key, int device,
                                         cudaStream_t stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The loop's body followed by its tail check, captured into a new graph.
  absl::StatusOr<cudaGraph_t> CaptureTailBody(const DeviceLoop& loop,
                                              TailLoopState* state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename Entry>
  void Trim(absl::flat_hash_map<std::string, std::unique_ptr<Entry>>& cache,
            const Entry* keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Destroy(Conditional& c);
  static void Destroy(Launcher& l);
  static void Destroy(TailLoop& t);

  // Constant after construction.
  const Hooks hooks_;
  const Options options_;
  ReportSlots slots_;

  mutable absl::Mutex mu_;
  ConditionalCache loops_ ABSL_GUARDED_BY(mu_);
  ConditionalCache cases_ ABSL_GUARDED_BY(mu_);
  // Conditionals replaced while a launch of theirs may still run.
  std::vector<std::unique_ptr<Conditional>> retired_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<Launcher>> launchers_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<TailLoop>> tail_loops_
      ABSL_GUARDED_BY(mu_);
  uint64_t tick_ ABSL_GUARDED_BY(mu_) = 0;
  DeviceControlStats stats_ ABSL_GUARDED_BY(mu_);
};

// How element 0 of a condition of `dtype` is read on the device.
ConditionKind ConditionKindOf(scheduler::DType dtype);

// The control nodes inside `graph`'s nodes and their bodies, to any depth,
// in preorder (a control before the controls in its bodies): the order of
// a Conditional's nested device words.
void NestedControls(const DeviceGraph& graph,
                    std::vector<const DeviceGraphControl*>& out);

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_CUDA_DEVICE_CONTROL_H_
