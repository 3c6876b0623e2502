#include "runtime/cuda/cuda_devices.h"

#include <cuda_runtime_api.h>

#include <algorithm>
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
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) {
    (void)cudaGetLastError();
    current = 0;
  }
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp prop;
    WEFT_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
    DeviceInfo info;
    info.index = device;
    info.name = prop.name;
    info.uuid = FormatGpuUuid(prop.uuid.bytes);
    info.simulated = false;
    info.memory_total_bytes = prop.totalGlobalMem;
    // The free memory once this process's context exists there (made by
    // cudaSetDevice's first call on the device and the query after it).
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    if (cudaSetDevice(device) == cudaSuccess &&
        cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      info.memory_usable_bytes =
          std::min<uint64_t>(free_bytes, prop.totalGlobalMem);
    } else {
      (void)cudaGetLastError();  // usable: the total, as without the query
    }
    devices.push_back(std::move(info));
  }
  if (cudaSetDevice(current) != cudaSuccess) (void)cudaGetLastError();
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
