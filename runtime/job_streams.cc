#include "runtime/job_streams.h"

#include <optional>
#include <utility>

#include "scheduler/status_macros.h"

namespace weft::runtime {

JobStreams::JobStreams(uint64_t scope, Shared shared,
                       std::vector<int> logical_devices, JobTracer* tracer)
    : scope_(scope),
      shared_(shared),
      logical_devices_(std::move(logical_devices)),
      tracer_(tracer),
      logical_(logical_devices_.size()),
      entered_(logical_devices_.size(), 0),
      own_(shared_.pools.size()),
      fold_next_(shared_.pools.size(), 0) {}

absl::StatusOr<StreamHandle> JobStreams::For(int logical) {
  if (logical_[logical].value != 0) return logical_[logical];
  WEFT_ASSIGN_OR_RETURN(logical_[logical], Acquire(logical_devices_[logical]));
  return logical_[logical];
}

absl::StatusOr<StreamHandle> JobStreams::Acquire(int device) {
  StreamPool* pool = shared_.pools[device];
  std::vector<StreamHandle>& own = own_[device];
  StreamHandle stream;
  if (!own.empty()) {
    WEFT_ASSIGN_OR_RETURN(std::optional<StreamHandle> fresh,
                          pool->AcquireUnshared());
    if (fresh.has_value()) {
      stream = *fresh;
      leases_.emplace_back(stream, device);
      own.push_back(stream);
    } else {
      // The pool is at its cap: serialize with this job's own work rather
      // than with other jobs'.
      stream = own[fold_next_[device]++ % own.size()];
    }
  } else {
    WEFT_ASSIGN_OR_RETURN(stream, pool->Acquire());
    leases_.emplace_back(stream, device);
    own.push_back(stream);
  }
  if (failed_.emplace(stream.value, false).second) used_.push_back(stream);
  return stream;
}

absl::Status JobStreams::Enter(StreamHandle stream) {
  uint64_t& scope = (*shared_.scopes)[stream.value];
  if (scope == scope_) return absl::OkStatus();
  WEFT_RETURN_IF_ERROR(shared_.backend->SetErrorScope(stream, scope_));
  scope = scope_;
  if (shared_.scope_switches != nullptr) ++*shared_.scope_switches;
  // Another job's work went onto the stream since this job's last span.
  tracer_->Dirty(stream);
  return absl::OkStatus();
}

absl::Status JobStreams::EnterLogical(int logical, StreamHandle stream) {
  const uint64_t* switches = shared_.scope_switches;
  if (switches != nullptr && entered_[logical] == *switches + 1) {
    return absl::OkStatus();
  }
  WEFT_RETURN_IF_ERROR(Enter(stream));
  if (switches != nullptr) entered_[logical] = *switches + 1;
  return absl::OkStatus();
}

bool JobStreams::failed(StreamHandle stream) const {
  auto it = failed_.find(stream.value);
  return it != failed_.end() && it->second;
}

void JobStreams::AbortScope(const absl::Status& status) {
  for (StreamHandle stream : used_) {
    shared_.backend->AbortErrorScope(stream, scope_, status).IgnoreError();
  }
}

absl::Status JobStreams::EnqueueFences(
    const std::function<HostCallback(StreamHandle)>& fence) {
  absl::Status first;
  for (StreamHandle stream : used_) {
    absl::Status s = Enter(stream);
    if (s.ok()) s = shared_.backend->AddHostCallback(stream, fence(stream));
    if (s.ok()) {
      ++fences_pending_;
    } else {
      unfenced_ = true;
      MarkFailed(stream);
      first.Update(std::move(s));
    }
  }
  return first;
}

absl::Status JobStreams::EnqueueFence(StreamHandle stream, HostCallback fence) {
  absl::Status s = Enter(stream);
  if (s.ok()) s = shared_.backend->AddHostCallback(stream, std::move(fence));
  if (s.ok()) {
    ++fences_pending_;
  } else {
    unfenced_ = true;
    MarkFailed(stream);
  }
  return s;
}

int JobStreams::DeviceOf(StreamHandle stream) const {
  for (const auto& [leased, device] : leases_) {
    if (leased == stream) return device;
  }
  return -1;
}

void JobStreams::FenceOff() {
  fenced_off_ = true;
  for (const auto& [stream, device] : leases_) {
    shared_.pools[device]->Fence(stream);
  }
}

void JobStreams::LeaveScopes() {
  for (StreamHandle stream : used_) {
    shared_.backend->ReleaseErrorScope(stream, scope_);
  }
}

void JobStreams::Release() {
  for (const auto& [stream, device] : leases_) {
    StreamPool* pool = shared_.pools[device];
    if (fenced_off_) pool->Unfence(stream);
    pool->Release(stream, !failed(stream));
  }
  leases_.clear();
}

}  // namespace weft::runtime
