// The CUDA devices this process can use, described for the Backend
// interface (DeviceInfo), and peer access between them.
#ifndef WEFT_RUNTIME_CUDA_CUDA_DEVICES_H_
#define WEFT_RUNTIME_CUDA_CUDA_DEVICES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"

namespace weft::runtime::cuda {

// Every visible CUDA device (CUDA_VISIBLE_DEVICES applies), by index.
// UNAVAILABLE when none is visible; a device whose properties cannot be
// read fails the whole description.
absl::StatusOr<std::vector<DeviceInfo>> DescribeVisibleDevices();

// Enables peer access between every pair of devices that supports it, so
// peer copies go device to device instead of through the host. Failures
// only cost bandwidth, so they are ignored.
void EnablePeerAccess(int device_count);

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_CUDA_DEVICES_H_
