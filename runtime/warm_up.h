// Warm-up: one small job over every device of a fresh executor, run before
// it serves real ones, so that the first real job pays no first-use costs:
// the streams, events and memory blocks its pools create on first demand,
// the backend's own first calls (on CUDA, context set-up and loading the
// built-in kernels' module) and the host's first touch of the structures a
// job builds. weftd runs it at start (--warm_up).
//
// The job (WarmUpGraph): an input uploaded from the host; on every device
// `streams_per_device` independent `spin` nodes of kSpinUs each, pinned
// there, that read it (so it is copied to every device) and write a small
// buffer each; a join on device 0 that reads them all (copies between
// devices) and writes the output, downloaded at the end. Every buffer is
// kBufferBytes. Planned with the caller's planner options, as a real job
// is, so it also warms the planner's paths; its work counts in the
// backend's counters like any job's.
//
// Thread-safe as the executor is; blocks its caller until the job ends.
#ifndef WEFT_RUNTIME_WARM_UP_H_
#define WEFT_RUNTIME_WARM_UP_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/executor.h"
#include "scheduler/graph.h"
#include "scheduler/planner_options.h"

namespace weft::runtime {

struct WarmUpOptions {
  // How the job is planned; num_devices is the executor's.
  scheduler::PlannerOptions planner;
  // Independent nodes per device, so that each device's pool has that
  // many streams afterwards. >= 1.
  int streams_per_device = 2;
  // Record the job's trace, as jobs of a daemon that traces them do.
  bool trace = true;
  JobOptions job;
  // Past this the job is cancelled and DEADLINE_EXCEEDED returned.
  absl::Duration timeout = absl::Seconds(30);
};

inline constexpr double kWarmUpSpinUs = 10;
inline constexpr uint64_t kWarmUpBufferBytes = 4096;

// The warm-up job's graph for `devices` devices. REQUIRES: devices >= 1,
// streams_per_device >= 1.
scheduler::Graph WarmUpGraph(int devices, int streams_per_device);

// Plans and runs the warm-up job on `executor` and waits for it: OK, or
// why it could not be planned, started or finished (the job's own error,
// DEADLINE_EXCEEDED past options.timeout).
absl::Status WarmUp(Executor& executor, const WarmUpOptions& options);

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_WARM_UP_H_
