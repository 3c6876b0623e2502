// Digests of what a plan says, to tell two plans apart in one line: the
// plan benchmark prints them so that a change meant to leave plans alone
// can be checked to, and tests compare them across runs. FNV-1a over the
// fields in a fixed order; the same plan gives the same digest on every
// machine of one byte order.
//
// Pure functions.
#ifndef WEFT_SCHEDULER_PLAN_DIGEST_H_
#define WEFT_SCHEDULER_PLAN_DIGEST_H_

#include <cstdint>

#include "scheduler/plan.h"

namespace weft::scheduler {

// Devices, streams, dependencies, events, estimated times and reasons.
uint64_t PlanDigest(const Plan& plan);

// The memory plan: eager copies, each device's memory figures, every
// buffer copy's place, and the nodes of a rewritten graph (names, devices,
// `after` edges) where fitting made one.
uint64_t MemoryDigest(const Plan& plan);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PLAN_DIGEST_H_
