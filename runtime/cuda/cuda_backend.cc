#include "runtime/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/cuda/allocation_table.h"
#include "runtime/cuda/builtin_ops.h"
#include "runtime/cuda/callback_dispatcher.h"
#include "runtime/cuda/cuda_device_control.h"
#include "runtime/cuda/cuda_devices.h"
#include "runtime/cuda/cuda_graph_cache.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/module_cache.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/cuda/pinned_staging.h"
#include "runtime/device_graph.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

using cuda::AsPointer;

class CudaBackendImpl final : public CudaBackend {
 public:
  CudaBackendImpl(std::vector<DeviceInfo> devices,
                  std::vector<cuda::SpinShape> spin_shapes, int driver_version,
                  const Options& options)
      : devices_(std::move(devices)),
        driver_version_(driver_version),
        options_(options),
        builtin_ops_(CheckRangeFn(), std::move(spin_shapes)) {}

  ~CudaBackendImpl() override {
    // CUDA runs every callback added with cudaStreamAddCallback exactly
    // once, also after a fault, once the work before it is done. A callback
    // may enqueue more work and callbacks, so synchronizing the devices
    // first is not enough (a callback added after the synchronization would
    // later reach a destroyed backend): wait until no callback is pending or
    // running, then stop the dispatcher, then drain the work those
    // callbacks enqueued without a callback of their own.
    callbacks_.Shutdown();
    for (const DeviceInfo& device : devices_) {
      if (cudaSetDevice(device.index) == cudaSuccess) {
        (void)cudaDeviceSynchronize();
      }
    }
    absl::MutexLock lock(&mu_);
    for (const auto& [handle, entry] : streams_) {
      (void)cudaSetDevice(entry.device);
      (void)cudaStreamDestroy(entry.stream);
    }
    for (const auto& [handle, entry] : events_) {
      (void)cudaSetDevice(entry.device);
      (void)cudaEventDestroy(entry.event);
    }
    for (const DevicePtr start : allocations_.TakeAll()) {
      (void)cudaSetDevice(start.device);
      (void)cudaFree(AsPointer(start));
    }
    (void)cudaGetLastError();
  }

  int device_count() const override {
    return static_cast<int>(devices_.size());
  }

  DeviceInfo device_info(int device) const override {
    if (!ValidDevice(device)) return DeviceInfo{};
    return devices_[device];
  }

  uint64_t memory_used_bytes(int device) const override {
    if (!ValidDevice(device) || cudaSetDevice(device) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return total_bytes - free_bytes;
  }

  absl::StatusOr<StreamHandle> CreateStream(int device) override {
    WEFT_RETURN_IF_ERROR(UseDevice(device));
    cudaStream_t stream = nullptr;
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    absl::MutexLock lock(&mu_);
    const uint64_t handle = next_handle_++;
    streams_.emplace(handle, StreamEntry{device, stream});
    return StreamHandle{handle};
  }

  absl::Status DestroyStream(StreamHandle stream) override {
    StreamEntry entry;
    {
      absl::MutexLock lock(&mu_);
      auto it = streams_.find(stream.value);
      if (it == streams_.end()) return UnknownStream(stream);
      entry = it->second;
      streams_.erase(it);
    }
    WEFT_RETURN_IF_ERROR(UseDevice(entry.device));
    return WEFT_CUDA_STATUS(cudaStreamDestroy(entry.stream));
  }

  absl::StatusOr<EventHandle> CreateEvent(int device) override {
    WEFT_RETURN_IF_ERROR(UseDevice(device));
    cudaEvent_t event = nullptr;
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    absl::MutexLock lock(&mu_);
    const uint64_t handle = next_handle_++;
    events_.emplace(handle, EventEntry{device, event});
    return EventHandle{handle};
  }

  absl::Status DestroyEvent(EventHandle event) override {
    EventEntry entry;
    {
      absl::MutexLock lock(&mu_);
      auto it = events_.find(event.value);
      if (it == events_.end()) return UnknownEvent(event);
      entry = it->second;
      events_.erase(it);
    }
    WEFT_RETURN_IF_ERROR(UseDevice(entry.device));
    return WEFT_CUDA_STATUS(cudaEventDestroy(entry.event));
  }

  absl::Status RecordEvent(EventHandle event, StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const EventEntry e, FindEvent(event));
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    if (e.device != s.device) {
      return absl::InvalidArgumentError(
          absl::StrCat("event ", event.value, " belongs to device ", e.device,
                       " and cannot be recorded on stream ", stream.value,
                       " of device ", s.device));
    }
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    return WEFT_CUDA_STATUS(cudaEventRecord(e.event, s.stream));
  }

  absl::Status StreamWaitEvent(StreamHandle stream,
                               EventHandle event) override {
    WEFT_ASSIGN_OR_RETURN(const EventEntry e, FindEvent(event));
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    // Cross-device waits are allowed: CUDA orders them in hardware.
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    return WEFT_CUDA_STATUS(cudaStreamWaitEvent(s.stream, e.event, 0));
  }

  absl::StatusOr<bool> QueryEvent(EventHandle event) override {
    WEFT_ASSIGN_OR_RETURN(const EventEntry e, FindEvent(event));
    WEFT_RETURN_IF_ERROR(UseDevice(e.device));
    const cudaError_t result = cudaEventQuery(e.event);
    if (result == cudaSuccess) return true;
    if (result == cudaErrorNotReady) return false;
    return WEFT_CUDA_STATUS(result);
  }

  absl::Status SynchronizeStream(StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    return WEFT_CUDA_STATUS(cudaStreamSynchronize(s.stream));
  }

  absl::StatusOr<DevicePtr> Allocate(int device, uint64_t bytes) override {
    WEFT_RETURN_IF_ERROR(UseDevice(device));
    // A zero-byte request still gets a distinct, non-null address.
    const uint64_t size = std::max<uint64_t>(bytes, 1);
    void* address = nullptr;
    const cudaError_t result = cudaMalloc(&address, size);
    if (result != cudaSuccess) {
      // An allocation failure is not sticky; clear it so it is not reported
      // again by the next unrelated call on this thread.
      (void)cudaGetLastError();
      const absl::Status status = WEFT_CUDA_STATUS(result);
      return absl::Status(
          status.code(), absl::StrCat("allocating ", bytes, " bytes on device ",
                                      device, ": ", status.message()));
    }
    const DevicePtr start{device, reinterpret_cast<uintptr_t>(address)};
    allocations_.Add(start, size);
    return start;
  }

  absl::Status Free(DevicePtr ptr) override {
    WEFT_RETURN_IF_ERROR(allocations_.Remove(ptr));
    WEFT_RETURN_IF_ERROR(UseDevice(ptr.device));
    return WEFT_CUDA_STATUS(cudaFree(AsPointer(ptr)));
  }

  absl::Status CopyHostToDevice(DevicePtr dst, const void* src, uint64_t bytes,
                                StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    if (bytes == 0) return absl::OkStatus();
    if (src == nullptr) return absl::InvalidArgumentError("null host source");
    WEFT_RETURN_IF_ERROR(CheckRange(dst, bytes, "copy destination"));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    return WEFT_CUDA_STATUS(cudaMemcpyAsync(AsPointer(dst), src, bytes,
                                            cudaMemcpyHostToDevice, s.stream));
  }

  // The data, then cudaMemsetAsync over the tail, on the same stream.
  absl::Status CopyHostToDevicePadded(DevicePtr dst, const void* src,
                                      uint64_t src_bytes, uint64_t bytes,
                                      StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    if (src_bytes > bytes) {
      return absl::InvalidArgumentError(
          "an upload's data is larger than the upload");
    }
    if (bytes == 0) return absl::OkStatus();
    if (src_bytes > 0 && src == nullptr) {
      return absl::InvalidArgumentError("null host source");
    }
    WEFT_RETURN_IF_ERROR(CheckRange(dst, bytes, "copy destination"));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    if (src_bytes > 0) {
      WEFT_RETURN_IF_ERROR(WEFT_CUDA_STATUS(cudaMemcpyAsync(
          AsPointer(dst), src, src_bytes, cudaMemcpyHostToDevice, s.stream)));
    }
    if (src_bytes == bytes) return absl::OkStatus();
    char* tail = static_cast<char*>(AsPointer(dst)) + src_bytes;
    return WEFT_CUDA_STATUS(
        cudaMemsetAsync(tail, 0, bytes - src_bytes, s.stream));
  }

  absl::Status CopyDeviceToHost(void* dst, DevicePtr src, uint64_t bytes,
                                StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    if (bytes == 0) return absl::OkStatus();
    if (dst == nullptr) {
      return absl::InvalidArgumentError("null host destination");
    }
    WEFT_RETURN_IF_ERROR(CheckRange(src, bytes, "copy source"));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    // Into pageable memory cudaMemcpyAsync returns only once the copy, and
    // so all the work before it on the stream, is done: a small copy (a
    // loop's condition, say) goes through a page-locked slot instead, so
    // that the calling thread (the scheduling thread, or a completion
    // callback continuing a loop) never waits for the device.
    if (bytes <= small_staging_.chunk_bytes() && !PageLocked(dst)) {
      WEFT_ASSIGN_OR_RETURN(
          const bool staged,
          small_staging_.Download(dst, AsPointer(src), bytes, s.stream));
      if (staged) return absl::OkStatus();
    }
    return WEFT_CUDA_STATUS(cudaMemcpyAsync(dst, AsPointer(src), bytes,
                                            cudaMemcpyDeviceToHost, s.stream));
  }

  // Whether `host` is page-locked (or managed) memory CUDA copies into
  // asynchronously.
  static bool PageLocked(const void* host) {
    cudaPointerAttributes attributes;
    if (cudaPointerGetAttributes(&attributes, host) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return attributes.type == cudaMemoryTypeHost ||
           attributes.type == cudaMemoryTypeManaged;
  }

  // Downloads of at least a chunk go through page-locked chunks
  // (pinned_staging.h), so that they neither block the calling thread nor
  // run at pageable speed; smaller ones, and any download while every chunk
  // is in use, copy straight into the buffer.
  absl::Status CopyDeviceToHostBuffer(HostBuffer* dst, DevicePtr src,
                                      uint64_t bytes,
                                      StreamHandle stream) override {
    if (bytes >= staging_.chunk_bytes()) {
      WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
      WEFT_RETURN_IF_ERROR(CheckRange(src, bytes, "copy source"));
      WEFT_RETURN_IF_ERROR(UseDevice(s.device));
      char* out = dst->Reset(bytes, bytes);
      WEFT_ASSIGN_OR_RETURN(
          const bool staged,
          staging_.Download(out, AsPointer(src), bytes, s.stream));
      if (staged) return absl::OkStatus();
      return CopyDeviceToHost(out, src, bytes, stream);
    }
    return CopyDeviceToHost(dst->Reset(bytes, bytes), src, bytes, stream);
  }

  absl::Status CopyDeviceToDevice(DevicePtr dst, DevicePtr src, uint64_t bytes,
                                  StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    if (bytes == 0) return absl::OkStatus();
    WEFT_RETURN_IF_ERROR(CheckRange(src, bytes, "copy source"));
    WEFT_RETURN_IF_ERROR(CheckRange(dst, bytes, "copy destination"));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    return cuda::EnqueueDeviceCopy(dst, src, bytes, s.stream);
  }

  absl::Status Launch(const KernelLaunch& launch,
                      StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    if (cuda::BuiltinOps::Supports(launch.op)) {
      return builtin_ops_.Launch(launch, s.device, s.stream);
    }
    if (launch.user_kernel != nullptr) return LaunchUserKernel(launch, s);
    return absl::UnimplementedError(
        absl::StrCat("no CUDA kernel for op '", launch.op, "'"));
  }

  // User modules are compiled and loaded on every device (module_cache.h).
  absl::Status PrepareModules(const scheduler::Graph& graph) const override {
    if (graph.modules().empty()) return absl::OkStatus();
    for (const DeviceInfo& device : devices_) {
      WEFT_RETURN_IF_ERROR(UseDevice(device.index));
      WEFT_RETURN_IF_ERROR(modules_.Prepare(device.index, graph));
    }
    return absl::OkStatus();
  }

  // Device graphs: captured CUDA graphs, cached (cuda_graph_cache.h).
  bool supports_device_graphs() const override { return true; }
  bool prefers_device_graphs() const override { return true; }
  bool supports_device_graph_op(const std::string& op) const override {
    return cuda::BuiltinOps::Supports(op);
  }
  absl::Status LaunchDeviceGraph(const DeviceGraph& graph,
                                 StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    if (s.device != graph.device) {
      return absl::InvalidArgumentError(
          absl::StrCat("a graph of device ", graph.device,
                       " cannot launch on a stream of device ", s.device));
    }
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    return graphs_.Launch(graph, stream);
  }
  absl::Status PrepareDeviceGraph(const DeviceGraph& graph) override {
    WEFT_RETURN_IF_ERROR(UseDevice(graph.device));
    return graphs_.Prepare(graph);
  }
  GraphCacheStats graph_cache_stats() const override {
    const cuda::CudaGraphCacheStats stats = graphs_.stats();
    return GraphCacheStats{stats.instantiations, stats.cache_hits,
                           stats.updates, stats.evictions, stats.cached};
  }

  absl::Status AddHostCallback(StreamHandle stream,
                               HostCallback callback) override {
    if (!callback) return absl::InvalidArgumentError("empty host callback");
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, CallbackStream(stream));
    return callbacks_.Add(s.stream, stream.value, s.scope, std::move(callback));
  }

  // Error scopes: CUDA cannot skip enqueued work, but errors the device
  // reports through memory (a device loop past its bound) fail the scope's
  // host callbacks added after the work that found them
  // (callback_dispatcher.h).
  absl::Status SetErrorScope(StreamHandle stream, uint64_t scope) override {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(stream.value);
    if (it == streams_.end()) return UnknownStream(stream);
    it->second.scope = scope;
    return absl::OkStatus();
  }
  void ReleaseErrorScope(StreamHandle stream, uint64_t scope) override {
    callbacks_.ReleaseErrorScope(stream.value, scope);
  }

  // Device loops and cases: CUDA graphs with conditional nodes
  // (cuda_device_control.h). They run on `stream`; `body_stream` is not
  // used, since a conditional node's bodies run inside its graph.
  bool supports_device_loops() const override {
    return driver_version_ >= kWhileDriverVersion;
  }
  // Loops and cases nested in a conditional node's body are conditional
  // nodes there (cuda_device_control.h), unless cases go by device launch.
  bool supports_nested_device_control() const override {
    return supports_device_loops() && !options_.device_launch_cases &&
           !options_.device_launch_loops &&
           driver_version_ >= kSwitchDriverVersion;
  }
  absl::Status LaunchDeviceLoop(const DeviceLoop& loop, StreamHandle stream,
                                StreamHandle /*body_stream*/) override {
    if (!supports_device_loops()) return NoConditionalNodes();
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    if (options_.device_launch_loops) {
      return control_.LaunchLoopByTailLaunch(loop, stream, s.device);
    }
    return control_.LaunchLoop(loop, stream, s.device);
  }
  absl::Status LaunchDeviceLoopByTailLaunch(const DeviceLoop& loop,
                                            StreamHandle stream) override {
    if (!supports_device_loops()) return NoConditionalNodes();
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    return control_.LaunchLoopByTailLaunch(loop, stream, s.device);
  }
  absl::Status LaunchDeviceCase(const DeviceCase& choice, StreamHandle stream,
                                StreamHandle /*body_stream*/) override {
    if (!supports_device_loops()) return NoConditionalNodes();
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    if (options_.device_launch_cases ||
        driver_version_ < kSwitchDriverVersion) {
      return control_.LaunchCaseByDeviceLaunch(choice, stream, s.device);
    }
    return control_.LaunchCase(choice, stream, s.device);
  }
  absl::Status LaunchDeviceCaseByDeviceLaunch(const DeviceCase& choice,
                                              StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    return control_.LaunchCaseByDeviceLaunch(choice, stream, s.device);
  }
  DeviceControlStats device_control_stats() const override {
    const cuda::DeviceControlStats stats = control_.stats();
    return DeviceControlStats{stats.instantiations, stats.cache_hits,
                              stats.updates, stats.cached};
  }

 private:
  // CUDA 12.3 brought WHILE conditional nodes, 12.8 SWITCH nodes.
  static constexpr int kWhileDriverVersion = 12030;
  static constexpr int kSwitchDriverVersion = 12080;

  absl::Status NoConditionalNodes() const {
    return absl::UnimplementedError(absl::StrCat(
        "device loops need conditional graph nodes (a CUDA driver of 12.3 or "
        "newer); this driver is ",
        driver_version_ / 1000, ".", driver_version_ % 1000 / 10));
  }

  struct StreamEntry {
    int device = -1;
    cudaStream_t stream = nullptr;
    uint64_t scope = 0;  // the current error scope
  };
  struct EventEntry {
    int device = -1;
    cudaEvent_t event = nullptr;
  };
  bool ValidDevice(int device) const {
    return device >= 0 && device < static_cast<int>(devices_.size());
  }

  // Makes `device` current on the calling thread (CUDA's current device is
  // per thread, and any thread may call the backend).
  absl::Status UseDevice(int device) const {
    if (!ValidDevice(device)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device ", device, " out of range [0, ", devices_.size(), ")"));
    }
    return WEFT_CUDA_STATUS(cudaSetDevice(device));
  }

  // The stream a host callback or report goes on, with its device made
  // current.
  absl::StatusOr<StreamEntry> CallbackStream(StreamHandle stream) const
      ABSL_LOCKS_EXCLUDED(mu_) {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    return s;
  }

  static absl::Status UnknownStream(StreamHandle stream) {
    return absl::NotFoundError(
        absl::StrCat("unknown stream handle ", stream.value));
  }
  static absl::Status UnknownEvent(EventHandle event) {
    return absl::NotFoundError(
        absl::StrCat("unknown event handle ", event.value));
  }

  absl::StatusOr<StreamEntry> FindStream(StreamHandle stream) const
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(stream.value);
    if (it == streams_.end()) return UnknownStream(stream);
    return it->second;
  }

  absl::StatusOr<EventEntry> FindEvent(EventHandle event) const
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = events_.find(event.value);
    if (it == events_.end()) return UnknownEvent(event);
    return it->second;
  }

  // OK when [ptr, ptr + bytes) lies inside one live allocation of
  // ptr.device.
  absl::Status CheckRange(DevicePtr ptr, uint64_t bytes,
                          absl::string_view what) const {
    return allocations_.CheckRange(ptr, bytes, what);
  }

  // User kernels: buffers are checked like a built-in op's; the kernel gets
  // the rest.
  absl::Status LaunchUserKernel(const KernelLaunch& launch,
                                const StreamEntry& s) {
    const std::string what =
        absl::StrCat("kernel '", launch.user_kernel->kernel, "'");
    for (size_t i = 0; i < launch.args.size(); ++i) {
      if (std::holds_alternative<DeviceBufferArg>(launch.args[i])) {
        WEFT_RETURN_IF_ERROR(
            cuda::BufferAt(what, launch, i, s.device, CheckRangeFn()).status());
      }
    }
    return modules_.Launch(s.device, launch, s.stream);
  }

  cuda::RangeCheck CheckRangeFn() const {
    return [this](DevicePtr ptr, uint64_t bytes, absl::string_view what) {
      return CheckRange(ptr, bytes, what);
    };
  }

  cuda::CudaDeviceControl::Hooks ControlHooks() {
    cuda::CudaDeviceControl::Hooks hooks;
    hooks.stream = [this](StreamHandle h) -> absl::StatusOr<cudaStream_t> {
      WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(h));
      return s.stream;
    };
    hooks.capture = [this](
                        const DeviceGraph& graph, cudaGraph_t target,
                        const cuda::CudaGraphCache::CaptureTail& tail,
                        const cuda::CudaGraphCache::CaptureControl& control) {
      return graphs_.CaptureToGraph(graph, target, tail, control);
    };
    hooks.report = [this](StreamHandle h,
                          cuda::CudaDeviceControl::Report report) {
      WEFT_ASSIGN_OR_RETURN(const StreamEntry s, CallbackStream(h));
      return callbacks_.AddReport(s.stream, h.value, s.scope,
                                  std::move(report));
    };
    return hooks;
  }

  cuda::CudaGraphCache::Hooks GraphHooks() {
    cuda::CudaGraphCache::Hooks hooks;
    hooks.stream = [this](StreamHandle h) -> absl::StatusOr<cudaStream_t> {
      WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(h));
      return s.stream;
    };
    hooks.event = [this](EventHandle h) -> absl::StatusOr<cudaEvent_t> {
      WEFT_ASSIGN_OR_RETURN(const EventEntry e, FindEvent(h));
      return e.event;
    };
    hooks.create_stream = [this](int device) { return CreateStream(device); };
    hooks.launch = [this](const KernelLaunch& launch, StreamHandle h) {
      return Launch(launch, h);
    };
    hooks.check_range = [this](DevicePtr ptr, uint64_t bytes,
                               absl::string_view what) {
      return CheckRange(ptr, bytes, what);
    };
    return hooks;
  }

  // Constant after construction.
  const std::vector<DeviceInfo> devices_;
  const int driver_version_;  // cudaDriverGetVersion, e.g. 13000
  const Options options_;
  // Runs host callbacks and device-control reports; stopped first by the
  // destructor.
  cuda::CallbackDispatcher callbacks_;
  // User modules (thread-safe themselves; mutable: caches). Destroyed after
  // the destructor has synchronized every device.
  mutable cuda::NvrtcCompiler compiler_;
  mutable cuda::ModuleCache modules_{&compiler_};
  cuda::BuiltinOps builtin_ops_;
  // Page-locked chunks for downloads: 16 of 8 MiB at most.
  cuda::PinnedStaging staging_{uint64_t{8} << 20, 16};
  // Page-locked slots for small downloads into pageable memory: 256 of
  // 64 KiB at most.
  cuda::PinnedStaging small_staging_{uint64_t{64} << 10, 256};
  // Device graphs; its lanes are streams of this backend.
  cuda::CudaGraphCache graphs_{GraphHooks(), cuda::CudaGraphCache::Options{}};
  // Device loops and cases; they capture through graphs_.
  cuda::CudaDeviceControl control_{ControlHooks(),
                                   cuda::CudaDeviceControl::Options{}};

  mutable absl::Mutex mu_;
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, StreamEntry> streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, EventEntry> events_ ABSL_GUARDED_BY(mu_);
  // Live allocations, for range checks (locks itself).
  cuda::AllocationTable allocations_;
};

}  // namespace

int VisibleCudaDevices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create() {
  return Create(Options{});
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const Options& options) {
  WEFT_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices,
                        cuda::DescribeVisibleDevices());
  int driver_version = 0;
  WEFT_CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&driver_version));
  cuda::EnablePeerAccess(static_cast<int>(devices.size()));
  std::vector<cuda::SpinShape> spin_shapes;
  for (const DeviceInfo& device : devices) {
    WEFT_ASSIGN_OR_RETURN(cuda::SpinShape shape,
                          cuda::PrepareSpin(device.index));
    spin_shapes.push_back(shape);
  }
  return std::unique_ptr<CudaBackend>(new CudaBackendImpl(
      std::move(devices), std::move(spin_shapes), driver_version, options));
}

}  // namespace weft::runtime
