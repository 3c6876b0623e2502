// A snapshot of the devices: identity and capacity from the Backend, stream
// load and memory (the executor's memory pools) from the Executor. Feeds
// ListDevices, the device metrics and the planner's load-aware policy. Memory
// used is what jobs hold; the blocks the pools keep cached for reuse are
// reported apart (metrics only).
#ifndef WEFT_SERVER_DEVICES_H_
#define WEFT_SERVER_DEVICES_H_

#include <cstdint>
#include <vector>

#include "runtime/backend.h"
#include "runtime/executor.h"
#include "server/metrics.h"
#include "weft/v1/weft.pb.h"

namespace weft::server {

// `reserved_bytes`: by device, the memory running jobs were started
// against (JobManager::ReservedBytes). Thread-safe (Backend and Executor
// are).
std::vector<weft::v1::Device> DescribeDevices(
    const runtime::Backend& backend, const runtime::Executor& executor,
    const std::vector<int64_t>& reserved_bytes = {});

std::vector<DeviceSample> ToDeviceSamples(
    const std::vector<weft::v1::Device>& devices);

// The busy streams of each device (DeviceLoad::streams_busy), as the
// planner's load-aware policy takes them (PlannerOptions::busy_streams);
// empty when the executor reports another number of devices than
// `num_devices`.
std::vector<int> BusyStreams(const runtime::Executor& executor,
                             int num_devices);

// The samples of the device metrics: ToDeviceSamples(DescribeDevices(...))
// plus the memory pools' cached bytes and counters.
std::vector<DeviceSample> SampleDevices(
    const runtime::Backend& backend, const runtime::Executor& executor,
    const std::vector<int64_t>& reserved_bytes = {});

}  // namespace weft::server

#endif  // WEFT_SERVER_DEVICES_H_
