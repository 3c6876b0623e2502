#include "server/planning_limiter.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/retry_info.h"

namespace weft::server {

PlanningLimiter::Lease::Lease(Lease&& other) noexcept
    : owner_(other.owner_), units_(other.units_) {
  other.owner_ = nullptr;
  other.units_ = 0;
}

PlanningLimiter::Lease::~Lease() {
  if (owner_ != nullptr) owner_->Release(units_);
}

absl::StatusOr<PlanningLimiter::Lease> PlanningLimiter::TryAcquire(
    int64_t nodes) {
  const int64_t units = std::max<int64_t>(1, nodes);
  if (units > capacity_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "graph.nodes: ", nodes, " nodes are more than weftd plans at once (",
        capacity_, ", --max_planning_nodes)"));
  }
  absl::MutexLock lock(&mu_);
  if (in_use_ + units > capacity_) {
    // What is planning now takes about a microsecond a node.
    const absl::Duration delay = std::clamp(
        absl::Microseconds(in_use_), absl::Milliseconds(10), absl::Seconds(30));
    return WithRetryDelay(
        absl::ResourceExhaustedError(absl::StrCat(
            "weftd is planning ", in_use_, " nodes of other requests; ", nodes,
            " more would exceed --max_planning_nodes=", capacity_,
            "; retry later")),
        delay);
  }
  in_use_ += units;
  return Lease(this, units);
}

void PlanningLimiter::Release(int64_t units) {
  absl::MutexLock lock(&mu_);
  in_use_ -= units;
}

int64_t PlanningLimiter::in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

}  // namespace weft::server
