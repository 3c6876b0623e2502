// CallbackDispatcher: runs the host callbacks of CUDA streams on one thread
// of its own, never on the CUDA driver's callback thread, so a callback may
// call CUDA and enqueue more work (but must not block).
//
// Contract:
//   - Add and AddReport enqueue a record with cudaStreamAddCallback. CUDA
//     runs it exactly once, when the work before it on the stream is done,
//     also after a device fault; the record then runs on the dispatcher's
//     thread with that work's status (the stream's error, as a Status).
//   - Records run one at a time, in the order their stream work completes.
//   - Error scopes: a report whose result is not OK (for work that itself
//     succeeded) fails the host callbacks of its error scope, on any
//     stream, added after it, until ReleaseErrorScope(stream, scope) on the
//     stream that reported it. Only the first error of a scope is kept.
//   - Shutdown (also the destructor) waits until no record is pending or
//     running, then stops the thread. A record may add more records while
//     it runs; nothing may be added after Shutdown.
//
// Thread-safe, except that Shutdown is called once, by the owner.
#ifndef WEFT_RUNTIME_CUDA_CALLBACK_DISPATCHER_H_
#define WEFT_RUNTIME_CUDA_CALLBACK_DISPATCHER_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "runtime/backend.h"

namespace weft::runtime::cuda {

class CallbackDispatcher {
 public:
  // Runs once the work before it on the stream has completed, with that
  // work's status; a non-OK return fails the host callbacks added to the
  // scope after it (see above).
  using Report = std::function<absl::Status(absl::Status)>;

  // Starts the dispatcher's thread.
  CallbackDispatcher();
  // Shutdown, unless it has run.
  ~CallbackDispatcher();
  CallbackDispatcher(const CallbackDispatcher&) = delete;
  CallbackDispatcher& operator=(const CallbackDispatcher&) = delete;

  // Adds `callback` on `stream`, whose handle is `stream_id` and whose
  // current error scope is `scope`. The stream's device must be current on
  // the calling thread.
  absl::Status Add(cudaStream_t stream, uint64_t stream_id, uint64_t scope,
                   HostCallback callback) ABSL_LOCKS_EXCLUDED(mu_);
  // The same with a report.
  absl::Status AddReport(cudaStream_t stream, uint64_t stream_id,
                         uint64_t scope, Report report)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Forgets the error of `scope`, if `stream_id` reported it.
  void ReleaseErrorScope(uint64_t stream_id, uint64_t scope)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until no record is pending or running, then stops the thread.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Record {
    CallbackDispatcher* dispatcher = nullptr;  // not owned
    // One of the two.
    HostCallback callback;
    Report report;
    uint64_t stream = 0;  // handle
    uint64_t scope = 0;
    uint64_t sequence = 0;  // order of addition, over all streams
    cudaError_t result = cudaSuccess;
  };
  // An error a report found for a scope: it fails the scope's host
  // callbacks added after `sequence`, until released on `stream`.
  struct ScopeError {
    absl::Status status;
    uint64_t stream = 0;
    uint64_t sequence = 0;
  };

  // Adds `record` as a stream callback of `stream`.
  absl::Status Enqueue(cudaStream_t stream, std::unique_ptr<Record> record)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs on the CUDA driver's thread: may not call CUDA, so it only hands
  // the record to the dispatcher's thread.
  static void CUDART_CB OnStreamCallback(cudaStream_t stream,
                                         cudaError_t result, void* data);
  // The dispatcher's thread.
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ScopeErrorFor(const Record& record) ABSL_LOCKS_EXCLUDED(mu_);
  bool ReadyOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NonePending() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  // Records whose stream work is done, in completion order.
  std::deque<std::unique_ptr<Record>> ready_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Records added and not yet run to completion.
  int64_t pending_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  // Keyed by error scope; the first error of each.
  absl::flat_hash_map<uint64_t, ScopeError> scope_errors_ ABSL_GUARDED_BY(mu_);
  // Last: started once the members above are.
  std::thread thread_;
};

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_CALLBACK_DISPATCHER_H_
