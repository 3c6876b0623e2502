// The pooled streams one job enqueues on, and its error scope on them.
//
// A plan names logical streams; a job leases pooled streams (StreamPool)
// for them on first use and keeps its logical streams to itself where it
// can: it takes pooled streams of its own while the pool has free ones (or
// room to create one); beyond that it folds further logical streams onto
// the streams it already holds on that device, round robin, and only a job
// holding none there shares one with other jobs. Every stream the job
// enqueues on is switched to the job's error scope first (Enter), so a
// failure of this job never fails another job's work on a shared stream;
// the scope last set on each pooled stream is shared by all jobs
// (Shared::scopes), so entering a stream already in the scope costs a
// lookup, and a logical stream entered since the last scope switch anywhere
// costs nothing (EnterLogical).
//
// Draining: EnqueueFences puts a host callback (a fence) on every stream
// used; streams are FIFO, so once every fence has fired, all of the job's
// work has completed. A stream that could not take its fence leaves the
// job unfenced: its memory may still be in use by queued work. A job that
// gives up waiting (abandoned work on a backend that cannot stop it) fences
// its streams off in their pools (FenceOff) until it releases them.
//
// Lifecycle: leasing (For, Acquire, Enter) -> fences enqueued -> scopes
// left (LeaveScopes) -> streams released (Release), healthy unless work on
// them failed (MarkFailed).
//
// Not thread-safe: used by one job in the executor's turn (executor.cc).
#ifndef WEFT_RUNTIME_JOB_STREAMS_H_
#define WEFT_RUNTIME_JOB_STREAMS_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/backend.h"
#include "runtime/job_tracer.h"
#include "runtime/stream_pool.h"

namespace weft::runtime {

class JobStreams {
 public:
  // What every job's streams share; not owned, outlives this.
  struct Shared {
    Backend* backend = nullptr;
    absl::Span<StreamPool* const> pools;  // by device
    // Pooled stream -> the error scope last set on it.
    absl::flat_hash_map<uint64_t, uint64_t>* scopes = nullptr;
    // Scope switches so far over all jobs; null: EnterLogical always looks
    // the stream up.
    uint64_t* scope_switches = nullptr;
  };

  // `scope` is the job's error scope (its id); `logical_devices` the
  // device of each of the plan's logical streams. `tracer` (not owned) is
  // told when another scope's work may have gone onto a stream.
  JobStreams(uint64_t scope, Shared shared, std::vector<int> logical_devices,
             JobTracer* tracer);

  JobStreams(const JobStreams&) = delete;
  JobStreams& operator=(const JobStreams&) = delete;

  // The pooled stream of logical stream `logical`, leased on first use.
  absl::StatusOr<StreamHandle> For(int logical);
  // The pooled stream For(logical) gave; value 0 before.
  StreamHandle pooled(int logical) const { return logical_[logical]; }
  // A pooled stream of `device` for this job (one of its own when the
  // pool is at its cap).
  absl::StatusOr<StreamHandle> Acquire(int device);

  // Puts `stream` in this job's error scope.
  absl::Status Enter(StreamHandle stream);
  // The same for `stream`, the pooled stream of logical stream `logical`,
  // without a lookup when no scope switched since the job last entered it.
  absl::Status EnterLogical(int logical, StreamHandle stream);

  // Distinct pooled streams used, in first-use order.
  const std::vector<StreamHandle>& used() const { return used_; }
  // Work on `stream` failed: it is retired when released.
  void MarkFailed(StreamHandle stream) { failed_[stream.value] = true; }
  bool failed(StreamHandle stream) const;

  // Aborts the job's error scope on every stream used
  // (Backend::AbortErrorScope), with `status`.
  void AbortScope(const absl::Status& status);

  // Enqueues fence(stream) as a host callback on every stream used (each
  // entered first). A stream that cannot take it is marked failed and
  // leaves the job unfenced; the first such error is returned.
  absl::Status EnqueueFences(
      const std::function<HostCallback(StreamHandle)>& fence);
  // Enqueues `fence` on `stream` alone (entered first): the caller has
  // made it wait for every other stream used.
  absl::Status EnqueueFence(StreamHandle stream, HostCallback fence);
  // The device of leased stream `stream`; -1 for a stream not leased.
  int DeviceOf(StreamHandle stream) const;
  // One fence fired.
  void FenceFired() { --fences_pending_; }
  int fences_pending() const { return fences_pending_; }
  // Some stream could not take its fence.
  bool unfenced() const { return unfenced_; }

  // Fences every leased stream off in its pool (StreamPool::Fence) until
  // Release.
  void FenceOff();
  // Releases the job's error scope on every stream used. REQUIRES: the
  // fences have fired.
  void LeaveScopes();
  // Gives every lease back to its pool.
  void Release();

 private:
  // Constant after construction.
  const uint64_t scope_;
  const Shared shared_;
  const std::vector<int> logical_devices_;
  JobTracer* const tracer_;

  // Logical stream -> pooled stream (value 0 until first used).
  std::vector<StreamHandle> logical_;
  // Logical stream -> 1 + *scope_switches when the job last entered its
  // pooled stream (0: never); current while the two are equal.
  std::vector<uint64_t> entered_;
  // Every lease from a stream pool, with the device, to release at the end
  // (a pooled stream may back several logical streams).
  std::vector<std::pair<StreamHandle, int>> leases_;
  // By device: the pooled streams this job holds, and where to fold next.
  std::vector<std::vector<StreamHandle>> own_;
  std::vector<size_t> fold_next_;
  std::vector<StreamHandle> used_;
  // Pooled stream -> whether work on it failed.
  absl::flat_hash_map<uint64_t, bool> failed_;
  int fences_pending_ = 0;
  bool unfenced_ = false;
  bool fenced_off_ = false;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_JOB_STREAMS_H_
