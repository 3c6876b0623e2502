#include "runtime/sim/sim_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

constexpr int kMaxDevices = 64;

std::atomic<uint64_t> next_batch_token{1};
std::atomic<uint64_t> next_backend_id{1};

}  // namespace

double SimBackend::ClampDurationUs(double us) {
  if (!(us > 0)) return 0;
  return std::min(us, kMaxDurationUs);
}

// A thread's batch (Backend::BeginBatch): which backend it is for, its
// token, the streams it holds, and the streams it looked up (by handle),
// so that the calls of a batch find their stream without the backend's
// lock. The lookups are dropped at the end of the batch, and as soon as a
// stream of the backend is destroyed (`destroyed_seen` lags behind
// streams_destroyed_).
struct SimBackend::Batch {
  // The backend's id_ (unique in the process, unlike its address, which a
  // later backend may reuse), 0 outside a batch.
  uint64_t owner = 0;
  uint64_t token = 0;
  std::vector<std::shared_ptr<SimStream>> held;
  uint64_t destroyed_seen = 0;
  std::vector<std::pair<uint64_t, Stream>> streams;
  size_t last_found = 0;  // in `streams`: calls come in runs on one stream
  // Launch records taken from the pool and not used yet.
  std::vector<SimLaunchRecord*> records;
};
thread_local SimBackend::Batch SimBackend::tls_batch_;

void SimBackend::BeginBatch() {
  Batch& batch = tls_batch_;
  batch.owner = id_;
  batch.token = next_batch_token.fetch_add(1, std::memory_order_relaxed);
  batch.records.clear();  // left by a batch that never ended
  batch.streams.clear();
  batch.destroyed_seen = streams_destroyed_.load(std::memory_order_acquire);
}

void SimBackend::EndBatch() {
  Batch& batch = tls_batch_;
  if (batch.owner != id_) return;
  batch.owner = 0;
  for (const std::shared_ptr<SimStream>& stream : batch.held) {
    stream->Release();
  }
  batch.held.clear();
  batch.streams.clear();
  launches_->Return(&batch.records);
}

void SimBackend::MaybeHold(const std::shared_ptr<SimStream>& stream) const {
  Batch& batch = tls_batch_;
  if (batch.owner == id_ && stream->Hold(batch.token)) {
    batch.held.push_back(stream);
  }
}

absl::StatusOr<std::unique_ptr<SimBackend>> SimBackend::Create(
    Options options) {
  const int n = options.num_devices;
  if (n < 1 || n > kMaxDevices) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_devices must be in [1, ", kMaxDevices, "], got ", n));
  }
  if (options.memory_bytes == 0) {
    return absl::InvalidArgumentError("memory_bytes must be positive");
  }
  WEFT_ASSIGN_OR_RETURN(
      std::vector<double> bandwidth,
      SimCopies::BandwidthMatrix(
          n, options.bandwidth_gbps, options.host_to_device_gbps,
          options.device_to_host_gbps, options.device_to_device_gbps));
  if (options.max_concurrent_kernels < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_concurrent_kernels must be >= 1, got ",
                     options.max_concurrent_kernels));
  }
  if (options.worker_stall_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("worker_stall_timeout must be positive");
  }
  if (options.worker_spin < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("worker_spin must not be negative");
  }
  if (options.worker_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker_threads must be >= 0, got ", options.worker_threads));
  }
  if (!(options.time_scale >= 0) || std::isinf(options.time_scale)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "time_scale must be finite and >= 0, got ", options.time_scale));
  }
  std::vector<LaunchFault> faults = std::move(options.launch_faults);
  options.launch_faults.clear();
  auto backend = std::unique_ptr<SimBackend>(
      new SimBackend(std::move(options), std::move(bandwidth)));
  for (LaunchFault& fault : faults) {
    WEFT_RETURN_IF_ERROR(backend->InjectLaunchFault(std::move(fault)));
  }
  return backend;
}

SimBackend::SimBackend(Options options, std::vector<double> bandwidth_gbps)
    : id_(next_backend_id.fetch_add(1, std::memory_order_relaxed)),
      options_(std::move(options)),
      num_devices_(options_.num_devices),
      clock_(options_.time_scale),
      faults_(options_.num_devices) {
  const int n = num_devices_;
  std::vector<std::string> names;
  for (int d = 0; d < n; ++d) {
    DeviceInfo info;
    info.index = d;
    info.name = options_.device_name;
    info.uuid = absl::StrFormat("GPU-5e1a0000-0000-4000-8000-%012x", d);
    info.simulated = true;
    info.memory_total_bytes = options_.memory_bytes;
    device_infos_.push_back(info);
    names.push_back(info.name);
  }
  memory_ =
      std::make_unique<SimMemory>(std::move(names), options_.memory_bytes);
  std::vector<SimDeviceModel*> models;
  for (int d = 0; d < n; ++d) {
    models_.push_back(std::make_unique<SimDeviceModel>(
        &clock_, options_.max_concurrent_kernels));
    models.push_back(models_.back().get());
  }
  launches_ = std::make_unique<SimLaunches>(SimLaunches::Options{
      options_.kernels, memory_.get(), options_.launch_fault});
  copies_ = std::make_unique<SimCopies>(std::move(bandwidth_gbps),
                                        memory_.get(), std::move(models));
  int threads = options_.worker_threads;
  if (threads == 0) {
    const int hardware = static_cast<int>(std::thread::hardware_concurrency());
    threads = std::min(n, std::max(1, hardware - 1));
  }
  pool_ = std::make_unique<SimWorkerPool>(
      threads, options_.worker_stall_timeout, options_.worker_spin);
  // A graph's independent work runs side by side on up to 256 lanes:
  // lanes are streams that the pool's workers run, not threads, and the
  // device model, not the lanes, limits how many kernels run at once.
  StreamGraphRunner::Options graph_options;
  graph_options.max_lanes = 256;
  // Control nodes nested in graphs run as the device's own (control_ is
  // made below, before any graph can launch).
  graph_options.launch_control =
      [this](const DeviceGraphControl& control, StreamHandle stream,
             StreamHandle body_stream, int device, uint64_t scope) {
        return control_->Launch(control, stream, body_stream, device, scope);
      };
  // Graphs of kernels alone go onto their lanes as one item per lane.
  graph_options.launch_kernels =
      [this](absl::Span<const KernelLaunch* const> launches,
             absl::Span<const int> chain_of,
             absl::Span<const StreamHandle> streams) {
        return LaunchKernelChains(launches, chain_of, streams);
      };
  graphs_ = std::make_unique<StreamGraphRunner>(this, graph_options);
  control_ = std::make_unique<SimDeviceControl>(
      this, graphs_.get(),
      [memory = memory_.get()](DevicePtr ptr, uint64_t bytes, char* out) {
        return memory->Read(ptr, bytes, out);
      });
}

SimBackend::~SimBackend() {
  absl::flat_hash_map<uint64_t, Stream> streams;
  absl::flat_hash_map<uint64_t, Event> events;
  absl::flat_hash_map<uint64_t, PendingGate> gates;
  std::vector<std::shared_ptr<SimStream>> retired;
  {
    absl::MutexLock lock(&mu_);
    streams.swap(streams_);
    retired.swap(retired_);
    events.swap(events_);
    gates.swap(gates_);
  }
  // Stop every stream first: their pending and parked items are dropped
  // without running (callbacks included), so waking the work that waits
  // for its turn below runs nothing more.
  for (auto& [handle, stream] : streams) stream.queue->Stop();
  for (const std::shared_ptr<SimStream>& stream : retired) stream->Stop();
  for (const auto& model : models_) model->Close();
  for (auto& [handle, stream] : streams) stream.queue->Shutdown();
  for (const std::shared_ptr<SimStream>& stream : retired) stream->Shutdown();
}

int SimBackend::device_count() const { return num_devices_; }

DeviceInfo SimBackend::device_info(int device) const {
  if (device < 0 || device >= num_devices_) return DeviceInfo{-1};
  return device_infos_[device];
}

uint64_t SimBackend::memory_used_bytes(int device) const {
  return memory_->used_bytes(device);
}

uint64_t SimBackend::materialized_bytes(int device) const {
  return memory_->materialized_bytes(device);
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

absl::Status SimBackend::CheckHealthy(int device) const {
  WEFT_RETURN_IF_ERROR(CheckDevice(device));
  const SimDeviceHealth& health = models_[device]->health();
  if (health.lost()) return health.error();
  return absl::OkStatus();
}

bool SimBackend::device_lost(int device) const {
  return device >= 0 && device < num_devices_ &&
         models_[device]->health().lost();
}

absl::Status SimBackend::LoseDevice(int device, absl::string_view reason) {
  WEFT_RETURN_IF_ERROR(CheckDevice(device));
  models_[device]->health().Lose(absl::UnavailableError(
      absl::StrCat("device ", device, " (", device_infos_[device].name,
                   ") was lost: ", reason)));
  return absl::OkStatus();
}

absl::Status SimBackend::InjectLaunchFault(LaunchFault fault) {
  return faults_.Inject(std::move(fault));
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

absl::StatusOr<const SimBackend::Stream*> SimBackend::FindStreamForCall(
    StreamHandle handle, Stream* storage) const {
  Batch& batch = tls_batch_;
  if (batch.owner != id_) {
    WEFT_ASSIGN_OR_RETURN(*storage, FindStream(handle));
    return storage;
  }
  const uint64_t destroyed = streams_destroyed_.load(std::memory_order_acquire);
  if (batch.destroyed_seen != destroyed) {
    batch.streams.clear();
    batch.destroyed_seen = destroyed;
  }
  if (batch.last_found < batch.streams.size() &&
      batch.streams[batch.last_found].first == handle.value) {
    return &batch.streams[batch.last_found].second;
  }
  for (size_t i = 0; i < batch.streams.size(); ++i) {
    if (batch.streams[i].first == handle.value) {
      batch.last_found = i;
      return &batch.streams[i].second;
    }
  }
  WEFT_ASSIGN_OR_RETURN(Stream found, FindStream(handle));
  batch.last_found = batch.streams.size();
  batch.streams.emplace_back(handle.value, std::move(found));
  return &batch.streams.back().second;
}

absl::StatusOr<SimBackend::Event> SimBackend::FindEvent(
    EventHandle handle) const {
  absl::MutexLock lock(&mu_);
  auto it = events_.find(handle.value);
  if (it == events_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown event ", handle.value));
  }
  return it->second;
}

absl::StatusOr<DevicePtr> SimBackend::Allocate(int device, uint64_t bytes) {
  WEFT_RETURN_IF_ERROR(CheckHealthy(device));
  return memory_->Allocate(device, bytes);
}

absl::Status SimBackend::Free(DevicePtr ptr) {
  WEFT_RETURN_IF_ERROR(CheckDevice(ptr.device));
  return memory_->Free(ptr);
}

absl::Status SimBackend::CopyHostToDevice(DevicePtr dst, const void* src,
                                          uint64_t bytes,
                                          StreamHandle stream_handle) {
  return CopyHostToDevicePadded(dst, src, bytes, bytes, stream_handle);
}

absl::Status SimBackend::CopyHostToDevicePadded(DevicePtr dst, const void* src,
                                                uint64_t src_bytes,
                                                uint64_t bytes,
                                                StreamHandle stream_handle) {
  if (src_bytes > bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an upload of ", src_bytes, " bytes of data into ", bytes, " bytes"));
  }
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        PrepareCopy(stream_handle, bytes, {dst}, &storage));
  EnqueueCopy(*stream, copies_->Upload(dst, src, src_bytes, bytes));
  return absl::OkStatus();
}

absl::Status SimBackend::CopyDeviceToHost(void* dst, DevicePtr src,
                                          uint64_t bytes,
                                          StreamHandle stream_handle) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        PrepareCopy(stream_handle, bytes, {src}, &storage));
  EnqueueCopy(*stream, copies_->Download(dst, src, bytes));
  return absl::OkStatus();
}

absl::Status SimBackend::CopyDeviceToHostBuffer(HostBuffer* dst, DevicePtr src,
                                                uint64_t bytes,
                                                StreamHandle stream_handle) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        PrepareCopy(stream_handle, bytes, {src}, &storage));
  EnqueueCopy(*stream, copies_->DownloadBuffer(dst, src, bytes));
  return absl::OkStatus();
}

absl::Status SimBackend::CopyDeviceToDevice(DevicePtr dst, DevicePtr src,
                                            uint64_t bytes,
                                            StreamHandle stream_handle) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(
      const Stream* stream,
      PrepareCopy(stream_handle, bytes, {src, dst}, &storage));
  EnqueueCopy(*stream, copies_->Copy(dst, src, bytes));
  return absl::OkStatus();
}

absl::StatusOr<const SimBackend::Stream*> SimBackend::PrepareCopy(
    StreamHandle stream_handle, uint64_t bytes,
    std::initializer_list<DevicePtr> ranges, Stream* storage) const {
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        FindStreamForCall(stream_handle, storage));
  WEFT_RETURN_IF_ERROR(CheckHealthy(stream->device));
  for (const DevicePtr& ptr : ranges) {
    WEFT_RETURN_IF_ERROR(CheckHealthy(ptr.device));
    WEFT_RETURN_IF_ERROR(memory_->CheckRange(ptr, bytes));
  }
  return stream;
}

void SimBackend::EnqueueCopy(const Stream& stream,
                             std::unique_ptr<SimCopyRecord> copy) const {
  MaybeHold(stream.queue);
  copies_->Enqueue(*stream.queue, std::move(copy));
}

absl::StatusOr<SimLaunches::RecordPtr> SimBackend::MakeLaunch(
    const KernelLaunch& launch, int device) {
  // A user kernel is not run: it occupies its stream for its cost and
  // leaves its buffers as they are (the header says why).
  const CpuKernel* kernel = launches_->KernelFor(launch);
  if (kernel == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "op '", launch.op, "' is not implemented by the simulated backend"));
  }
  WEFT_RETURN_IF_ERROR(CheckHealthy(device));
  WEFT_RETURN_IF_ERROR(memory_->CheckArgs(launch.args));
  Batch& batch = tls_batch_;
  return launches_->Make(launch, ClampDurationUs(launch.cost_us), kernel,
                         device, models_[device].get(),
                         faults_.Next(device, launch.op),
                         batch.owner == id_ ? &batch.records : nullptr);
}

absl::Status SimBackend::Launch(const KernelLaunch& launch,
                                StreamHandle stream_handle) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        FindStreamForCall(stream_handle, &storage));
  const int device = stream->device;
  WEFT_ASSIGN_OR_RETURN(SimLaunches::RecordPtr record,
                        MakeLaunch(launch, device));
  MaybeHold(stream->queue);
  SimLaunchRecord* const kept = record.get();  // owned by `work` from here
  // The work holds nothing but the record: small enough to be stored in
  // place, without an allocation.
  auto work =
      [record = std::move(record)](SimStream::Timing& timing) -> absl::Status {
    return record->owner->Run(*record, timing);
  };
  static_assert(sizeof(work) <= 2 * sizeof(void*),
                "stored in place by SimStream::Work");
  models_[device]->EnqueueInTurn(*stream->queue, kept->engine,
                                 kept->launch.cost_us, &kept->ticket,
                                 std::move(work));
  return absl::OkStatus();
}

absl::Status SimBackend::LaunchKernelChains(
    absl::Span<const KernelLaunch* const> launches,
    absl::Span<const int> chain_of, absl::Span<const StreamHandle> streams) {
  if (launches.size() != chain_of.size() || streams.empty()) {
    return absl::InvalidArgumentError(
        "a stream and one chain per launch are required");
  }
  // The streams (a raw pointer stays valid while the calling thread does
  // not destroy the stream).
  absl::InlinedVector<SimStream*, 8> queues;
  absl::InlinedVector<uint64_t, 8> scopes;
  int device = -1;
  for (StreamHandle handle : streams) {
    Stream storage;
    WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                          FindStreamForCall(handle, &storage));
    if (device >= 0 && stream->device != device) {
      return absl::InvalidArgumentError(
          "the chains of one launch must be on streams of one device");
    }
    device = stream->device;
    // Held until the batch ends, as for single launches.
    MaybeHold(stream->queue);
    queues.push_back(stream->queue.get());
    // Paced tickets are per error scope; unpaced ones ignore it.
    scopes.push_back(clock_.paced() ? stream->queue->scope() : 0);
  }
  // Every launch is checked before any is enqueued.
  absl::InlinedVector<SimLaunches::RecordPtr, 8> heads(streams.size());
  absl::InlinedVector<SimLaunchRecord*, 8> tails(streams.size(), nullptr);
  absl::InlinedVector<SimDeviceModel::TicketRequest, 16> tickets;
  tickets.reserve(launches.size());
  for (size_t i = 0; i < launches.size(); ++i) {
    const int chain = chain_of[i];
    if (chain < 0 || static_cast<size_t>(chain) >= streams.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "launch ", i, " names chain ", chain, " of ", streams.size()));
    }
    WEFT_ASSIGN_OR_RETURN(SimLaunches::RecordPtr record,
                          MakeLaunch(*launches[i], device));
    tickets.push_back(
        SimDeviceModel::TicketRequest{record->engine, record->launch.cost_us,
                                      &record->ticket, scopes[chain]});
    if (heads[chain] == nullptr) {
      heads[chain] = std::move(record);
    } else {
      SimLaunches::Append(*heads[chain], tails[chain], std::move(record));
    }
  }
  absl::InlinedVector<SimDeviceModel::QueuedWork, 8> works;
  for (size_t c = 0; c < streams.size(); ++c) {
    if (heads[c] == nullptr) continue;
    auto work = [first = std::move(heads[c])](
                    SimStream::Timing& timing) -> absl::Status {
      return first->owner->RunChain(*first, timing);
    };
    static_assert(sizeof(work) <= 2 * sizeof(void*),
                  "stored in place by SimStream::Work");
    works.push_back(SimDeviceModel::QueuedWork{queues[c], std::move(work)});
  }
  if (!works.empty()) {
    models_[device]->EnqueueInTurn(tickets, absl::MakeSpan(works));
  }
  return absl::OkStatus();
}

absl::Status SimBackend::AddHostCallback(StreamHandle stream_handle,
                                         HostCallback callback) {
  if (!callback) return absl::InvalidArgumentError("empty host callback");
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        FindStreamForCall(stream_handle, &storage));
  MaybeHold(stream->queue);
  stream->queue->EnqueueCallback(std::move(callback));
  return absl::OkStatus();
}

absl::Status SimBackend::SetErrorScope(StreamHandle stream_handle,
                                       uint64_t scope) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        FindStreamForCall(stream_handle, &storage));
  stream->queue->SetScope(scope);
  return absl::OkStatus();
}

absl::Status SimBackend::AbortErrorScope(StreamHandle stream_handle,
                                         uint64_t scope, absl::Status status) {
  if (status.ok()) {
    return absl::InvalidArgumentError("AbortErrorScope needs an error status");
  }
  WEFT_ASSIGN_OR_RETURN(Stream stream, FindStream(stream_handle));
  // The scope's device graphs went onto lanes: abort it there too.
  for (StreamHandle lane : graphs_->ScopeLanes(scope)) {
    absl::StatusOr<Stream> found = FindStream(lane);
    if (found.ok()) {
      found->queue->AbortScope(scope, status, options_.interrupt_aborted_work);
    }
  }
  stream.queue->AbortScope(scope, std::move(status),
                           options_.interrupt_aborted_work);
  return absl::OkStatus();
}

void SimBackend::ReleaseErrorScope(StreamHandle stream_handle, uint64_t scope) {
  absl::StatusOr<Stream> stream = FindStream(stream_handle);
  if (stream.ok()) stream->queue->ForgetScope(scope);
  std::vector<StreamHandle> lanes = graphs_->ScopeLanes(scope);
  if (lanes.empty()) return;
  graphs_->ForgetScope(scope);
  for (StreamHandle lane : lanes) {
    absl::StatusOr<Stream> found = FindStream(lane);
    if (found.ok()) found->queue->ForgetScope(scope);
  }
}

}  // namespace weft::runtime
