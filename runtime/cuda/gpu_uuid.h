// Formats a GPU's 16-byte UUID the way nvidia-smi and dcgm-exporter print it:
// "GPU-" followed by lowercase hex in 8-4-4-4-12 groups, e.g.
// "GPU-5ba0d8a5-39a5-9f4a-6e2c-000000000001". Metrics and ListDevices use it
// so Weft's device labels join with the node's DCGM metrics.
#ifndef WEFT_RUNTIME_CUDA_GPU_UUID_H_
#define WEFT_RUNTIME_CUDA_GPU_UUID_H_

#include <string>

namespace weft::runtime {

// `bytes` is cudaUUID_t::bytes (a char[16]), most significant byte first.
std::string FormatGpuUuid(const char (&bytes)[16]);

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_CUDA_GPU_UUID_H_
