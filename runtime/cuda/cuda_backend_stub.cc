// CudaBackend for builds without the CUDA toolkit: there is never a device.
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/cuda/cuda_backend.h"

namespace weft::runtime {

int VisibleCudaDevices() { return 0; }

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create() {
  return Create(Options{});
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const Options& /*options*/) {
  return absl::UnavailableError(
      "CUDA backend unavailable: Weft was built without CUDA");
}

}  // namespace weft::runtime
