// Options of the planner (planner.h), in a header of their own so that the
// planner's stages can take them without depending on the planner.
#ifndef WEFT_SCHEDULER_PLANNER_OPTIONS_H_
#define WEFT_SCHEDULER_PLANNER_OPTIONS_H_

#include <vector>

namespace weft::scheduler {

enum class DevicePolicyKind {
  kRoundRobin,
  kStreamAware,
  kMinTransferSize,
  kMinMinTransferTime,
  kMinMaxTransferTime,
  kMinFinishTime,
};

enum class StreamMode { kMulti, kSingle };

struct PlannerOptions {
  int num_devices = 1;
  DevicePolicyKind device_policy = DevicePolicyKind::kRoundRobin;
  StreamMode stream_mode = StreamMode::kMulti;
  int max_streams_per_device = 8;  // soft cap
  // Busy streams per device from other running jobs (STREAM_AWARE); empty
  // means all idle.
  std::vector<int> busy_streams;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PLANNER_OPTIONS_H_
