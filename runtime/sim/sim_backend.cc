#include "runtime/sim/sim_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
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

std::atomic<uint64_t> next_batch_token{1};

// The calling thread's last kernel lookup: a launch of the same op on the
// same backend skips hashing its name. Backends are told apart by an id
// that is never reused (an address may be).
struct KernelLookup {
  uint64_t backend = 0;
  std::string op;
  const CpuKernel* kernel = nullptr;
};
thread_local KernelLookup tls_kernel_lookup;
std::atomic<uint64_t> next_backend_id{1};

// Whether `kernel` is the built-in function `fn` (cpu_kernels.h).
bool IsBuiltin(const CpuKernel* kernel,
               absl::Status (*fn)(absl::Span<const HostArg>)) {
  if (kernel == nullptr) return false;
  auto* const* target =
      kernel->target<absl::Status (*)(absl::Span<const HostArg>)>();
  return target != nullptr && *target == fn;
}

// Whether a scalar argument is a zero whose bytes are all zero in every
// dtype (not -0.0).
bool IsPlainZero(const KernelArg& arg) {
  if (const auto* f = std::get_if<float>(&arg)) {
    return *f == 0 && !std::signbit(*f);
  }
  if (const auto* d = std::get_if<double>(&arg)) {
    return *d == 0 && !std::signbit(*d);
  }
  if (const auto* i = std::get_if<int32_t>(&arg)) return *i == 0;
  if (const auto* l = std::get_if<int64_t>(&arg)) return *l == 0;
  return false;
}

// A duration the virtual clock can take: 0 for negative or NaN, at most
// SimBackend::kMaxDurationUs.
double DurationUs(double us) {
  if (!(us > 0)) return 0;
  return std::min(us, SimBackend::kMaxDurationUs);
}

}  // namespace

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
  // Launch records taken from the pool and not used yet.
  std::vector<LaunchRecord*> records;
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
  if (!batch.records.empty()) {
    absl::MutexLock lock(&records_mu_);
    free_records_.insert(free_records_.end(), batch.records.begin(),
                         batch.records.end());
    batch.records.clear();
  }
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
    return absl::InvalidArgumentError(absl::StrCat(
        "num_devices must be in [1, ", kMaxDevices, "], got ", n));
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
  if (!options.bandwidth_gbps.empty()) {
    if (static_cast<int>(options.bandwidth_gbps.size()) != n + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bandwidth_gbps must have num_devices + 1 = ", n + 1,
          " rows (the host last), got ", options.bandwidth_gbps.size()));
    }
    for (int r = 0; r <= n; ++r) {
      const std::vector<double>& row = options.bandwidth_gbps[r];
      if (static_cast<int>(row.size()) != n + 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("bandwidth_gbps[", r, "] must have ", n + 1,
                         " entries, got ", row.size()));
      }
      for (int c = 0; c <= n; ++c) {
        if (std::isnan(row[c]) || row[c] < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("bandwidth_gbps[", r, "][", c, "] must be >= 0, got ",
                           row[c]));
        }
        if (row[c] == 0 && r != c && (r == n || c == n)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "bandwidth_gbps[", r, "][", c, "]: device ", r == n ? c : r,
              " needs a link to and from the host"));
        }
      }
    }
  }
  if (options.max_concurrent_kernels < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_concurrent_kernels must be >= 1, got ",
                     options.max_concurrent_kernels));
  }
  if (options.worker_stall_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("worker_stall_timeout must be positive");
  }
  if (options.worker_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker_threads must be >= 0, got ", options.worker_threads));
  }
  if (!(options.time_scale >= 0) || std::isinf(options.time_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("time_scale must be finite and >= 0, got ",
                     options.time_scale));
  }
  std::vector<LaunchFault> faults = std::move(options.launch_faults);
  options.launch_faults.clear();
  auto backend =
      std::unique_ptr<SimBackend>(new SimBackend(std::move(options)));
  for (LaunchFault& fault : faults) {
    WEFT_RETURN_IF_ERROR(backend->InjectLaunchFault(std::move(fault)));
  }
  return backend;
}

SimBackend::SimBackend(Options options)
    : id_(next_backend_id.fetch_add(1, std::memory_order_relaxed)),
      options_(std::move(options)),
      num_devices_(options_.num_devices),
      clock_(options_.time_scale) {
  if (options_.kernels == nullptr) {
    owned_kernels_ =
        std::make_unique<CpuKernelTable>(CpuKernelTable::WithBuiltins());
    kernels_ = owned_kernels_.get();
  } else {
    kernels_ = options_.kernels;
  }
  if (const CpuKernel* spin = kernels_->Find("spin");
      IsBuiltin(spin, &SpinKernel)) {
    spin_kernel_ = spin;
  }
  if (const CpuKernel* fill = kernels_->Find("fill");
      IsBuiltin(fill, &FillKernel)) {
    fill_kernel_ = fill;
  }
  const int n = num_devices_;
  bandwidth_gbps_.assign((n + 1) * (n + 1), 0);
  for (int from = 0; from <= n; ++from) {
    for (int to = 0; to <= n; ++to) {
      double gbps = 0;
      if (!options_.bandwidth_gbps.empty()) {
        gbps = options_.bandwidth_gbps[from][to];
      } else {
        if (from == n) {
          gbps = options_.host_to_device_gbps;
        } else if (to == n) {
          gbps = options_.device_to_host_gbps;
        } else {
          gbps = options_.device_to_device_gbps;
        }
        // The scalar options' zero or negative is instantaneous.
        if (!(gbps > 0)) gbps = std::numeric_limits<double>::infinity();
      }
      bandwidth_gbps_[from * (n + 1) + to] = gbps;
    }
  }
  for (int d = 0; d < n; ++d) {
    models_.push_back(
        std::make_unique<DeviceModel>(options_.max_concurrent_kernels));
  }
  int threads = options_.worker_threads;
  if (threads == 0) {
    const int hardware = static_cast<int>(std::thread::hardware_concurrency());
    threads = std::min(n, std::max(1, hardware - 1));
  }
  pool_ = std::make_unique<SimWorkerPool>(threads,
                                          options_.worker_stall_timeout);
  graphs_ = std::make_unique<StreamGraphRunner>(
      this, StreamGraphRunner::Options{});
  absl::MutexLock lock(&mu_);
  for (int d = 0; d < n; ++d) {
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

std::shared_ptr<SimStream::Waker> SimBackend::AdvanceTurnLocked(
    DeviceModel& model, Engine engine) {
  EngineBook& book = model.books[EngineIndex(engine)];
  ++book.next_to_book;
  while (!book.given_up.empty() &&
         *book.given_up.begin() == book.next_to_book) {
    book.given_up.erase(book.given_up.begin());
    ++book.next_to_book;
  }
  auto it = book.turn_waiters.find(book.next_to_book);
  if (it == book.turn_waiters.end()) return nullptr;
  std::shared_ptr<SimStream::Waker> waker = std::move(it->second);
  book.turn_waiters.erase(it);
  return waker;
}

SimBackend::Ticket::~Ticket() {
  if (booked) return;
  std::shared_ptr<SimStream::Waker> next;
  {
    absl::MutexLock lock(&model->mu);
    EngineBook& book = model->books[EngineIndex(engine)];
    book.turn_waiters.erase(number);
    if (number != book.next_to_book) {
      book.given_up.insert(number);
      return;
    }
    next = AdvanceTurnLocked(*model, engine);
  }
  if (next != nullptr) next->Wake();
}

SimBackend::Allocation::~Allocation() {
  if (data != nullptr && materialized != nullptr) {
    materialized->fetch_sub(size, std::memory_order_relaxed);
  }
}

SimBackend::~SimBackend() {
  absl::flat_hash_map<uint64_t, Stream> streams;
  absl::flat_hash_map<uint64_t, Event> events;
  absl::flat_hash_map<uint64_t, PendingGate> gates;
  {
    absl::MutexLock lock(&mu_);
    streams.swap(streams_);
    events.swap(events_);
    gates.swap(gates_);
  }
  // Stop every stream first: their pending and parked items are dropped
  // without running (callbacks included), so waking the work that waits
  // for its turn below runs nothing more.
  for (auto& [handle, stream] : streams) stream.queue->Stop();
  std::vector<std::shared_ptr<SimStream::Waker>> parked;
  for (const auto& model : models_) {
    absl::MutexLock lock(&model->mu);
    model->closed = true;  // work waiting for its turn gives up
    for (EngineBook& book : model->books) {
      for (auto& [ticket, waker] : book.turn_waiters) {
        parked.push_back(std::move(waker));
      }
      book.turn_waiters.clear();
    }
  }
  for (const auto& waker : parked) waker->Wake();
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

uint64_t SimBackend::materialized_bytes(int device) const {
  if (device < 0 || device >= num_devices_) return 0;
  return models_[device]->materialized.load(std::memory_order_relaxed);
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
  const SimDeviceHealth& health = models_[device]->health;
  if (health.lost()) return health.error();
  return absl::OkStatus();
}

bool SimBackend::device_lost(int device) const {
  return device >= 0 && device < num_devices_ &&
         models_[device]->health.lost();
}

absl::Status SimBackend::LoseDevice(int device, absl::string_view reason) {
  WEFT_RETURN_IF_ERROR(CheckDevice(device));
  models_[device]->health.Lose(absl::UnavailableError(
      absl::StrCat("device ", device, " (", device_infos_[device].name,
                   ") was lost: ", reason)));
  return absl::OkStatus();
}

absl::Status SimBackend::InjectLaunchFault(LaunchFault fault) {
  if (fault.device < -1 || fault.device >= num_devices_) {
    return absl::InvalidArgumentError(
        absl::StrCat("launch fault on device ", fault.device, ": there are ",
                     num_devices_, " devices (-1 is any)"));
  }
  if (fault.nth == 0) {
    return absl::InvalidArgumentError("launch fault: nth counts from 1");
  }
  if (fault.status.ok()) {
    return absl::InvalidArgumentError("launch fault: the status must be an "
                                      "error");
  }
  absl::MutexLock lock(&fault_mu_);
  const uint64_t base = fault.device < 0
                            ? total_launches_.load()
                            : models_[fault.device]->launches.load();
  faults_.push_back(
      ArmedFault{fault.device, base + fault.nth, std::move(fault.status)});
  has_faults_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status SimBackend::NextLaunchFault(int device,
                                         const KernelLaunch& launch) {
  const uint64_t on_device = ++models_[device]->launches;
  const uint64_t total = ++total_launches_;
  if (!has_faults_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::MutexLock lock(&fault_mu_);
  for (size_t i = 0; i < faults_.size(); ++i) {
    const ArmedFault& f = faults_[i];
    const bool hit = f.device < 0 ? f.at == total
                                  : f.device == device && f.at == on_device;
    if (!hit) continue;
    absl::Status status(
        f.status.code(),
        absl::StrCat(f.status.message(), " (launch ",
                     f.device < 0 ? total : on_device,
                     f.device < 0 ? " overall" : "", " on device ", device,
                     ", op '", launch.op, "')"));
    faults_.erase(faults_.begin() + i);
    has_faults_.store(!faults_.empty(), std::memory_order_release);
    return status;
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

absl::StatusOr<const SimBackend::Stream*> SimBackend::FindStreamForCall(
    StreamHandle handle, Stream* storage) const {
  Batch& batch = tls_batch_;
  if (batch.owner != id_) {
    WEFT_ASSIGN_OR_RETURN(*storage, FindStream(handle));
    return storage;
  }
  const uint64_t destroyed =
      streams_destroyed_.load(std::memory_order_acquire);
  if (batch.destroyed_seen != destroyed) {
    batch.streams.clear();
    batch.destroyed_seen = destroyed;
  }
  for (const auto& [cached, stream] : batch.streams) {
    if (cached == handle.value) return &stream;
  }
  WEFT_ASSIGN_OR_RETURN(Stream found, FindStream(handle));
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

absl::StatusOr<StreamHandle> SimBackend::CreateStream(int device) {
  WEFT_RETURN_IF_ERROR(CheckHealthy(device));
  absl::MutexLock lock(&mu_);
  const uint64_t handle = next_handle_++;
  Stream stream;
  stream.device = device;
  stream.queue = std::make_shared<SimStream>(
      absl::StrCat("device ", device, " stream ", handle), &clock_,
      &models_[device]->health, pool_.get());
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
    streams_destroyed_.fetch_add(1, std::memory_order_release);
  }
  // Its errors were reported to its callbacks already.
  queue->Release();
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
  std::shared_ptr<SimStream> previous;
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
  // The mark is taken under the stream's own lock: SimStream never calls
  // back into the backend, so this nests safely.
  event->second.mark = stream->second.queue->Record();
  if (event->second.stream != stream->second.queue) {
    previous = std::move(event->second.stream);
    event->second.stream = stream->second.queue;
  }
  return absl::OkStatus();
}

absl::Status SimBackend::StreamWaitEvent(StreamHandle stream_handle,
                                         EventHandle event_handle) {
  std::shared_ptr<SimStream> waiter;
  std::shared_ptr<SimStream> target;
  std::shared_ptr<const SimStream::Mark> mark;
  {
    absl::MutexLock lock(&mu_);  // one lookup of both, on a hot path
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
    mark = event->second.mark;
  }
  // Never recorded (a no-op, as in CUDA) or recorded on this very stream
  // (FIFO order suffices). Otherwise a wait item, even when the work has
  // completed already: it still moves the stream's virtual time.
  if (target == nullptr || target == waiter) return absl::OkStatus();
  MaybeHold(waiter);
  waiter->EnqueueWait(std::move(target), std::move(mark));
  return absl::OkStatus();
}

absl::StatusOr<bool> SimBackend::QueryEvent(EventHandle event_handle) {
  WEFT_ASSIGN_OR_RETURN(Event event, FindEvent(event_handle));
  const std::shared_ptr<SimStream>& target = event.stream;
  const std::shared_ptr<const SimStream::Mark>& mark = event.mark;
  return target == nullptr || target->MarkTime(*mark).has_value();
}

absl::StatusOr<double> SimBackend::EventTimeUs(EventHandle event_handle) {
  WEFT_ASSIGN_OR_RETURN(Event event, FindEvent(event_handle));
  const std::shared_ptr<SimStream>& target = event.stream;
  const std::shared_ptr<const SimStream::Mark>& mark = event.mark;
  if (target == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("event ", event_handle.value, " was never recorded"));
  }
  std::optional<double> time = target->MarkTime(*mark);
  if (!time.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("event ", event_handle.value, " has not completed"));
  }
  return *time;
}

absl::Status SimBackend::SynchronizeStream(StreamHandle stream_handle) {
  WEFT_ASSIGN_OR_RETURN(Stream stream, FindStream(stream_handle));
  if (stream.queue->OnWorkerThread()) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream ", stream_handle.value,
                     " cannot be synchronized from its own thread"));
  }
  stream.queue->Release();  // nothing held may wait on this very thread
  return stream.queue->Synchronize();
}

absl::StatusOr<DevicePtr> SimBackend::Allocate(int device, uint64_t bytes) {
  WEFT_RETURN_IF_ERROR(CheckHealthy(device));
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
  allocation->materialized = &models_[device]->materialized;
  // No host memory yet (Materialize). Zero-byte allocations still get a
  // distinct address.
  const uint64_t backing = bytes == 0 ? 1 : bytes;
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
                                                         uint64_t bytes,
                                                         Need need) const {
  WEFT_RETURN_IF_ERROR(CheckDevice(ptr.device));
  const Device& dev = devices_[ptr.device];
  auto it = dev.allocations.upper_bound(ptr.address);
  if (it != dev.allocations.begin()) {
    --it;
    Allocation& a = *it->second;
    const uint64_t offset = ptr.address - a.address;
    if (offset <= a.size && bytes <= a.size - offset) {
      if (need == Need::kContents) {
        WEFT_RETURN_IF_ERROR(Materialize(ptr.device, a));
      }
      char* data = a.data == nullptr ? nullptr : a.data.get() + offset;
      return Resolved{it->second, data};
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device ", ptr.device, ": [", Hex(ptr.address), ", +",
                   bytes, ") is not inside an allocation"));
}

absl::StatusOr<SimBackend::Resolved> SimBackend::ResolveUnlocked(
    DevicePtr ptr, uint64_t bytes, Need need) const {
  absl::MutexLock lock(&mu_);
  return Resolve(ptr, bytes, need);
}

absl::Status SimBackend::Materialize(int device,
                                     Allocation& allocation) const {
  if (allocation.data != nullptr) return absl::OkStatus();
  // calloc: zeroed pages the OS hands out lazily, so even a large buffer
  // costs no host time to zero here. A zero-byte allocation gets a byte,
  // so that its address is never null.
  const uint64_t bytes = std::max<uint64_t>(allocation.size, 1);
  allocation.data.reset(static_cast<char*>(std::calloc(bytes, 1)));
  if (allocation.data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "device ", device, ": host memory for the contents of a ",
        allocation.size, "-byte simulated allocation is exhausted"));
  }
  allocation.materialized->fetch_add(allocation.size,
                                     std::memory_order_relaxed);
  return absl::OkStatus();
}

double SimBackend::CopyUs(uint64_t bytes, int from, int to) const {
  const double gbps = bandwidth_gbps_[from * (num_devices_ + 1) + to];
  if (gbps == 0 && from != to) {
    // No direct link between two devices: staged through the host.
    return CopyUs(bytes, from, num_devices_) + CopyUs(bytes, num_devices_, to);
  }
  if (!(gbps > 0) || std::isinf(gbps)) return 0;
  // 1 GB/s moves 1e3 bytes per microsecond.
  return static_cast<double>(bytes) / (gbps * 1e3);
}

void SimBackend::EnqueueInTurn(SimStream& queue, int device, Engine engine,
                               double duration, std::optional<Ticket>* ticket,
                               SimStream::Work work) const {
  if (clock_.paced() || !(duration > 0)) {
    queue.Enqueue(std::move(work));
    return;
  }
  // Unpaced: take a ticket and enqueue under the device's lock, so tickets
  // follow the order of the work on every stream.
  DeviceModel& model = *models_[device];
  absl::MutexLock lock(&model.mu);
  EngineBook& book = model.books[EngineIndex(engine)];
  ticket->emplace(&model, engine, book.next_ticket++);
  queue.Enqueue(std::move(work));
}

absl::Status SimBackend::CopyHostToDevice(DevicePtr dst, const void* src,
                                          uint64_t bytes,
                                          StreamHandle stream_handle) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        FindStreamForCall(stream_handle, &storage));
  WEFT_RETURN_IF_ERROR(CheckHealthy(stream->device));
  WEFT_RETURN_IF_ERROR(CheckHealthy(dst.device));
  WEFT_RETURN_IF_ERROR(ResolveUnlocked(dst, bytes).status());
  auto copy = std::make_unique<CopyRecord>();
  copy->kind = CopyKind::kHostToDevice;
  copy->dst = dst;
  copy->host_src = src;
  copy->bytes = bytes;
  copy->engine_device = dst.device;
  copy->engine = Engine::kHostToDevice;
  copy->duration = CopyUs(bytes, num_devices_, dst.device);
  EnqueueCopy(*stream, std::move(copy));
  return absl::OkStatus();
}

absl::Status SimBackend::CopyDeviceToHost(void* dst, DevicePtr src,
                                          uint64_t bytes,
                                          StreamHandle stream_handle) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        FindStreamForCall(stream_handle, &storage));
  WEFT_RETURN_IF_ERROR(CheckHealthy(stream->device));
  WEFT_RETURN_IF_ERROR(CheckHealthy(src.device));
  WEFT_RETURN_IF_ERROR(ResolveUnlocked(src, bytes).status());
  auto copy = std::make_unique<CopyRecord>();
  copy->kind = CopyKind::kDeviceToHost;
  copy->src = src;
  copy->host_dst = dst;
  copy->bytes = bytes;
  copy->engine_device = src.device;
  copy->engine = Engine::kDeviceToHost;
  copy->duration = CopyUs(bytes, src.device, num_devices_);
  EnqueueCopy(*stream, std::move(copy));
  return absl::OkStatus();
}

absl::Status SimBackend::CopyDeviceToDevice(DevicePtr dst, DevicePtr src,
                                            uint64_t bytes,
                                            StreamHandle stream_handle) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        FindStreamForCall(stream_handle, &storage));
  WEFT_RETURN_IF_ERROR(CheckHealthy(stream->device));
  WEFT_RETURN_IF_ERROR(CheckHealthy(src.device));
  WEFT_RETURN_IF_ERROR(CheckHealthy(dst.device));
  WEFT_RETURN_IF_ERROR(ResolveUnlocked(src, bytes).status());
  WEFT_RETURN_IF_ERROR(ResolveUnlocked(dst, bytes).status());
  auto copy = std::make_unique<CopyRecord>();
  copy->kind = CopyKind::kDeviceToDevice;
  copy->dst = dst;
  copy->src = src;
  copy->bytes = bytes;
  // Copies into a device run on its device-to-device engine, whichever
  // stream issued them.
  copy->engine_device = dst.device;
  copy->engine = Engine::kDeviceToDevice;
  copy->duration = CopyUs(bytes, src.device, dst.device);
  EnqueueCopy(*stream, std::move(copy));
  return absl::OkStatus();
}

void SimBackend::EnqueueCopy(const Stream& stream,
                             std::unique_ptr<CopyRecord> copy) const {
  MaybeHold(stream.queue);
  CopyRecord* const kept = copy.get();  // owned by the work from here
  EnqueueInTurn(*stream.queue, kept->engine_device, kept->engine,
                kept->duration, &kept->ticket,
                [this, copy = std::move(copy)](SimStream::Timing& timing) {
                  return RunCopy(*copy, timing);
                });
}

absl::Status SimBackend::RunCopy(CopyRecord& copy,
                                 SimStream::Timing& timing) const {
  // The bytes move once; before its turn the stream parks and comes back
  // to book (`moved` remembers).
  if (!copy.moved) {
    WEFT_RETURN_IF_ERROR(MoveBytes(copy));
    copy.moved = true;
  }
  return BookInTurn(copy.engine_device, copy.engine, copy.duration,
                    scheduler::kOccupancyUnits,
                    copy.ticket.has_value() ? &*copy.ticket : nullptr, timing);
}

absl::Status SimBackend::MoveBytes(const CopyRecord& copy) const {
  switch (copy.kind) {
    case CopyKind::kHostToDevice: {
      WEFT_RETURN_IF_ERROR(CheckHealthy(copy.dst.device));
      if (copy.bytes == 0) {
        return ResolveUnlocked(copy.dst, copy.bytes).status();
      }
      WEFT_ASSIGN_OR_RETURN(
          Resolved to, ResolveUnlocked(copy.dst, copy.bytes, Need::kContents));
      std::memcpy(to.data, copy.host_src, copy.bytes);
      return absl::OkStatus();
    }
    case CopyKind::kDeviceToHost: {
      WEFT_RETURN_IF_ERROR(CheckHealthy(copy.src.device));
      WEFT_ASSIGN_OR_RETURN(Resolved from,
                            ResolveUnlocked(copy.src, copy.bytes));
      if (copy.bytes == 0) return absl::OkStatus();
      if (from.data == nullptr) {
        std::memset(copy.host_dst, 0, copy.bytes);  // no contents: zeros
      } else {
        std::memcpy(copy.host_dst, from.data, copy.bytes);
      }
      return absl::OkStatus();
    }
    case CopyKind::kDeviceToDevice: {
      WEFT_RETURN_IF_ERROR(CheckHealthy(copy.src.device));
      WEFT_RETURN_IF_ERROR(CheckHealthy(copy.dst.device));
      WEFT_ASSIGN_OR_RETURN(Resolved from,
                            ResolveUnlocked(copy.src, copy.bytes));
      // Zeros onto memory without contents change nothing.
      const Need need = from.data != nullptr && copy.bytes > 0
                            ? Need::kContents
                            : Need::kAddress;
      WEFT_ASSIGN_OR_RETURN(Resolved to,
                            ResolveUnlocked(copy.dst, copy.bytes, need));
      if (copy.bytes == 0 || to.data == nullptr) return absl::OkStatus();
      if (from.data == nullptr) {
        std::memset(to.data, 0, copy.bytes);
      } else {
        std::memmove(to.data, from.data, copy.bytes);
      }
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status SimBackend::Launch(const KernelLaunch& launch,
                                StreamHandle stream_handle) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        FindStreamForCall(stream_handle, &storage));
  // A user kernel is not run: it occupies its stream for its cost and
  // leaves its buffers as they are (the header says why).
  const CpuKernel* kernel = launch.user_kernel != nullptr
                                ? &user_kernel_stand_in_
                                : FindKernel(launch.op);
  if (kernel == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "op '", launch.op, "' is not implemented by the simulated backend"));
  }
  const int device = stream->device;
  WEFT_RETURN_IF_ERROR(CheckHealthy(device));
  bool has_buffers = false;
  for (const KernelArg& arg : launch.args) {
    has_buffers |= std::holds_alternative<DeviceBufferArg>(arg);
  }
  if (has_buffers) {
    absl::MutexLock lock(&mu_);
    for (const KernelArg& arg : launch.args) {
      if (const auto* b = std::get_if<DeviceBufferArg>(&arg)) {
        WEFT_RETURN_IF_ERROR(Resolve(b->ptr, b->size_bytes).status());
      }
    }
  }
  RecordPtr record = TakeLaunchRecord();
  record->launch.op = launch.op;
  record->launch.args = launch.args;
  record->launch.cost_us = DurationUs(launch.cost_us);
  record->launch.occupancy_units = launch.occupancy_units;
  record->launch.engine = launch.engine;
  record->launch.user_kernel = launch.user_kernel;
  record->launch.module = launch.module;
  record->kernel = kernel;
  record->contents = ContentsOf(kernel, launch);
  record->device = device;
  // A COPY-engine node runs on its device's device-to-device engine, one
  // copy at a time; everything else shares the kernels' capacity.
  if (launch.engine == scheduler::Engine::kCopy) {
    record->engine = Engine::kDeviceToDevice;
    record->units = scheduler::kOccupancyUnits;
  } else {
    record->engine = Engine::kKernels;
    record->units = launch.occupancy_units;
  }
  record->fault = NextLaunchFault(device, launch);
  MaybeHold(stream->queue);
  LaunchRecord* const kept = record.get();  // owned by `work` from here
  // The work holds nothing but the record: small enough to be stored in
  // place, without an allocation.
  auto work = [record = std::move(record)](
                  SimStream::Timing& timing) -> absl::Status {
    return record->owner->RunLaunch(*record, timing);
  };
  static_assert(sizeof(work) <= 2 * sizeof(void*),
                "stored in place by SimStream::Work");
  EnqueueInTurn(*stream->queue, device, kept->engine, kept->launch.cost_us,
                &kept->ticket, std::move(work));
  return absl::OkStatus();
}

SimBackend::Contents SimBackend::ContentsOf(const CpuKernel* kernel,
                                            const KernelLaunch& launch) const {
  if (kernel == &user_kernel_stand_in_ || kernel == spin_kernel_) {
    return Contents::kNone;
  }
  // fill(buffer, +0): memory without contents reads as zeros already.
  if (kernel == fill_kernel_ && launch.args.size() == 2 &&
      std::holds_alternative<DeviceBufferArg>(launch.args[0]) &&
      IsPlainZero(launch.args[1])) {
    return Contents::kZeroFill;
  }
  return Contents::kCompute;
}

void SimBackend::LaunchRecord::Clear() {
  ticket.reset();
  fault = absl::OkStatus();
  contents = Contents::kCompute;
  launch.args.clear();
  launch.user_kernel = nullptr;
  launch.module = nullptr;
  ran = false;
  host_args.clear();
  keep_alive.clear();
}

void SimBackend::GiveBackRecord::operator()(LaunchRecord* record) const {
  record->owner->GiveBackLaunchRecord(record);
}

void SimBackend::GiveBackLaunchRecord(LaunchRecord* record) {
  record->Clear();  // outside records_mu_: a ticket given up wakes a stream
  absl::MutexLock lock(&records_mu_);
  free_records_.push_back(record);
}

SimBackend::RecordPtr SimBackend::TakeLaunchRecord() {
  Batch& batch = tls_batch_;
  LaunchRecord* record = nullptr;
  if (batch.owner == id_) {
    if (batch.records.empty()) {
      absl::MutexLock lock(&records_mu_);
      const size_t n = std::min(free_records_.size(), kRecordsPerTake);
      batch.records.assign(free_records_.end() - n, free_records_.end());
      free_records_.resize(free_records_.size() - n);
    }
    if (!batch.records.empty()) {
      record = batch.records.back();
      batch.records.pop_back();
    }
  } else {
    absl::MutexLock lock(&records_mu_);
    if (!free_records_.empty()) {
      record = free_records_.back();
      free_records_.pop_back();
    }
  }
  if (record == nullptr) {
    auto fresh = std::make_unique<LaunchRecord>(this);
    record = fresh.get();
    absl::MutexLock lock(&records_mu_);
    records_.push_back(std::move(fresh));
  }
  return RecordPtr(record);
}

absl::Status SimBackend::RunLaunch(LaunchRecord& record,
                                   SimStream::Timing& timing) const {
  // The kernel runs once; before its ticket's turn the stream parks and
  // comes back to book (`ran` remembers).
  if (!record.ran) {
    if (!record.fault.ok()) return record.fault;
    WEFT_RETURN_IF_ERROR(RunKernel(record));
    record.ran = true;
  }
  return BookInTurn(record.device, record.engine, record.launch.cost_us,
                    record.units,
                    record.ticket.has_value() ? &*record.ticket : nullptr,
                    timing);
}

absl::Status SimBackend::RunKernel(LaunchRecord& record) const {
  const KernelLaunch& launch = record.launch;
  const int device = record.device;
  std::vector<HostArg>& args = record.host_args;
  // Whatever the outcome, the memory is held only while the kernel runs.
  std::vector<std::shared_ptr<Allocation>>& keep_alive = record.keep_alive;
  absl::Cleanup release = [&args, &keep_alive] {
    args.clear();
    keep_alive.clear();
  };
  // Only a kernel that computes on its buffers gives them contents.
  const Need need = record.contents == Contents::kCompute ? Need::kContents
                                                          : Need::kAddress;
  bool has_contents = false;
  if (!launch.args.empty()) {
    args.reserve(launch.args.size());
    absl::MutexLock lock(&mu_);
    for (const KernelArg& arg : launch.args) {
      if (const auto* b = std::get_if<DeviceBufferArg>(&arg)) {
        absl::StatusOr<Resolved> r = Resolve(b->ptr, b->size_bytes, need);
        if (!r.ok()) {
          return absl::Status(r.status().code(),
                              absl::StrCat(launch.op, " on device ", device,
                                           ": ", r.status().message()));
        }
        has_contents |= r->data != nullptr;
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
  // Zeros onto memory without contents: nothing to do.
  if (record.contents == Contents::kZeroFill && !has_contents) {
    return absl::OkStatus();
  }
  absl::Status status = (*record.kernel)(args);
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat(launch.op, " on device ", device, ": ",
                                     status.message()));
  }
  return absl::OkStatus();
}

absl::Status SimBackend::BookInTurn(int device, Engine engine,
                                    double duration, int32_t units,
                                    Ticket* ticket,
                                    SimStream::Timing& timing) const {
  if (!(duration > 0)) {
    timing.end_us = timing.ready_us;  // occupies nothing
    return absl::OkStatus();
  }
  DeviceModel& model = *models_[device];
  if (ticket == nullptr) {
    // Paced: booked as it comes. Nothing is forgotten by time: work may be
    // ready before now (virtual times do not wait for the host; sim_stream.h)
    // and must still find the gaps it would have had. The timeline's own
    // bound on breakpoints keeps it small.
    uint64_t id = 0;
    {
      absl::MutexLock lock(&model.mu);
      EngineBook& book = model.books[EngineIndex(engine)];
      const double start =
          book.timeline->Book(timing.ready_us, duration, units);
      timing.end_us = start + duration;
      if (book.live.size() >= book.prune_at) {
        const double now = clock_.NowUs();
        book.live.erase(
            std::remove_if(book.live.begin(), book.live.end(),
                           [now](const LiveBooking& b) {
                             return b.end_us <= now;
                           }),
            book.live.end());
        book.prune_at = std::max<size_t>(64, 2 * book.live.size());
      }
      id = book.next_booking++;
      book.live.push_back(LiveBooking{id, start, timing.end_us, units});
    }
    timing.OnInterrupt([this, device, engine, id](double at_us) {
      ReleaseBooking(device, engine, id, at_us);
    });
    return absl::OkStatus();
  }
  // Book in enqueue order: whichever stream gets here first, the schedule
  // is the same (and deterministic). Before its turn the stream parks, so
  // the worker runs other streams, the one whose turn it is among them.
  std::shared_ptr<SimStream::Waker> next;
  {
    absl::MutexLock lock(&model.mu);
    if (model.closed) {
      return absl::AbortedError("the simulated backend is shutting down");
    }
    EngineBook& book = model.books[EngineIndex(engine)];
    if (book.next_to_book != ticket->number) {
      book.turn_waiters[ticket->number] = timing.Park();
      return absl::OkStatus();
    }
    const double start =
        book.timeline->Book(timing.ready_us, duration, units);
    timing.end_us = start + duration;
    ticket->booked = true;
    next = AdvanceTurnLocked(model, engine);
  }
  if (next != nullptr) next->Wake();
  return absl::OkStatus();
}

void SimBackend::ReleaseBooking(int device, Engine engine, uint64_t id,
                                double at_us) const {
  DeviceModel& model = *models_[device];
  absl::MutexLock lock(&model.mu);
  if (model.closed) return;
  EngineBook& book = model.books[EngineIndex(engine)];
  auto it = std::find_if(book.live.begin(), book.live.end(),
                         [id](const LiveBooking& b) { return b.id == id; });
  if (it == book.live.end() || it->end_us <= at_us) return;
  if (it->start_us >= at_us) {
    book.live.erase(it);  // had not started: nothing of it ran
  } else {
    it->end_us = at_us;
  }
  // Nothing is booked before `at_us` any more (the floor): what ran then
  // stays run. From there on every other live booking goes back where it
  // was, those under way first; each fits, being part of what fitted
  // before.
  book.live.erase(std::remove_if(book.live.begin(), book.live.end(),
                                 [at_us](const LiveBooking& b) {
                                   return b.end_us <= at_us;
                                 }),
                  book.live.end());
  book.timeline.emplace(book.max_kernels);
  book.timeline->Book(at_us, 0, 1, /*forget_before_us=*/at_us);
  for (const LiveBooking& b : book.live) {
    if (b.start_us <= at_us) {
      book.timeline->Book(at_us, b.end_us - at_us, b.units);
    }
  }
  for (const LiveBooking& b : book.live) {
    if (b.start_us > at_us) {
      book.timeline->Book(b.start_us, b.end_us - b.start_us, b.units);
    }
  }
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

void SimBackend::ReleaseErrorScope(StreamHandle stream_handle,
                                   uint64_t scope) {
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

const CpuKernel* SimBackend::FindKernel(const std::string& op) const {
  KernelLookup& last = tls_kernel_lookup;
  if (last.backend == id_ && last.op == op) return last.kernel;
  const CpuKernel* kernel = kernels_->Find(op);
  if (kernel != nullptr) {
    last.backend = id_;
    last.op = op;
    last.kernel = kernel;
  }
  return kernel;
}

bool SimBackend::supports_device_graph_op(const std::string& op) const {
  return kernels_->Find(op) != nullptr;
}

absl::Status SimBackend::PrepareDeviceGraph(const DeviceGraph& graph) {
  WEFT_RETURN_IF_ERROR(CheckHealthy(graph.device));
  return graphs_->Prepare(graph);
}

absl::Status SimBackend::LaunchDeviceGraph(const DeviceGraph& graph,
                                           StreamHandle stream_handle) {
  Stream storage;
  WEFT_ASSIGN_OR_RETURN(const Stream* stream,
                        FindStreamForCall(stream_handle, &storage));
  WEFT_RETURN_IF_ERROR(CheckHealthy(stream->device));
  return graphs_->Launch(graph, stream_handle, stream->device,
                         stream->queue->scope());
}

absl::StatusOr<GateHandle> SimBackend::EnqueueHostGate(
    StreamHandle stream_handle) {
  auto gate = std::make_shared<SimStream::Gate>();
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(stream_handle.value);
  if (it == streams_.end()) {
    return absl::NotFoundError(
        absl::StrCat("unknown stream ", stream_handle.value));
  }
  MaybeHold(it->second.queue);
  it->second.queue->EnqueueGate(gate);
  const uint64_t handle = next_handle_++;
  gates_.emplace(handle, PendingGate{it->second.queue, std::move(gate)});
  return GateHandle{handle};
}

absl::Status SimBackend::OpenHostGate(GateHandle gate_handle,
                                      absl::Status status, double busy_us) {
  PendingGate pending;
  {
    absl::MutexLock lock(&mu_);
    auto it = gates_.find(gate_handle.value);
    if (it == gates_.end()) {
      return absl::NotFoundError(
          absl::StrCat("unknown or already opened gate ", gate_handle.value));
    }
    pending = std::move(it->second);
    gates_.erase(it);
  }
  return pending.stream->OpenGate(*pending.gate, std::move(status),
                                  DurationUs(busy_us));
}

}  // namespace weft::runtime
