#include "runtime/cuda/control_args.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/device_graph.h"
#include "scheduler/graph.h"
#include "scheduler/status_macros.h"

namespace weft::runtime::cuda {

absl::Status CheckDeviceLoop(const DeviceLoop& loop, int device) {
  if (loop.body == nullptr || loop.iterations == nullptr) {
    return absl::InvalidArgumentError("device loop without body or counter");
  }
  if (loop.body->device != device || loop.condition.device != device) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device loop '", loop.name,
        "': its body and condition must be on the device of its stream "
        "(device ",
        device, ")"));
  }
  if (loop.condition.address == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device loop '", loop.name, "': null condition"));
  }
  return ValidateDeviceGraph(*loop.body);
}

absl::Status CheckDeviceCase(const DeviceCase& choice, int device) {
  if (choice.taken == nullptr) {
    return absl::InvalidArgumentError("device case without a taken counter");
  }
  if (choice.dtype != scheduler::DType::kInt32 &&
      choice.dtype != scheduler::DType::kInt64) {
    return absl::InvalidArgumentError(
        absl::StrCat("device case '", choice.name,
                     "': its selector must be INT32 or INT64, not ",
                     scheduler::DTypeName(choice.dtype)));
  }
  if (choice.branches.size() > std::numeric_limits<uint32_t>::max() / 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("device case '", choice.name, "': too many branches"));
  }
  if (!choice.branches.empty() &&
      (choice.selector.device != device || choice.selector.address == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device case '", choice.name,
                     "': its selector must be on the device of its stream "
                     "(device ",
                     device, ")"));
  }
  for (const DeviceGraph* branch : choice.branches) {
    if (branch == nullptr) continue;
    if (branch->device != device) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device case '", choice.name,
          "': its branches must be on the device of its stream (device ",
          device, ")"));
    }
    WEFT_RETURN_IF_ERROR(ValidateDeviceGraph(*branch));
  }
  return absl::OkStatus();
}

}  // namespace weft::runtime::cuda
