// Argument checks of device loops and device cases on CUDA devices
// (Backend::LaunchDeviceLoop / LaunchDeviceCase): what must hold before
// CudaDeviceControl builds or launches anything (plain C++).
#ifndef WEFT_RUNTIME_CUDA_CONTROL_ARGS_H_
#define WEFT_RUNTIME_CUDA_CONTROL_ARGS_H_

#include "absl/status/status.h"
#include "runtime/backend.h"

namespace weft::runtime::cuda {

// OK when `loop` has a body and an iteration counter, its body and
// condition are on `device` (its stream's), its condition is not null and
// its body is a valid device graph; INVALID_ARGUMENT naming the loop
// otherwise.
absl::Status CheckDeviceLoop(const DeviceLoop& loop, int device);

// OK when `choice` has a taken counter, an INT32 or INT64 selector on
// `device` (when it has branches), not too many branches, and every
// branch is null or a valid device graph on `device`; INVALID_ARGUMENT
// naming the case otherwise.
absl::Status CheckDeviceCase(const DeviceCase& choice, int device);

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_CONTROL_ARGS_H_
