// PlanningLimiter: how much planning runs at once.
//
// Planning costs CPU and memory in proportion to a graph's nodes (about a
// microsecond and 1.4 KB per node at a million nodes), so the daemon
// bounds the nodes being planned at once, over PlanGraph and SubmitGraph
// together: a request takes as many units as its graph has nodes (at least
// one) for as long as it plans, and is refused with RESOURCE_EXHAUSTED and
// a retry hint when they are not free. A request larger than the whole
// capacity can never be planned and is INVALID_ARGUMENT. Thread-safe.
#ifndef WEFT_SERVER_PLANNING_LIMITER_H_
#define WEFT_SERVER_PLANNING_LIMITER_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace weft::server {

class PlanningLimiter {
 public:
  // Units held while planning; given back on destruction.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    ~Lease();

   private:
    friend class PlanningLimiter;
    Lease(PlanningLimiter* owner, int64_t units)
        : owner_(owner), units_(units) {}
    PlanningLimiter* owner_;
    int64_t units_;
  };

  // REQUIRES: capacity >= 1.
  explicit PlanningLimiter(int64_t capacity) : capacity_(capacity) {}
  PlanningLimiter(const PlanningLimiter&) = delete;
  PlanningLimiter& operator=(const PlanningLimiter&) = delete;

  // Takes units for a graph of `nodes` nodes, or says why not (see the
  // header comment; messages name weftd's --max_planning_nodes).
  absl::StatusOr<Lease> TryAcquire(int64_t nodes) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t in_use() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t capacity() const { return capacity_; }

 private:
  void Release(int64_t units) ABSL_LOCKS_EXCLUDED(mu_);

  const int64_t capacity_;
  mutable absl::Mutex mu_;
  int64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_PLANNING_LIMITER_H_
