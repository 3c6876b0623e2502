#include "runtime/cuda/callback_dispatcher.h"

#include <utility>

#include "runtime/cuda/cuda_status.h"

namespace weft::runtime::cuda {

CallbackDispatcher::CallbackDispatcher() {
  thread_ = std::thread([this] { Run(); });
}

CallbackDispatcher::~CallbackDispatcher() {
  if (thread_.joinable()) Shutdown();
}

void CallbackDispatcher::Shutdown() {
  // A callback may enqueue more work and callbacks, so wait until no
  // callback is pending or running before stopping.
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &CallbackDispatcher::NonePending));
    stopping_ = true;
  }
  thread_.join();
}

absl::Status CallbackDispatcher::Add(cudaStream_t stream, uint64_t stream_id,
                                     uint64_t scope, HostCallback callback) {
  auto record = std::make_unique<Record>();
  record->callback = std::move(callback);
  record->stream = stream_id;
  record->scope = scope;
  return Enqueue(stream, std::move(record));
}

absl::Status CallbackDispatcher::AddReport(cudaStream_t stream,
                                           uint64_t stream_id, uint64_t scope,
                                           Report report) {
  auto record = std::make_unique<Record>();
  record->report = std::move(report);
  record->stream = stream_id;
  record->scope = scope;
  return Enqueue(stream, std::move(record));
}

void CallbackDispatcher::ReleaseErrorScope(uint64_t stream_id, uint64_t scope) {
  absl::MutexLock lock(&mu_);
  auto it = scope_errors_.find(scope);
  if (it != scope_errors_.end() && it->second.stream == stream_id) {
    scope_errors_.erase(it);
  }
}

absl::Status CallbackDispatcher::Enqueue(cudaStream_t stream,
                                         std::unique_ptr<Record> record) {
  record->dispatcher = this;
  {
    absl::MutexLock lock(&mu_);
    ++pending_;
    record->sequence = ++sequence_;
  }
  // cudaStreamAddCallback rather than cudaLaunchHostFunc: it runs even
  // after a device fault and reports the stream's error, which the
  // Backend contract passes on; cudaLaunchHostFunc would never run.
  const cudaError_t result = cudaStreamAddCallback(
      stream, &CallbackDispatcher::OnStreamCallback, record.get(), 0);
  if (result != cudaSuccess) {
    absl::MutexLock lock(&mu_);
    --pending_;
    return WEFT_CUDA_STATUS(result);
  }
  record.release();  // owned by the pending CUDA callback now
  return absl::OkStatus();
}

void CUDART_CB CallbackDispatcher::OnStreamCallback(cudaStream_t /*stream*/,
                                                    cudaError_t result,
                                                    void* data) {
  std::unique_ptr<Record> record(static_cast<Record*>(data));
  record->result = result;
  CallbackDispatcher* dispatcher = record->dispatcher;
  absl::MutexLock lock(&dispatcher->mu_);
  dispatcher->ready_.push_back(std::move(record));
}

void CallbackDispatcher::Run() {
  while (true) {
    std::deque<std::unique_ptr<Record>> batch;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &CallbackDispatcher::ReadyOrStopping));
      if (ready_.empty()) return;  // stopping and drained
      batch.swap(ready_);
    }
    for (std::unique_ptr<Record>& record : batch) {
      absl::Status status =
          CudaStatus(record->result, "work enqueued before the host callback",
                     __FILE__, __LINE__);
      if (status.ok()) status = ScopeErrorFor(*record);
      if (record->report) {
        absl::Status found = record->report(status);
        if (!found.ok() && status.ok()) {
          absl::MutexLock lock(&mu_);
          scope_errors_.try_emplace(
              record->scope,
              ScopeError{std::move(found), record->stream, record->sequence});
        }
      } else {
        record->callback(std::move(status));
      }
    }
    absl::MutexLock lock(&mu_);
    pending_ -= static_cast<int64_t>(batch.size());
  }
}

absl::Status CallbackDispatcher::ScopeErrorFor(const Record& record) {
  absl::MutexLock lock(&mu_);
  auto it = scope_errors_.find(record.scope);
  if (it == scope_errors_.end() || record.sequence <= it->second.sequence) {
    return absl::OkStatus();
  }
  return it->second.status;
}

bool CallbackDispatcher::ReadyOrStopping() const {
  return stopping_ || !ready_.empty();
}

bool CallbackDispatcher::NonePending() const { return pending_ == 0; }

}  // namespace weft::runtime::cuda
