#include "runtime/cuda/cuda_devices.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/gpu_uuid.h"

namespace weft::runtime::cuda {

absl::StatusOr<std::vector<DeviceInfo>> DescribeVisibleDevices() {
  int count = 0;
  const cudaError_t result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::UnavailableError(absl::StrCat(
        "no CUDA device visible: ",
        CudaStatus(result, "cudaGetDeviceCount", __FILE__, __LINE__)
            .message()));
  }
  if (count == 0) return absl::UnavailableError("no CUDA device visible");
  std::vector<DeviceInfo> devices;
  devices.reserve(count);
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp prop;
    WEFT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
    DeviceInfo info;
    info.index = device;
    info.name = prop.name;
    info.uuid = FormatGpuUuid(prop.uuid.bytes);
    info.simulated = false;
    info.memory_total_bytes = prop.totalGlobalMem;
    devices.push_back(std::move(info));
  }
  return devices;
}

void EnablePeerAccess(int device_count) {
  for (int device = 0; device < device_count; ++device) {
    if (cudaSetDevice(device) != cudaSuccess) continue;
    for (int peer = 0; peer < device_count; ++peer) {
      int can_access = 0;
      if (peer == device ||
          cudaDeviceCanAccessPeer(&can_access, device, peer) != cudaSuccess ||
          !can_access) {
        continue;
      }
      (void)cudaDeviceEnablePeerAccess(peer, 0);
    }
  }
  (void)cudaGetLastError();  // e.g. cudaErrorPeerAccessAlreadyEnabled
}

}  // namespace weft::runtime::cuda
