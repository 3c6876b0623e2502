// A snapshot of the devices: identity and memory from the Backend, stream
// load from the Executor. Feeds ListDevices and the device gauges.
#ifndef WEFT_SERVER_DEVICES_H_
#define WEFT_SERVER_DEVICES_H_

#include <vector>

#include "runtime/backend.h"
#include "runtime/executor.h"
#include "server/metrics.h"
#include "weft/v1/weft.pb.h"

namespace weft::server {

// Thread-safe (Backend and Executor are).
std::vector<weft::v1::Device> DescribeDevices(
    const runtime::Backend& backend, const runtime::Executor& executor);

std::vector<DeviceSample> ToDeviceSamples(
    const std::vector<weft::v1::Device>& devices);

}  // namespace weft::server

#endif  // WEFT_SERVER_DEVICES_H_
