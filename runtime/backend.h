// The device abstraction every executor runs on (the leveldb Env pattern).
//
// CUDA-shaped semantics behind opaque handles: devices own streams (FIFO
// queues of work), events (recorded on a stream, waited on by other streams,
// queried by the host), memory, copies and kernel launches. Every call is
// asynchronous with respect to the host unless its name says Synchronize:
// it enqueues work and returns. Errors of enqueued work surface through the
// stream's host callbacks and synchronization calls. Two implementations:
// SimBackend (CPU threads, modelled timing) and CudaBackend (real GPUs).
//
// Implementations are thread-safe: any thread may call any method.
#ifndef WEFT_RUNTIME_BACKEND_H_
#define WEFT_RUNTIME_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/host_buffer.h"
#include "scheduler/graph.h"

namespace weft::runtime {

struct DeviceGraph;  // device_graph.h

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string uuid;  // GPU-xxxxxxxx-... form, joins with dcgm-exporter
  bool simulated = false;
  uint64_t memory_total_bytes = 0;
  // What jobs may hold: on CUDA, the device's free memory once the backend
  // has made its context there (other processes and the context keep the
  // rest); 0: all of memory_total_bytes.
  uint64_t memory_usable_bytes = 0;
};

// The memory jobs may hold on the device of `info`.
inline uint64_t UsableMemoryBytes(const DeviceInfo& info) {
  return info.memory_usable_bytes > 0 ? info.memory_usable_bytes
                                      : info.memory_total_bytes;
}

// Opaque handles. Zero is never a valid handle.
struct StreamHandle {
  uint64_t value = 0;
  bool operator==(const StreamHandle& o) const { return value == o.value; }
};
struct EventHandle {
  uint64_t value = 0;
  bool operator==(const EventHandle& o) const { return value == o.value; }
};
struct GateHandle {
  uint64_t value = 0;
  bool operator==(const GateHandle& o) const { return value == o.value; }
};

// An address in one device's memory.
struct DevicePtr {
  int device = -1;
  uint64_t address = 0;
};

// A kernel argument: a device buffer or a typed scalar.
struct DeviceBufferArg {
  DevicePtr ptr;
  uint64_t size_bytes = 0;
  scheduler::DType dtype = scheduler::DType::kBytes;
  scheduler::Access access = scheduler::Access::kRead;
};
using KernelArg =
    std::variant<DeviceBufferArg, float, double, int32_t, int64_t>;

// A launch of a built-in op (see scheduler/op_signatures.h for the ops and
// their argument lists), or of a user kernel: then `op` is
// scheduler::kUserKernelOp, `user_kernel` and `module` are set and `args`
// are the kernel's parameters in order.
struct KernelLaunch {
  std::string op;
  std::vector<KernelArg> args;
  double cost_us = 0;  // the node's estimated cost; `spin` runs this long
  // The share of the device the kernel keeps busy (scheduler/occupancy.h);
  // simulated devices run kernels side by side while their units fit.
  int32_t occupancy_units = scheduler::kOccupancyUnits;
  // The node's engine. A simulated device runs a kCopy launch on its
  // device-to-device copy engine instead of beside its kernels; every
  // other engine shares the kernels' capacity by occupancy_units.
  scheduler::Engine engine = scheduler::Engine::kCompute;
  // User kernels only. Not owned; they point into the job's Graph and need
  // stay valid only during the Launch call (a backend copies what it keeps).
  const scheduler::KernelSpec* user_kernel = nullptr;
  const scheduler::ModuleSpec* module = nullptr;
};

// A loop the device runs by itself (a CUDA graph's WHILE conditional node):
// before every iteration the device reads element 0 of `condition` (a
// buffer of `dtype` on the body's device) and, while it is nonzero, runs
// `body` once more, at most `max_iterations` times; one more iteration
// fails the loop with FAILED_PRECONDITION naming `name`. `iterations`
// holds the count once the loop's completion is reported.
struct DeviceLoop {
  std::string name;
  DeviceGraph* body = nullptr;  // not owned; valid until Launch returns
  DevicePtr condition;
  scheduler::DType dtype = scheduler::DType::kInt32;
  uint32_t max_iterations = 0;
  std::shared_ptr<std::atomic<int64_t>> iterations;
};

// A case..of the device decides by itself (a CUDA graph's SWITCH
// conditional node): once the work before it has completed, the device
// reads element 0 of `selector` (INT32 or INT64, on the branches' device)
// and runs `branches[i]` for a value i in [0, branches.size()), or no
// branch for any other value. `taken` holds the branch run (or -1 for
// none) once the case's completion is reported. A null branch is an empty
// one.
struct DeviceCase {
  std::string name;
  std::vector<DeviceGraph*> branches;  // not owned; valid until Launch returns
  DevicePtr selector;
  scheduler::DType dtype = scheduler::DType::kInt32;
  std::shared_ptr<std::atomic<int64_t>> taken;
};

// A point in a stream's work that the backend times by itself
// (Backend::Stamp): what an event recorded there and read with EventTimeUs
// would say, without the event. Thread-safe.
class DeviceStamp {
 public:
  virtual ~DeviceStamp() = default;
  // Once the work enqueued on its stream before it has completed, the
  // device time at which it did, on the clock of Backend::EventTimeUs;
  // nullopt until then (and for good where that work was dropped).
  virtual std::optional<double> TimeUs() const = 0;
};

// Called once, on a backend thread, after all work enqueued on the stream
// before it has completed. `status` is the first error of that work, or OK.
// Must not block; post heavier work elsewhere.
using HostCallback = std::function<void(absl::Status status)>;

class Backend {
 public:
  virtual ~Backend() = default;

  virtual int device_count() const = 0;
  virtual DeviceInfo device_info(int device) const = 0;
  virtual uint64_t memory_used_bytes(int device) const = 0;

  virtual absl::StatusOr<StreamHandle> CreateStream(int device) = 0;
  // REQUIRES: no work pending on the stream.
  virtual absl::Status DestroyStream(StreamHandle stream) = 0;

  virtual absl::StatusOr<EventHandle> CreateEvent(int device) = 0;
  virtual absl::Status DestroyEvent(EventHandle event) = 0;
  // Captures the work enqueued on `stream` so far; the event completes when
  // that work has completed. Re-recording replaces the capture.
  virtual absl::Status RecordEvent(EventHandle event, StreamHandle stream) = 0;
  // Work enqueued on `stream` after this call waits for the event's last
  // recorded capture (a no-op when never recorded, as in CUDA).
  virtual absl::Status StreamWaitEvent(StreamHandle stream,
                                       EventHandle event) = 0;
  // True when the event's capture has completed.
  virtual absl::StatusOr<bool> QueryEvent(EventHandle event) = 0;
  // Blocks the caller until the stream's enqueued work has completed.
  virtual absl::Status SynchronizeStream(StreamHandle stream) = 0;

  // RESOURCE_EXHAUSTED when the device is out of memory.
  virtual absl::StatusOr<DevicePtr> Allocate(int device, uint64_t bytes) = 0;
  virtual absl::Status Free(DevicePtr ptr) = 0;

  // Asynchronous copies ordered on `stream`. Host memory must stay valid
  // until the copy has completed.
  virtual absl::Status CopyHostToDevice(DevicePtr dst, const void* src,
                                        uint64_t bytes,
                                        StreamHandle stream) = 0;
  virtual absl::Status CopyDeviceToHost(void* dst, DevicePtr src,
                                        uint64_t bytes,
                                        StreamHandle stream) = 0;
  virtual absl::Status CopyDeviceToDevice(DevicePtr dst, DevicePtr src,
                                          uint64_t bytes,
                                          StreamHandle stream) = 0;
  // An upload of `bytes` with a zero tail: the first `src_bytes` from `src`,
  // zeros after them (INVALID_ARGUMENT when src_bytes > bytes). Where a
  // backend models time (the simulator) it is one copy of `bytes`, timed
  // and booked as CopyHostToDevice of `bytes` would be. The default: the
  // upload of the data, then the built-in `fill` with zeros over the tail.
  virtual absl::Status CopyHostToDevicePadded(DevicePtr dst, const void* src,
                                              uint64_t src_bytes,
                                              uint64_t bytes,
                                              StreamHandle stream) {
    if (src_bytes > bytes) {
      return absl::InvalidArgumentError(
          "an upload's data is larger than the upload");
    }
    if (src_bytes == bytes) return CopyHostToDevice(dst, src, bytes, stream);
    if (src_bytes > 0) {
      absl::Status status = CopyHostToDevice(dst, src, src_bytes, stream);
      if (!status.ok()) return status;
    }
    KernelLaunch zeros;
    zeros.op = "fill";
    zeros.args = {
        DeviceBufferArg{DevicePtr{dst.device, dst.address + src_bytes},
                        bytes - src_bytes, scheduler::DType::kBytes,
                        scheduler::Access::kWrite},
        0.0};
    return Launch(zeros, stream);
  }

  // A download of `bytes` into `dst` (HostBuffer: the bytes up to where
  // the data ends, zeros implicit after). Where a backend models time it
  // is one copy of `bytes`, timed and booked as CopyDeviceToHost of `bytes`
  // would be. `dst` belongs to the backend until the copy has completed.
  // The default stores every byte.
  virtual absl::Status CopyDeviceToHostBuffer(HostBuffer* dst, DevicePtr src,
                                              uint64_t bytes,
                                              StreamHandle stream) {
    return CopyDeviceToHost(dst->Reset(bytes, bytes), src, bytes, stream);
  }

  // Enqueues a built-in op or a user kernel. UNIMPLEMENTED for unknown ops.
  virtual absl::Status Launch(const KernelLaunch& launch,
                              StreamHandle stream) = 0;

  // User kernels. Compiles and loads every module of `graph` for every
  // device ahead of its launches, at submission, so that errors in user
  // code reach the submitter: INVALID_ARGUMENT naming the module (and
  // carrying the compiler's log) for code that does not compile or load.
  // Results are cached, so Launch reuses them and resubmitting a module is
  // cheap. Logically const: it only fills caches. Backends that do not run
  // user code (the simulator) accept every module (the default).
  virtual absl::Status PrepareModules(const scheduler::Graph& graph) const {
    return absl::OkStatus();
  }

  virtual absl::Status AddHostCallback(StreamHandle stream,
                                       HostCallback callback) = 0;

  // ---- Optional capabilities. The defaults describe a backend without
  // them; callers check the capability and fall back.

  // Error scopes. Where errors of enqueued work stick to a stream (the
  // simulator), they stick to the stream's current error scope only: work
  // enqueued after SetErrorScope(stream, s) belongs to scope s; a failure
  // skips the later work of its own scope and reaches that scope's host
  // callbacks, while other scopes on the same stream carry on. Lets work of
  // independent jobs share a stream without sharing each other's faults.
  // Scope 0 is every stream's initial scope. On CUDA an asynchronous fault
  // is sticky for the whole context, every stream and scope alike, and
  // enqueue-time errors are returned by the enqueueing call, so there this
  // is a no-op (the default).
  virtual absl::Status SetErrorScope(StreamHandle stream, uint64_t scope) {
    return absl::OkStatus();
  }

  // Abandons the work of error scope `scope` on `stream` that has not
  // started yet: it is skipped as if the scope had failed with `status`
  // (non-OK), and the scope's later host callbacks receive `status`. Work
  // already running stops too where interrupts_aborted_work() is true (it
  // completes at once and its stream goes on), and finishes otherwise.
  // Used to cancel a job promptly. The default does nothing (CUDA cannot
  // withdraw enqueued work; a cancelled job then drains what it issued).
  virtual absl::Status AbortErrorScope(StreamHandle stream, uint64_t scope,
                                       absl::Status status) {
    return absl::OkStatus();
  }
  // Whether AbortErrorScope stops running work within milliseconds (the
  // simulator), so that a cancelled job's streams drain at once. Without
  // it (CUDA: a running kernel cannot be stopped short of destroying the
  // context) the executor abandons a cancelled job's work instead: it
  // reports the job cancelled at once and keeps the job's streams, memory
  // and events from other jobs until the device has finished the work
  // (job.h). The default: false.
  virtual bool interrupts_aborted_work() const { return false; }
  // Forgets what `stream` remembers about `scope` (its first error). Called
  // once no more work of the scope is queued there, so failed and cancelled
  // jobs leave nothing behind in a long-lived stream.
  virtual void ReleaseErrorScope(StreamHandle stream, uint64_t scope) {}

  // Host gates: make a stream's later work wait for something the host does.
  // EnqueueHostGate puts a gate on `stream`; work enqueued after it starts
  // only once OpenHostGate has been called for it. `status` non-OK fails the
  // gate like failed work (in its error scope). `busy_us` is how long the
  // host work behind the gate took, in device time, for backends that model
  // time (the simulator); others ignore it. Every gate must be opened
  // exactly once, also when the work behind it is abandoned, or the stream
  // never drains. CUDA can implement gates with a stream memory operation
  // (cuStreamWaitValue32 on a flag in pinned host memory that OpenHostGate
  // sets); the default reports UNIMPLEMENTED and supports_host_gates() false.
  virtual bool supports_host_gates() const { return false; }
  virtual absl::StatusOr<GateHandle> EnqueueHostGate(StreamHandle stream) {
    return absl::UnimplementedError("this backend has no host gates");
  }
  virtual absl::Status OpenHostGate(GateHandle gate, absl::Status status,
                                    double busy_us) {
    return absl::UnimplementedError("this backend has no host gates");
  }

  // Batching hint. Between BeginBatch and EndBatch, called on one thread,
  // a backend may hold back the start of the work that thread enqueues and
  // start it at EndBatch (at the latest), saving a wakeup per enqueue: the
  // simulator does; CUDA's driver batches launches by itself and ignores
  // the hint (the default). Calls pair on the same thread and do not nest.
  // A synchronizing call on a stream releases what is held for it first.
  virtual void BeginBatch() {}
  virtual void EndBatch() {}

  // Device clock, for traces: once `event` has completed, the time in
  // microseconds at which its stream reached its last recording, on one
  // clock shared by all of the backend's devices. FAILED_PRECONDITION while
  // the event has not completed or was never recorded. CUDA can answer with
  // cudaEventElapsedTime against a reference event (timing-enabled events);
  // the default reports UNIMPLEMENTED and has_device_clock() false.
  virtual bool has_device_clock() const { return false; }
  virtual absl::StatusOr<double> EventTimeUs(EventHandle event) {
    return absl::UnimplementedError("this backend has no device clock");
  }
  // Device clock stamps: Stamp(stream) captures the work enqueued on
  // `stream` so far, as an event recorded there would, and the stamp says
  // when that work completed, to whoever holds it, on any thread, for as
  // long as it is held. Cheaper than an event where the backend keeps its
  // clock itself (the simulator): traces stamp their spans this way where
  // they can. The default: no stamps (UNIMPLEMENTED); traces use events.
  virtual bool supports_stamps() const { return false; }
  virtual absl::StatusOr<std::shared_ptr<const DeviceStamp>> Stamp(
      StreamHandle stream) {
    return absl::UnimplementedError("this backend has no stamps");
  }

  // Device graphs (device_graph.h): one device's share of a job enqueued as
  // a single unit, built once per structure (DeviceGraphSignature) and
  // launched again with new parameters when the same structure returns.
  // LaunchDeviceGraph enqueues `graph` on `stream`, a stream of the graph's
  // device, and returns: the graph starts after the work enqueued on the
  // stream before it, work enqueued after it waits for all of it, and it
  // belongs to the stream's current error scope. Completion and errors
  // arrive as for any work on the stream (host callbacks, events). Kernel
  // nodes may only use ops for which supports_device_graph_op() is true.
  // prefers_device_graphs() says whether graphs cut host overhead enough
  // to be the default (CUDA: one launch instead of one per node); the
  // simulator runs them faithfully but gains nothing. The defaults: no
  // graphs, UNIMPLEMENTED.
  virtual bool supports_device_graphs() const { return false; }
  virtual bool prefers_device_graphs() const { return false; }
  virtual bool supports_device_graph_op(const std::string& op) const {
    return false;
  }
  virtual absl::Status LaunchDeviceGraph(const DeviceGraph& graph,
                                         StreamHandle stream) {
    return absl::UnimplementedError("this backend has no device graphs");
  }
  // Device loops (DeviceLoop): LaunchDeviceLoop enqueues `loop` on
  // `stream`: it starts once the work before it has completed, the device
  // evaluates its condition and runs its body with no host round trip,
  // and work enqueued on `stream` afterwards waits for the whole loop.
  // `body_stream`, another stream of the same device, is the caller's to
  // give: the loop runs its iterations there and the caller enqueues
  // nothing on it until the loop has completed. Errors of the body fail
  // the loop in `stream`'s error scope. The defaults: no device loops.
  virtual bool supports_device_loops() const { return false; }
  // Whether a device loop's body or a device case's branches may hold
  // device loops and cases themselves (DeviceGraphControl nodes), to any
  // depth.
  virtual bool supports_nested_device_control() const { return false; }
  virtual absl::Status LaunchDeviceLoop(const DeviceLoop& loop,
                                        StreamHandle stream,
                                        StreamHandle body_stream) {
    return absl::UnimplementedError("this backend has no device loops");
  }
  // Device cases (DeviceCase), as device loops: enqueued on `stream`, the
  // chosen branch runs on `body_stream`, and work enqueued on `stream`
  // afterwards waits for it. supports_device_loops() covers both.
  virtual absl::Status LaunchDeviceCase(const DeviceCase& choice,
                                        StreamHandle stream,
                                        StreamHandle body_stream) {
    return absl::UnimplementedError("this backend has no device cases");
  }

  // Builds (or finds in a cache) what LaunchDeviceGraph needs for `graph`
  // without enqueueing anything, so that a caller can still take another
  // path when a graph cannot be built. The default has nothing to build.
  virtual absl::Status PrepareDeviceGraph(const DeviceGraph& graph) {
    return supports_device_graphs()
               ? absl::OkStatus()
               : absl::UnimplementedError("this backend has no device graphs");
  }
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_BACKEND_H_
