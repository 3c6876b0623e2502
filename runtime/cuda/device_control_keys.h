// What CudaDeviceControl's two files share (cuda_device_control.cc:
// conditional nodes; cuda_device_launch.cc: device graph launch): cache
// keys and the refusal of a control node CUDA will not build. Internal to
// them.
#ifndef WEFT_RUNTIME_CUDA_DEVICE_CONTROL_KEYS_H_
#define WEFT_RUNTIME_CUDA_DEVICE_CONTROL_KEYS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/backend.h"
#include "runtime/device_graph.h"

namespace weft::runtime::cuda::internal {

// A length-prefixed field, so that keys built from several signatures
// cannot collide.
inline std::string Field(const std::string& s) {
  return absl::StrCat(s.size(), ":", s);
}

// A control node whose graph CUDA will not build (a body with nodes a
// conditional body cannot hold, say) cannot run on the device:
// FAILED_PRECONDITION naming it, so that a caller may run it another way.
// Running out of memory stays RESOURCE_EXHAUSTED.
inline absl::Status CannotBuild(absl::string_view what, absl::string_view name,
                                const absl::Status& status) {
  const absl::StatusCode code =
      status.code() == absl::StatusCode::kResourceExhausted
          ? status.code()
          : absl::StatusCode::kFailedPrecondition;
  return absl::Status(
      code, absl::StrCat(what, " '", name,
                         "' cannot run as a CUDA graph: ", status.message()));
}

inline bool Empty(const DeviceGraph* graph) {
  return graph == nullptr || graph->nodes.empty();
}

inline std::string CaseKey(absl::string_view kind, const DeviceCase& choice,
                           int device) {
  std::string key =
      absl::StrCat(kind, "|", device, "|", scheduler::DTypeName(choice.dtype),
                   "|", choice.branches.size());
  for (const DeviceGraph* branch : choice.branches) {
    absl::StrAppend(&key, "|",
                    Field(Empty(branch) ? std::string("-")
                                        : DeviceGraphSignature(*branch)));
  }
  return key;
}

}  // namespace weft::runtime::cuda::internal

#endif  // WEFT_RUNTIME_CUDA_DEVICE_CONTROL_KEYS_H_
