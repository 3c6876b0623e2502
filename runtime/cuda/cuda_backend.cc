#include "runtime/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
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
#include "runtime/cuda/cuda_graph_cache.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/gpu_uuid.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/module_cache.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "runtime/device_graph.h"
#include "runtime/ops/scalars.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

using scheduler::DType;

// ---------------------------------------------------------------------------
// Scalar conversions are runtime/ops/scalars.h's, as in the CPU reference
// kernels, so that both backends produce the same bits.

bool IsScalar(const KernelArg& arg) {
  return !std::holds_alternative<DeviceBufferArg>(arg);
}

template <typename T>
uint64_t BitPattern(T value) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  uint64_t pattern = 0;
  std::memcpy(&pattern, &value, sizeof(T));
  return pattern;
}

absl::Status ArgError(absl::string_view op, size_t index,
                      absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": argument ", index, " ", what));
}

absl::Status CheckArity(absl::string_view op, const KernelLaunch& launch,
                        size_t want) {
  if (launch.args.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": expected ", want, " arguments, got ", launch.args.size()));
  }
  return absl::OkStatus();
}

void* AsPointer(DevicePtr ptr) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr.address));
}

// Aliasing rules of the CPU reference kernels (cpu_kernels.h), on device
// addresses: the bytes an op uses of `out` and of an input overlap.
bool Overlaps(DevicePtr a, uint64_t a_bytes, DevicePtr b, uint64_t b_bytes) {
  if (a.device != b.device || a_bytes == 0 || b_bytes == 0) return false;
  return a.address < b.address + b_bytes && b.address < a.address + a_bytes;
}

// An elementwise output may be exactly an input or apart from it.
absl::Status CheckElementwiseAlias(absl::string_view op, size_t out_index,
                                   DevicePtr out, uint64_t out_bytes,
                                   size_t in_index, DevicePtr in,
                                   uint64_t in_bytes) {
  if (!Overlaps(out, out_bytes, in, in_bytes)) return absl::OkStatus();
  if (out.address == in.address && out_bytes == in_bytes) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": argument ", out_index, " (the output) overlaps argument ",
      in_index,
      " without being the same memory; an output may be exactly an input or "
      "apart from it"));
}

// gemv's and dot's output must not overlap their inputs.
absl::Status CheckNoOverlap(absl::string_view op, size_t out_index,
                            absl::string_view out_name, DevicePtr out,
                            uint64_t out_bytes, size_t in_index,
                            absl::string_view in_name, DevicePtr in,
                            uint64_t in_bytes) {
  if (!Overlaps(out, out_bytes, in, in_bytes)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": argument ", out_index, " (", out_name,
                   ") overlaps argument ", in_index, " (", in_name, "); ", op,
                   " cannot write its result into its input"));
}

// gemv's dimensions: integer scalars in [1, 2^31 - 1].
absl::StatusOr<uint64_t> DimensionAt(absl::string_view op,
                                     const KernelLaunch& launch, size_t index,
                                     absl::string_view name) {
  int64_t v = 0;
  if (const auto* i = std::get_if<int32_t>(&launch.args[index])) {
    v = *i;
  } else if (const auto* l = std::get_if<int64_t>(&launch.args[index])) {
    v = *l;
  } else {
    return ArgError(op, index,
                    absl::StrCat("(", name, ") must be an integer scalar"));
  }
  if (v < 1 || v > std::numeric_limits<int32_t>::max()) {
    return ArgError(
        op, index,
        absl::StrCat("(", name, ") must be in [1, 2^31 - 1], got ", v));
  }
  return static_cast<uint64_t>(v);
}

// ---------------------------------------------------------------------------

class CudaBackendImpl final : public CudaBackend {
 public:
  explicit CudaBackendImpl(std::vector<DeviceInfo> devices)
      : devices_(std::move(devices)) {
    dispatcher_ = std::thread([this] { DispatchCallbacks(); });
  }

  ~CudaBackendImpl() override {
    // CUDA runs every callback added with cudaStreamAddCallback exactly
    // once, also after a fault, once the work before it is done. A callback
    // may enqueue more work and callbacks, so synchronizing the devices
    // first is not enough (a callback added after the synchronization would
    // later reach a destroyed backend): wait until no callback is pending or
    // running, then stop the dispatcher, then drain the work those
    // callbacks enqueued without a callback of their own.
    {
      absl::MutexLock lock(&callback_mu_);
      callback_mu_.Await(
          absl::Condition(this, &CudaBackendImpl::NoCallbackPending));
      stopping_ = true;
    }
    dispatcher_.join();
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
    for (const auto& [address, entry] : allocations_) {
      (void)cudaSetDevice(entry.device);
      (void)cudaFree(AsPointer(DevicePtr{entry.device, address}));
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
    const uint64_t start = reinterpret_cast<uintptr_t>(address);
    absl::MutexLock lock(&mu_);
    allocations_.emplace(start, AllocationEntry{device, size});
    return DevicePtr{device, start};
  }

  absl::Status Free(DevicePtr ptr) override {
    {
      absl::MutexLock lock(&mu_);
      auto it = allocations_.find(ptr.address);
      if (it == allocations_.end() || it->second.device != ptr.device) {
        return absl::InvalidArgumentError(
            absl::StrCat("device ", ptr.device, ": 0x", absl::Hex(ptr.address),
                         " is not the start of an allocation"));
      }
      allocations_.erase(it);
    }
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

  absl::Status CopyDeviceToHost(void* dst, DevicePtr src, uint64_t bytes,
                                StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    if (bytes == 0) return absl::OkStatus();
    if (dst == nullptr) {
      return absl::InvalidArgumentError("null host destination");
    }
    WEFT_RETURN_IF_ERROR(CheckRange(src, bytes, "copy source"));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    return WEFT_CUDA_STATUS(cudaMemcpyAsync(dst, AsPointer(src), bytes,
                                            cudaMemcpyDeviceToHost, s.stream));
  }

  absl::Status CopyDeviceToDevice(DevicePtr dst, DevicePtr src, uint64_t bytes,
                                  StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    if (bytes == 0) return absl::OkStatus();
    WEFT_RETURN_IF_ERROR(CheckRange(src, bytes, "copy source"));
    WEFT_RETURN_IF_ERROR(CheckRange(dst, bytes, "copy destination"));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    return EnqueueDeviceCopy(dst, src, bytes, s.stream);
  }

  absl::Status Launch(const KernelLaunch& launch,
                      StreamHandle stream) override {
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    const std::string& op = launch.op;
    if (op == "fill") return LaunchFill(launch, s);
    if (op == "copy") return LaunchCopy(launch, s);
    if (op == "axpy") return LaunchAxpy(launch, s);
    if (op == "scale") return LaunchScale(launch, s);
    if (op == "add") return LaunchAdd(launch, s);
    if (op == "sub" || op == "mul" || op == "div") {
      return LaunchBinary(launch, s);
    }
    if (op == "reduce_sum") return LaunchReduceSum(launch, s);
    if (op == "dot") return LaunchDot(launch, s);
    if (op == "gemv") return LaunchGemv(launch, s);
    if (op == "less" || op == "greater") return LaunchCompare(launch, s);
    if (op == "spin") return LaunchSpin(launch, s);
    if (launch.user_kernel != nullptr) return LaunchUserKernel(launch, s);
    return absl::UnimplementedError(
        absl::StrCat("no CUDA kernel for op '", op, "'"));
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
    return op == "fill" || op == "copy" || op == "axpy" || op == "scale" ||
           op == "add" || op == "sub" || op == "mul" || op == "div" ||
           op == "reduce_sum" || op == "dot" || op == "gemv" || op == "less" ||
           op == "greater" || op == "spin";
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
    WEFT_ASSIGN_OR_RETURN(const StreamEntry s, FindStream(stream));
    WEFT_RETURN_IF_ERROR(UseDevice(s.device));
    auto record = std::make_unique<CallbackRecord>();
    record->backend = this;
    record->callback = std::move(callback);
    {
      absl::MutexLock lock(&callback_mu_);
      ++pending_callbacks_;
    }
    // cudaStreamAddCallback rather than cudaLaunchHostFunc: it runs even
    // after a device fault and reports the stream's error, which the
    // Backend contract passes on; cudaLaunchHostFunc would never run.
    const cudaError_t result = cudaStreamAddCallback(
        s.stream, &CudaBackendImpl::OnStreamCallback, record.get(), 0);
    if (result != cudaSuccess) {
      absl::MutexLock lock(&callback_mu_);
      --pending_callbacks_;
      return WEFT_CUDA_STATUS(result);
    }
    record.release();  // owned by the pending CUDA callback now
    return absl::OkStatus();
  }

 private:
  struct StreamEntry {
    int device = -1;
    cudaStream_t stream = nullptr;
  };
  struct EventEntry {
    int device = -1;
    cudaEvent_t event = nullptr;
  };
  struct AllocationEntry {
    int device = -1;
    uint64_t bytes = 0;
  };
  struct CallbackRecord {
    CudaBackendImpl* backend = nullptr;  // not owned
    HostCallback callback;
    cudaError_t result = cudaSuccess;
  };

  // Runs on the CUDA driver's thread: may not call CUDA, so it only hands
  // the record to the dispatcher.
  static void CUDART_CB OnStreamCallback(cudaStream_t /*stream*/,
                                         cudaError_t result, void* data) {
    std::unique_ptr<CallbackRecord> record(static_cast<CallbackRecord*>(data));
    record->result = result;
    CudaBackendImpl* backend = record->backend;
    absl::MutexLock lock(&backend->callback_mu_);
    backend->ready_callbacks_.push_back(std::move(record));
  }

  void DispatchCallbacks() ABSL_LOCKS_EXCLUDED(callback_mu_) {
    while (true) {
      std::deque<std::unique_ptr<CallbackRecord>> batch;
      {
        absl::MutexLock lock(&callback_mu_);
        callback_mu_.Await(
            absl::Condition(this, &CudaBackendImpl::CallbacksReadyOrStopping));
        if (ready_callbacks_.empty()) return;  // stopping and drained
        batch.swap(ready_callbacks_);
      }
      for (std::unique_ptr<CallbackRecord>& record : batch) {
        record->callback(cuda::CudaStatus(
            record->result, "work enqueued before the host callback", __FILE__,
            __LINE__));
      }
      absl::MutexLock lock(&callback_mu_);
      pending_callbacks_ -= static_cast<int64_t>(batch.size());
    }
  }

  bool CallbacksReadyOrStopping() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(callback_mu_) {
    return stopping_ || !ready_callbacks_.empty();
  }

  bool NoCallbackPending() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(callback_mu_) {
    return pending_callbacks_ == 0;
  }

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
                          absl::string_view what) const
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = allocations_.upper_bound(ptr.address);
    if (it != allocations_.begin()) {
      --it;
      const uint64_t start = it->first;
      const AllocationEntry& entry = it->second;
      if (entry.device == ptr.device && ptr.address - start <= entry.bytes &&
          bytes <= entry.bytes - (ptr.address - start)) {
        return absl::OkStatus();
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(what, " [0x", absl::Hex(ptr.address), ", +", bytes,
                     ") is not inside an allocation on device ", ptr.device));
  }

  // The buffer argument at `index`, checked to lie on `device` and inside
  // its allocation.
  absl::StatusOr<DeviceBufferArg> BufferAt(absl::string_view op,
                                           const KernelLaunch& launch,
                                           size_t index, int device) const {
    const auto* buffer = std::get_if<DeviceBufferArg>(&launch.args[index]);
    if (buffer == nullptr) return ArgError(op, index, "must be a buffer");
    if (device >= 0 && buffer->ptr.device != device) {
      return ArgError(op, index,
                      absl::StrCat("lives on device ", buffer->ptr.device,
                                   " but the stream is on device ", device));
    }
    if (buffer->size_bytes > 0) {
      WEFT_RETURN_IF_ERROR(CheckRange(buffer->ptr, buffer->size_bytes,
                                      absl::StrCat(op, ": argument ", index)));
    }
    return *buffer;
  }

  absl::StatusOr<DeviceBufferArg> Float32At(absl::string_view op,
                                            const KernelLaunch& launch,
                                            size_t index, int device) const {
    WEFT_ASSIGN_OR_RETURN(DeviceBufferArg buffer,
                          BufferAt(op, launch, index, device));
    if (buffer.dtype != DType::kFloat32) {
      return ArgError(op, index,
                      absl::StrCat("must be float32, got ",
                                   scheduler::DTypeName(buffer.dtype)));
    }
    return buffer;
  }

  // Copies use cudaMemcpyAsync; across devices with cudaMemcpyDefault,
  // which unified addressing resolves to a peer copy (staged through the
  // host when peer access is off) and which stream capture records as an
  // ordinary memcpy node, so the same call serves node-by-node launches
  // and device graphs. Overlapping same-device ranges (memmove semantics
  // in the CPU reference) go through stream-ordered scratch memory.
  absl::Status EnqueueDeviceCopy(DevicePtr dst, DevicePtr src, uint64_t bytes,
                                 cudaStream_t stream) const {
    if (dst.device != src.device) {
      return WEFT_CUDA_STATUS(cudaMemcpyAsync(
          AsPointer(dst), AsPointer(src), bytes, cudaMemcpyDefault, stream));
    }
    if (dst.address == src.address) return absl::OkStatus();
    const bool overlap =
        dst.address < src.address + bytes && src.address < dst.address + bytes;
    if (!overlap) {
      return WEFT_CUDA_STATUS(cudaMemcpyAsync(AsPointer(dst), AsPointer(src),
                                              bytes, cudaMemcpyDeviceToDevice,
                                              stream));
    }
    void* scratch = nullptr;
    WEFT_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&scratch, bytes, stream));
    absl::Status copied = WEFT_CUDA_STATUS(cudaMemcpyAsync(
        scratch, AsPointer(src), bytes, cudaMemcpyDeviceToDevice, stream));
    const absl::Status copied_back =
        copied.ok() ? WEFT_CUDA_STATUS(
                          cudaMemcpyAsync(AsPointer(dst), scratch, bytes,
                                          cudaMemcpyDeviceToDevice, stream))
                    : copied;
    const absl::Status freed = WEFT_CUDA_STATUS(cudaFreeAsync(scratch, stream));
    return copied_back.ok() ? freed : copied_back;
  }

  // --- Built-in ops. Argument lists follow scheduler/op_signatures.h and
  // are re-checked here: a backend cannot assume its caller validated them.

  // Buffers are checked like a built-in op's; the kernel gets the rest.
  absl::Status LaunchUserKernel(const KernelLaunch& launch,
                                const StreamEntry& s) {
    const std::string what =
        absl::StrCat("kernel '", launch.user_kernel->kernel, "'");
    for (size_t i = 0; i < launch.args.size(); ++i) {
      if (std::holds_alternative<DeviceBufferArg>(launch.args[i])) {
        WEFT_RETURN_IF_ERROR(BufferAt(what, launch, i, s.device).status());
      }
    }
    return modules_.Launch(s.device, launch, s.stream);
  }

  absl::Status LaunchFill(const KernelLaunch& launch,
                          const StreamEntry& s) const {
    constexpr absl::string_view kOp = "fill";
    WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 2));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg out,
                          BufferAt(kOp, launch, 0, s.device));
    const KernelArg& value = launch.args[1];
    if (!IsScalar(value)) return ArgError(kOp, 1, "must be a scalar");
    void* data = AsPointer(out.ptr);
    const uint64_t size = out.size_bytes;
    switch (out.dtype) {
      case DType::kBytes:
        return cuda::LaunchFill(
            data, size, 1, static_cast<unsigned char>(ScalarAsInt64(value)),
            s.stream);
      case DType::kFloat32:
        return cuda::LaunchFill(
            data, size / 4, 4,
            BitPattern(static_cast<float>(ScalarAsDouble(value))), s.stream);
      case DType::kFloat64:
        return cuda::LaunchFill(data, size / 8, 8,
                                BitPattern(ScalarAsDouble(value)), s.stream);
      case DType::kInt32:
        return cuda::LaunchFill(data, size / 4, 4,
                                BitPattern(SaturateInt32(ScalarAsInt64(value))),
                                s.stream);
      case DType::kInt64:
        return cuda::LaunchFill(data, size / 8, 8,
                                BitPattern(ScalarAsInt64(value)), s.stream);
    }
    return ArgError(kOp, 0, "has an unknown dtype");
  }

  absl::Status LaunchCopy(const KernelLaunch& launch,
                          const StreamEntry& s) const {
    constexpr absl::string_view kOp = "copy";
    WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 2));
    // Either side may live on another device: the copy engines reach peers.
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg src,
                          BufferAt(kOp, launch, 0, /*device=*/-1));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg dst,
                          BufferAt(kOp, launch, 1, /*device=*/-1));
    if (dst.size_bytes < src.size_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "copy: destination (", dst.size_bytes,
          " bytes) is smaller than source (", src.size_bytes, " bytes)"));
    }
    if (src.size_bytes == 0) return absl::OkStatus();
    return EnqueueDeviceCopy(dst.ptr, src.ptr, src.size_bytes, s.stream);
  }

  absl::Status LaunchAxpy(const KernelLaunch& launch,
                          const StreamEntry& s) const {
    constexpr absl::string_view kOp = "axpy";
    WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 3));
    if (!IsScalar(launch.args[0])) return ArgError(kOp, 0, "must be a scalar");
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                          Float32At(kOp, launch, 1, s.device));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg y,
                          Float32At(kOp, launch, 2, s.device));
    const float a = static_cast<float>(ScalarAsDouble(launch.args[0]));
    const uint64_t n = std::min(x.size_bytes / 4, y.size_bytes / 4);
    WEFT_RETURN_IF_ERROR(
        CheckElementwiseAlias(kOp, 2, y.ptr, 4 * n, 1, x.ptr, 4 * n));
    return cuda::LaunchAxpy(a, static_cast<const float*>(AsPointer(x.ptr)),
                            static_cast<float*>(AsPointer(y.ptr)), n, s.stream);
  }

  absl::Status LaunchScale(const KernelLaunch& launch,
                           const StreamEntry& s) const {
    constexpr absl::string_view kOp = "scale";
    WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 2));
    if (!IsScalar(launch.args[0])) return ArgError(kOp, 0, "must be a scalar");
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                          Float32At(kOp, launch, 1, s.device));
    const float a = static_cast<float>(ScalarAsDouble(launch.args[0]));
    return cuda::LaunchScale(a, static_cast<float*>(AsPointer(x.ptr)),
                             x.size_bytes / 4, s.stream);
  }

  absl::Status LaunchAdd(const KernelLaunch& launch,
                         const StreamEntry& s) const {
    constexpr absl::string_view kOp = "add";
    WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 3));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg a,
                          Float32At(kOp, launch, 0, s.device));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg b,
                          Float32At(kOp, launch, 1, s.device));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg out,
                          Float32At(kOp, launch, 2, s.device));
    const uint64_t n =
        std::min({a.size_bytes / 4, b.size_bytes / 4, out.size_bytes / 4});
    WEFT_RETURN_IF_ERROR(
        CheckElementwiseAlias(kOp, 2, out.ptr, 4 * n, 0, a.ptr, 4 * n));
    WEFT_RETURN_IF_ERROR(
        CheckElementwiseAlias(kOp, 2, out.ptr, 4 * n, 1, b.ptr, 4 * n));
    return cuda::LaunchAdd(static_cast<const float*>(AsPointer(a.ptr)),
                           static_cast<const float*>(AsPointer(b.ptr)),
                           static_cast<float*>(AsPointer(out.ptr)), n,
                           s.stream);
  }

  absl::Status LaunchReduceSum(const KernelLaunch& launch,
                               const StreamEntry& s) const {
    constexpr absl::string_view kOp = "reduce_sum";
    WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 2));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                          Float32At(kOp, launch, 0, s.device));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg out,
                          Float32At(kOp, launch, 1, s.device));
    if (out.size_bytes < sizeof(float)) {
      return ArgError(kOp, 1, "must hold at least one float32");
    }
    return cuda::LaunchReduceSum(
        static_cast<const float*>(AsPointer(x.ptr)), x.size_bytes / 4,
        static_cast<float*>(AsPointer(out.ptr)), s.stream);
  }

  // sub, mul, div: over min(len(a), len(out)), `b` of one element
  // broadcast, as in the CPU reference.
  absl::Status LaunchBinary(const KernelLaunch& launch,
                            const StreamEntry& s) const {
    const std::string& op = launch.op;
    WEFT_RETURN_IF_ERROR(CheckArity(op, launch, 3));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg a,
                          Float32At(op, launch, 0, s.device));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg b,
                          Float32At(op, launch, 1, s.device));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg out,
                          Float32At(op, launch, 2, s.device));
    const uint64_t n = std::min(a.size_bytes / 4, out.size_bytes / 4);
    const uint64_t nb = b.size_bytes / 4;
    const bool broadcast = nb == 1;
    if (!broadcast && nb < n) {
      return ArgError(op, 1,
                      absl::StrCat("(b) holds ", nb,
                                   " float32 elements; it must hold one "
                                   "(broadcast) or at least ",
                                   n, " (the shorter of a and out)"));
    }
    WEFT_RETURN_IF_ERROR(
        CheckElementwiseAlias(op, 2, out.ptr, 4 * n, 0, a.ptr, 4 * n));
    WEFT_RETURN_IF_ERROR(CheckElementwiseAlias(op, 2, out.ptr, 4 * n, 1, b.ptr,
                                               broadcast ? 4 : 4 * n));
    const auto* ap = static_cast<const float*>(AsPointer(a.ptr));
    const auto* bp = static_cast<const float*>(AsPointer(b.ptr));
    auto* outp = static_cast<float*>(AsPointer(out.ptr));
    if (op == "sub") {
      return cuda::LaunchSub(ap, bp, broadcast, outp, n, s.stream);
    }
    if (op == "mul") {
      return cuda::LaunchMul(ap, bp, broadcast, outp, n, s.stream);
    }
    return cuda::LaunchDiv(ap, bp, broadcast, outp, n, s.stream);
  }

  absl::Status LaunchDot(const KernelLaunch& launch,
                         const StreamEntry& s) const {
    constexpr absl::string_view kOp = "dot";
    WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 3));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                          Float32At(kOp, launch, 0, s.device));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg y,
                          Float32At(kOp, launch, 1, s.device));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg out,
                          Float32At(kOp, launch, 2, s.device));
    if (out.size_bytes < sizeof(float)) {
      return ArgError(kOp, 2, "(out) must hold at least one float32");
    }
    const uint64_t n = std::min(x.size_bytes / 4, y.size_bytes / 4);
    WEFT_RETURN_IF_ERROR(
        CheckNoOverlap(kOp, 2, "out", out.ptr, 4, 0, "x", x.ptr, 4 * n));
    WEFT_RETURN_IF_ERROR(
        CheckNoOverlap(kOp, 2, "out", out.ptr, 4, 1, "y", y.ptr, 4 * n));
    return cuda::LaunchDot(static_cast<const float*>(AsPointer(x.ptr)),
                           static_cast<const float*>(AsPointer(y.ptr)), n,
                           static_cast<float*>(AsPointer(out.ptr)), s.stream);
  }

  absl::Status LaunchGemv(const KernelLaunch& launch,
                          const StreamEntry& s) const {
    constexpr absl::string_view kOp = "gemv";
    WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 5));
    WEFT_ASSIGN_OR_RETURN(const uint64_t rows,
                          DimensionAt(kOp, launch, 0, "rows"));
    WEFT_ASSIGN_OR_RETURN(const uint64_t cols,
                          DimensionAt(kOp, launch, 1, "cols"));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg a,
                          Float32At(kOp, launch, 2, s.device));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                          Float32At(kOp, launch, 3, s.device));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg y,
                          Float32At(kOp, launch, 4, s.device));
    struct Need {
      size_t index;
      const char* name;
      uint64_t have;
      uint64_t elements;
      const char* what;
    };
    for (const Need& need :
         {Need{2, "A", a.size_bytes / 4, rows * cols, "rows * cols"},
          Need{3, "x", x.size_bytes / 4, cols, "cols"},
          Need{4, "y", y.size_bytes / 4, rows, "rows"}}) {
      if (need.have < need.elements) {
        return ArgError(kOp, need.index,
                        absl::StrCat("(", need.name, ") holds ", need.have,
                                     " float32 elements, fewer than ",
                                     need.what, " = ", need.elements));
      }
    }
    WEFT_RETURN_IF_ERROR(CheckNoOverlap(kOp, 4, "y", y.ptr, 4 * rows, 2, "A",
                                        a.ptr, 4 * rows * cols));
    WEFT_RETURN_IF_ERROR(
        CheckNoOverlap(kOp, 4, "y", y.ptr, 4 * rows, 3, "x", x.ptr, 4 * cols));
    return cuda::LaunchGemv(rows, cols,
                            static_cast<const float*>(AsPointer(a.ptr)),
                            static_cast<const float*>(AsPointer(x.ptr)),
                            static_cast<float*>(AsPointer(y.ptr)), s.stream);
  }

  // less, greater: flag[0] = x[0] < t (resp. >), t rounded to float32.
  absl::Status LaunchCompare(const KernelLaunch& launch,
                             const StreamEntry& s) const {
    const std::string& op = launch.op;
    WEFT_RETURN_IF_ERROR(CheckArity(op, launch, 3));
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                          Float32At(op, launch, 0, s.device));
    if (!IsScalar(launch.args[1]))
      return ArgError(op, 1, "(t) must be a scalar");
    WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg flag,
                          BufferAt(op, launch, 2, s.device));
    if (flag.dtype != DType::kInt32) {
      return ArgError(op, 2,
                      absl::StrCat("(flag) must be int32, got ",
                                   scheduler::DTypeName(flag.dtype)));
    }
    if (x.size_bytes < sizeof(float)) {
      return ArgError(op, 0, "(x) must hold at least one float32");
    }
    if (flag.size_bytes < sizeof(int32_t)) {
      return ArgError(op, 2, "(flag) must hold at least one int32");
    }
    const float t = static_cast<float>(ScalarAsDouble(launch.args[1]));
    return cuda::LaunchCompare(
        static_cast<const float*>(AsPointer(x.ptr)), t, op == "greater",
        static_cast<int32_t*>(AsPointer(flag.ptr)), s.stream);
  }

  absl::Status LaunchSpin(const KernelLaunch& launch,
                          const StreamEntry& s) const {
    for (size_t i = 0; i < launch.args.size(); ++i) {
      if (IsScalar(launch.args[i]))
        return ArgError("spin", i, "must be a buffer");
    }
    const double ns = launch.cost_us * 1e3;
    // NaN and negative costs spin for no time; absurd ones are capped at an
    // hour rather than overflowing.
    const uint64_t duration_ns =
        ns > 0 ? static_cast<uint64_t>(std::min(ns, 3.6e12)) : 0;
    return cuda::LaunchSpin(duration_ns, s.stream);
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
  std::thread dispatcher_;
  // User modules (thread-safe themselves; mutable: caches). Destroyed after
  // the destructor has synchronized every device.
  mutable cuda::NvrtcCompiler compiler_;
  mutable cuda::ModuleCache modules_{&compiler_};
  // Device graphs; its lanes are streams of this backend.
  cuda::CudaGraphCache graphs_{GraphHooks(), cuda::CudaGraphCache::Options{}};

  mutable absl::Mutex mu_;
  uint64_t next_handle_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, StreamEntry> streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, EventEntry> events_ ABSL_GUARDED_BY(mu_);
  // Keyed by start address, ordered for range lookups.
  std::map<uint64_t, AllocationEntry> allocations_ ABSL_GUARDED_BY(mu_);

  absl::Mutex callback_mu_;
  // Callbacks whose stream work is done, in completion order.
  std::deque<std::unique_ptr<CallbackRecord>> ready_callbacks_
      ABSL_GUARDED_BY(callback_mu_);
  bool stopping_ ABSL_GUARDED_BY(callback_mu_) = false;
  // Callbacks added and not yet run to completion by the dispatcher.
  int64_t pending_callbacks_ ABSL_GUARDED_BY(callback_mu_) = 0;
};

// Enables peer access between every pair of devices that supports it, so
// peer copies go device to device instead of through the host. Failures only
// cost bandwidth, so they are ignored.
void EnablePeerAccess(int device_count) {
  for (int device = 0; device < device_count; ++device) {
    if (cudaSetDevice(device) != cudaSuccess) continue;
    for (int peer = 0; peer < device_count; ++peer) {
      int can_access = 0;
      if (peer == device ||
          cudaDeviceCanAccessPeer(&can_access, device, peer) != cudaSuccess ||
          !can_access) {
        continue;
      }
      (void)cudaDeviceEnablePeerAccess(peer, 0);
    }
  }
  (void)cudaGetLastError();  // e.g. cudaErrorPeerAccessAlreadyEnabled
}

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
  int count = 0;
  const cudaError_t result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::UnavailableError(absl::StrCat(
        "no CUDA device visible: ",
        cuda::CudaStatus(result, "cudaGetDeviceCount", __FILE__, __LINE__)
            .message()));
  }
  if (count == 0) return absl::UnavailableError("no CUDA device visible");
  std::vector<DeviceInfo> devices;
  devices.reserve(count);
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp prop;
    WEFT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
    DeviceInfo info;
    info.index = device;
    info.name = prop.name;
    info.uuid = FormatGpuUuid(prop.uuid.bytes);
    info.simulated = false;
    info.memory_total_bytes = prop.totalGlobalMem;
    devices.push_back(std::move(info));
  }
  EnablePeerAccess(count);
  return std::unique_ptr<CudaBackend>(new CudaBackendImpl(std::move(devices)));
}

}  // namespace weft::runtime
