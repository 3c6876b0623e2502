#include "runtime/sim/sim_backend.h"

#include <cmath>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

constexpr int kMaxDevices = 64;
// Simulated address spaces start away from zero (zero is never valid) and
// hand out 256-byte aligned ranges, as cudaMalloc does.
constexpr uint64_t kFirstAddress = uint64_t{1} << 20;
constexpr uint64_t kAlignment = 256;

std::string Hex(uint64_t v) { return absl::StrFormat("0x%x", v); }

}  // namespace

absl::StatusOr<std::unique_ptr<SimBackend>> SimBackend::Create(
    Options options) {
  if (options.num_devices < 1 || options.num_devices > kMaxDevices) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_devices must be in [1, ", kMaxDevices, "], got ",
                     options.num_devices));
  }
  if (options.memory_bytes == 0) {
    return absl::InvalidArgumentError("memory_bytes must be positive");
  }
  for (double gbps : {options.host_to_device_gbps, options.device_to_host_gbps,
                      options.device_to_device_gbps}) {
    if (std::isnan(gbps)) {
      return absl::InvalidArgumentError("copy bandwidth must not be NaN");
    }
  }
  if (!(options.time_scale >= 0) || std::isinf(options.time_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("time_scale must be finite and >= 0, got ",
                     options.time_scale));
  }
  return std::unique_ptr<SimBackend>(new SimBackend(std::move(options)));
}

SimBackend::SimBackend(Options options)
    : options_(std::move(options)), num_devices_(options_.num_devices) {
  if (options_.kernels == nullptr) {
    owned_kernels_ =
        std::make_unique<CpuKernelTable>(CpuKernelTable::WithBuiltins());
    kernels_ = owned_kernels_.get();
  } else {
    kernels_ = options_.kernels;
  }
  absl::MutexLock lock(&mu_);
  for (int d = 0; d < num_devices_; ++d) {
    DeviceInfo info;
    info.index = d;
    info.name = options_.device_name;
    info.uuid = absl::StrFormat("GPU-5e1a0000-0000-4000-8000-%012x", d);
    info.simulated = true;
    info.memory_total_bytes = options_.memory_bytes;
    device_infos_.push_back(info);
    Device device;
    device.info = info;
    device.next_address = kFirstAddress;
    devices_.push_back(std::move(device));
  }
}

SimBackend::~SimBackend() {
  absl::flat_hash_map<uint64_t, Stream> streams;
  absl::flat_hash_map<uint64_t, Event> events;
  {
    absl::MutexLock lock(&mu_);
    streams.swap(streams_);
    events.swap(events_);
  }
  // Stop all first so no worker stays blocked on another stream, then join.
  for (auto& [handle, stream] : streams) stream.queue->Stop();
  for (auto& [handle, stream] : streams) stream.queue->Shutdown();
}

int SimBackend::device_count() const { return num_devices_; }

DeviceInfo SimBackend::device_info(int device) const {
  if (device < 0 || device >= num_devices_) return DeviceInfo{-1};
  return device_infos_[device];
}

uint64_t SimBackend::memory_used_bytes(int device) const {
  if (device < 0 || device >= num_devices_) return 0;
  absl::MutexLock lock(&mu_);
  return devices_[device].used;
}

int SimBackend::stream_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(streams_.size());
}

int SimBackend::event_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(events_.size());
}

absl::Status SimBackend::CheckDevice(int device) const {
  if (device < 0 || device >= num_devices_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", device, " does not exist (", num_devices_, " devices)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SimBackend::Stream> SimBackend::FindStream(
    StreamHandle handle) const {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(handle.value);
  if (it == streams_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown stream ", handle.value));
  }
  return it->second;
}

absl::StatusOr<StreamHandle> SimBackend::CreateStream(int device) {
  WEFT_RETURN_IF_ERROR(CheckDevice(device));
  absl::MutexLock lock(&mu_);
  const uint64_t handle = next_handle_++;
  Stream stream;
  stream.device = device;
  stream.queue = std::make_shared<SimStream>(
      absl::StrCat("device ", device, " stream ", handle));
  streams_.emplace(handle, std::move(stream));
  return StreamHandle{handle};
}

absl::Status SimBackend::DestroyStream(StreamHandle handle) {
  std::shared_ptr<SimStream> queue;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(handle.value);
    if (it == streams_.end()) {
      return absl::NotFoundError(absl::StrCat("unknown stream ", handle.value));
    }
    if (it->second.queue->OnWorkerThread()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stream ", handle.value, " cannot be destroyed from its own thread"));
    }
    queue = std::move(it->second.queue);
    streams_.erase(it);
  }
  // Its errors were reported to its callbacks already.
  queue->Synchronize().IgnoreError();
  queue->Shutdown();
  return absl::OkStatus();
}

absl::StatusOr<EventHandle> SimBackend::CreateEvent(int device) {
  WEFT_RETURN_IF_ERROR(CheckDevice(device));
  absl::MutexLock lock(&mu_);
  const uint64_t handle = next_handle_++;
  Event event;
  event.device = device;
  events_.emplace(handle, std::move(event));
  return EventHandle{handle};
}

absl::Status SimBackend::DestroyEvent(EventHandle handle) {
  Event removed;
  {
    absl::MutexLock lock(&mu_);
    auto it = events_.find(handle.value);
    if (it == events_.end()) {
      return absl::NotFoundError(absl::StrCat("unknown event ", handle.value));
    }
    removed = std::move(it->second);
    events_.erase(it);
  }
  // `removed` may hold the last reference to a destroyed stream; it is
  // released here, outside mu_.
  return absl::OkStatus();
}

absl::Status SimBackend::RecordEvent(EventHandle event_handle,
                                     StreamHandle stream_handle) {
  absl::MutexLock lock(&mu_);
  auto event = events_.find(event_handle.value);
  if (event == events_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown event ", event_handle.value));
  }
  auto stream = streams_.find(stream_handle.value);
  if (stream == streams_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown stream ", stream_handle.value));
  }
  if (event->second.device != stream->second.device) {
    return absl::InvalidArgumentError(absl::StrCat(
        "event ", event_handle.value, " belongs to device ",
        event->second.device, " but stream ", stream_handle.value,
        " to device ", stream->second.device));
  }
  event->second.stream = stream->second.queue;
  event->second.seq = stream->second.queue->enqueued();
  return absl::OkStatus();
}

absl::Status SimBackend::StreamWaitEvent(StreamHandle stream_handle,
                                         EventHandle event_handle) {
  std::shared_ptr<SimStream> waiter;
  std::shared_ptr<SimStream> target;
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    auto stream = streams_.find(stream_handle.value);
    if (stream == streams_.end()) {
      return absl::NotFoundError(
          absl::StrCat("unknown stream ", stream_handle.value));
    }
    auto event = events_.find(event_handle.value);
    if (event == events_.end()) {
      return absl::NotFoundError(
          absl::StrCat("unknown event ", event_handle.value));
    }
    waiter = stream->second.queue;
    target = event->second.stream;
    seq = event->second.seq;
  }
  // Never recorded, recorded on this very stream (FIFO order suffices), or
  // complete already: nothing to wait for.
  if (target == nullptr || target == waiter || target->IsComplete(seq)) {
    return absl::OkStatus();
  }
  waiter->Enqueue([target, seq]() -> absl::Status {
    if (!target->AwaitComplete(seq)) {
      return absl::AbortedError(
          absl::StrCat(target->name(), " stopped before the awaited work"));
    }
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::StatusOr<bool> SimBackend::QueryEvent(EventHandle event_handle) {
  std::shared_ptr<SimStream> target;
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&mu_);
    auto event = events_.find(event_handle.value);
    if (event == events_.end()) {
      return absl::NotFoundError(
          absl::StrCat("unknown event ", event_handle.value));
    }
    target = event->second.stream;
    seq = event->second.seq;
  }
  return target == nullptr || target->IsComplete(seq);
}

absl::Status SimBackend::SynchronizeStream(StreamHandle stream_handle) {
  WEFT_ASSIGN_OR_RETURN(Stream stream, FindStream(stream_handle));
  if (stream.queue->OnWorkerThread()) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", stream_handle.value,
                     " cannot be synchronized from its own thread"));
  }
  return stream.queue->Synchronize();
}

absl::StatusOr<DevicePtr> SimBackend::Allocate(int device, uint64_t bytes) {
  WEFT_RETURN_IF_ERROR(CheckDevice(device));
  absl::MutexLock lock(&mu_);
  Device& dev = devices_[device];
  const uint64_t free_bytes = options_.memory_bytes - dev.used;
  if (bytes > free_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", device, " (", dev.info.name, ") is out of memory: requested ",
        bytes, " bytes, ", free_bytes, " bytes free of ",
        options_.memory_bytes));
  }
  auto allocation = std::make_shared<Allocation>();
  allocation->size = bytes;
  // Zero-byte allocations still get a distinct address.
  const uint64_t backing = bytes == 0 ? 1 : bytes;
  allocation->data.reset(new (std::nothrow) char[backing]);
  if (allocation->data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", device, ": host memory for a ", bytes,
        "-byte simulated allocation is exhausted"));
  }
  const uint64_t address = dev.next_address;
  allocation->address = address;
  dev.next_address += (backing + kAlignment - 1) / kAlignment * kAlignment;
  dev.used += bytes;
  dev.allocations.emplace(address, std::move(allocation));
  return DevicePtr{device, address};
}

absl::Status SimBackend::Free(DevicePtr ptr) {
  WEFT_RETURN_IF_ERROR(CheckDevice(ptr.device));
  std::shared_ptr<Allocation> released;
  {
    absl::MutexLock lock(&mu_);
    Device& dev = devices_[ptr.device];
    auto it = dev.allocations.find(ptr.address);
    if (it == dev.allocations.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device ", ptr.device, ": ", Hex(ptr.address),
                       " is not the start of an allocation"));
    }
    dev.used -= it->second->size;
    released = std::move(it->second);
    dev.allocations.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<SimBackend::Resolved> SimBackend::Resolve(DevicePtr ptr,
                                                         uint64_t bytes) const {
  WEFT_RETURN_IF_ERROR(CheckDevice(ptr.device));
  const Device& dev = devices_[ptr.device];
  auto it = dev.allocations.upper_bound(ptr.address);
  if (it != dev.allocations.begin()) {
    --it;
    const Allocation& a = *it->second;
    const uint64_t offset = ptr.address - a.address;
    if (offset <= a.size && bytes <= a.size - offset) {
      return Resolved{it->second, a.data.get() + offset};
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device ", ptr.device, ": [", Hex(ptr.address), ", +",
                   bytes, ") is not inside an allocation"));
}

absl::StatusOr<SimBackend::Resolved> SimBackend::ResolveUnlocked(
    DevicePtr ptr, uint64_t bytes) const {
  absl::MutexLock lock(&mu_);
  return Resolve(ptr, bytes);
}

absl::Duration SimBackend::CopyTime(uint64_t bytes, double gbps) const {
  if (!(gbps > 0) || std::isinf(gbps) || options_.time_scale == 0) {
    return absl::ZeroDuration();
  }
  return absl::Seconds(static_cast<double>(bytes) / (gbps * 1e9) *
                       options_.time_scale);
}

absl::Status SimBackend::CopyHostToDevice(DevicePtr dst, const void* src,
                                          uint64_t bytes,
                                          StreamHandle stream_handle) {
  WEFT_ASSIGN_OR_RETURN(Stream stream, FindStream(stream_handle));
  WEFT_RETURN_IF_ERROR(ResolveUnlocked(dst, bytes).status());
  const absl::Duration time = CopyTime(bytes, options_.host_to_device_gbps);
  SimStream* queue = stream.queue.get();
  queue->Enqueue([this, dst, src, bytes, time, queue]() -> absl::Status {
    const absl::Time start = absl::Now();
    WEFT_ASSIGN_OR_RETURN(Resolved to, ResolveUnlocked(dst, bytes));
    if (bytes > 0) std::memcpy(to.data, src, bytes);
    queue->Occupy(time - (absl::Now() - start));
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::Status SimBackend::CopyDeviceToHost(void* dst, DevicePtr src,
                                          uint64_t bytes,
                                          StreamHandle stream_handle) {
  WEFT_ASSIGN_OR_RETURN(Stream stream, FindStream(stream_handle));
  WEFT_RETURN_IF_ERROR(ResolveUnlocked(src, bytes).status());
  const absl::Duration time = CopyTime(bytes, options_.device_to_host_gbps);
  SimStream* queue = stream.queue.get();
  queue->Enqueue([this, dst, src, bytes, time, queue]() -> absl::Status {
    const absl::Time start = absl::Now();
    WEFT_ASSIGN_OR_RETURN(Resolved from, ResolveUnlocked(src, bytes));
    if (bytes > 0) std::memcpy(dst, from.data, bytes);
    queue->Occupy(time - (absl::Now() - start));
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::Status SimBackend::CopyDeviceToDevice(DevicePtr dst, DevicePtr src,
                                            uint64_t bytes,
                                            StreamHandle stream_handle) {
  WEFT_ASSIGN_OR_RETURN(Stream stream, FindStream(stream_handle));
  WEFT_RETURN_IF_ERROR(ResolveUnlocked(src, bytes).status());
  WEFT_RETURN_IF_ERROR(ResolveUnlocked(dst, bytes).status());
  const absl::Duration time = CopyTime(bytes, options_.device_to_device_gbps);
  SimStream* queue = stream.queue.get();
  queue->Enqueue([this, dst, src, bytes, time, queue]() -> absl::Status {
    const absl::Time start = absl::Now();
    WEFT_ASSIGN_OR_RETURN(Resolved from, ResolveUnlocked(src, bytes));
    WEFT_ASSIGN_OR_RETURN(Resolved to, ResolveUnlocked(dst, bytes));
    if (bytes > 0) std::memmove(to.data, from.data, bytes);
    queue->Occupy(time - (absl::Now() - start));
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

absl::Status SimBackend::Launch(const KernelLaunch& launch,
                                StreamHandle stream_handle) {
  WEFT_ASSIGN_OR_RETURN(Stream stream, FindStream(stream_handle));
  if (!kernels_->Contains(launch.op)) {
    return absl::UnimplementedError(absl::StrCat(
        "op '", launch.op, "' is not implemented by the simulated backend"));
  }
  {
    absl::MutexLock lock(&mu_);
    for (const KernelArg& arg : launch.args) {
      if (const auto* b = std::get_if<DeviceBufferArg>(&arg)) {
        WEFT_RETURN_IF_ERROR(Resolve(b->ptr, b->size_bytes).status());
      }
    }
  }
  const int device = stream.device;
  SimStream* queue = stream.queue.get();
  queue->Enqueue([this, launch, device, queue]() {
    return RunLaunch(launch, device, queue);
  });
  return absl::OkStatus();
}

absl::Status SimBackend::RunLaunch(const KernelLaunch& launch, int device,
                                   SimStream* stream) const {
  std::vector<HostArg> args;
  std::vector<std::shared_ptr<Allocation>> keep_alive;
  args.reserve(launch.args.size());
  {
    absl::MutexLock lock(&mu_);
    for (const KernelArg& arg : launch.args) {
      if (const auto* b = std::get_if<DeviceBufferArg>(&arg)) {
        absl::StatusOr<Resolved> r = Resolve(b->ptr, b->size_bytes);
        if (!r.ok()) {
          return absl::Status(r.status().code(),
                              absl::StrCat(launch.op, " on device ", device,
                                           ": ", r.status().message()));
        }
        args.push_back(HostBufferArg{r->data, b->size_bytes, b->dtype,
                                     b->access});
        keep_alive.push_back(std::move(r->owner));
      } else if (const auto* f = std::get_if<float>(&arg)) {
        args.push_back(*f);
      } else if (const auto* d = std::get_if<double>(&arg)) {
        args.push_back(*d);
      } else if (const auto* i = std::get_if<int32_t>(&arg)) {
        args.push_back(*i);
      } else if (const auto* l = std::get_if<int64_t>(&arg)) {
        args.push_back(*l);
      }
    }
  }
  if (options_.launch_fault) {
    absl::Status fault = options_.launch_fault(device, launch);
    if (!fault.ok()) return fault;
  }
  const absl::Time start = absl::Now();
  absl::Status status = kernels_->Run(launch.op, args);
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat(launch.op, " on device ", device, ": ",
                                     status.message()));
  }
  if (launch.op == "spin" && launch.cost_us > 0) {
    stream->Occupy(absl::Microseconds(launch.cost_us * options_.time_scale) -
                   (absl::Now() - start));
  }
  return absl::OkStatus();
}

absl::Status SimBackend::AddHostCallback(StreamHandle stream_handle,
                                         HostCallback callback) {
  if (!callback) return absl::InvalidArgumentError("empty host callback");
  WEFT_ASSIGN_OR_RETURN(Stream stream, FindStream(stream_handle));
  stream.queue->EnqueueCallback(std::move(callback));
  return absl::OkStatus();
}

}  // namespace weft::runtime
