// A per-device pool of backend streams shared by every job.
//
// Acquire hands out the stream that has been free the longest (FIFO reuse,
// so work spreads over all streams), creates a stream only when none is
// free and the pool is below its cap, and at the cap shares the stream with
// the fewest holders: sharing only serializes work that could have
// overlapped, it never breaks ordering, so Acquire does not fail for lack of
// streams. Release returns a holder's reference; a stream with no holders
// is free again. A stream released as unhealthy (its work failed, and a
// failed stream stays failed) is never handed out again and is destroyed
// once its last holder lets go.
//
// Fencing: a holder whose work on a stream was abandoned (a cancelled job
// whose work the device cannot stop) fences the stream until the device
// has finished that work. A fenced stream is never shared: at the cap,
// Acquire shares only unfenced streams, and fails UNAVAILABLE when every
// stream is fenced rather than queue a job behind abandoned work.
//
// Thread-safe. Calls into the backend are made without holding the lock.
#ifndef WEFT_RUNTIME_STREAM_POOL_H_
#define WEFT_RUNTIME_STREAM_POOL_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/backend.h"

namespace weft::runtime {

class StreamPool {
 public:
  // `backend` is not owned and must outlive the pool. REQUIRES:
  // max_streams >= 1.
  StreamPool(Backend* backend, int device, int max_streams);
  // Destroys every stream the pool created. REQUIRES: no work pending that
  // anyone still waits for.
  ~StreamPool();

  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;

  int device() const { return device_; }

  // A stream for the caller to enqueue work on until it calls Release.
  // Fails only when the backend cannot create a stream.
  absl::StatusOr<StreamHandle> Acquire() ABSL_LOCKS_EXCLUDED(mu_);
  // Like Acquire, but never shares: a free stream, or a new one while below
  // the cap, else nullopt.
  absl::StatusOr<std::optional<StreamHandle>> AcquireUnshared()
      ABSL_LOCKS_EXCLUDED(mu_);
  // Gives back one reference from Acquire. `healthy` false retires the
  // stream. Unknown handles are ignored.
  void Release(StreamHandle stream, bool healthy = true)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Fences a stream the caller holds (see Fencing above) until the same
  // holder calls Unfence (before its Release). Unknown handles are ignored.
  void Fence(StreamHandle stream) ABSL_LOCKS_EXCLUDED(mu_);
  void Unfence(StreamHandle stream) ABSL_LOCKS_EXCLUDED(mu_);

  // Streams with at least one holder.
  int busy() const ABSL_LOCKS_EXCLUDED(mu_);
  // Streams alive (busy, free, or retiring).
  int total() const ABSL_LOCKS_EXCLUDED(mu_);
  // Streams fenced off (busy with abandoned work).
  int fenced() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Creates a stream outside the lock. REQUIRES: creating_ was counted.
  absl::StatusOr<StreamHandle> CreateCounted() ABSL_LOCKS_EXCLUDED(mu_);

  struct Entry {
    int holders = 0;
    bool healthy = true;
    int fences = 0;  // holders that fenced it
  };

  // Constant after construction.
  Backend* const backend_;
  const int device_;
  const int max_streams_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Healthy streams in creation order, for deterministic sharing.
  std::vector<uint64_t> order_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> free_ ABSL_GUARDED_BY(mu_);
  int busy_ ABSL_GUARDED_BY(mu_) = 0;
  int fenced_ ABSL_GUARDED_BY(mu_) = 0;
  // Streams being created (counted against the cap).
  int creating_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_STREAM_POOL_H_
