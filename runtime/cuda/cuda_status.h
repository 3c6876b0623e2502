// The one place where CUDA error codes become absl::Status.
//
// Every CUDA runtime (cudaError_t), driver (CUresult) and NVRTC
// (nvrtcResult) call in Weft goes through WEFT_CUDA_STATUS or
// WEFT_CUDA_RETURN_IF_ERROR, so codes and messages are uniform:
//
//   cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY,
//   NVRTC_ERROR_OUT_OF_MEMORY                     -> RESOURCE_EXHAUSTED
//   invalid value / input / option                -> INVALID_ARGUMENT
//   NVRTC_ERROR_COMPILATION (bad user source)     -> INVALID_ARGUMENT
//   invalid PTX or image, unsupported PTX version,
//   CUDA_ERROR_NOT_FOUND (no such kernel)         -> INVALID_ARGUMENT
//   no device, no or stub driver, busy devices    -> UNAVAILABLE
//   everything else                               -> INTERNAL
//
// Messages read "<call> failed: <error name>: <error string> [file:line]".
// Converting never calls into a CUDA context, so it is safe from any thread
// (but see CudaStatus for CUresult, which resolves the driver's name table
// lazily).
#ifndef WEFT_RUNTIME_CUDA_CUDA_STATUS_H_
#define WEFT_RUNTIME_CUDA_CUDA_STATUS_H_

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace weft::runtime::cuda {

// OK for cudaSuccess / CUDA_SUCCESS / NVRTC_SUCCESS; otherwise a status with
// the mapped code whose message names `call` (the failing expression) and
// `file`:`line`. Prefer the macros, which fill those in.
absl::Status CudaStatus(cudaError_t error, const char* call, const char* file,
                        int line);
absl::Status CudaStatus(CUresult error, const char* call, const char* file,
                        int line);
absl::Status CudaStatus(nvrtcResult error, const char* call, const char* file,
                        int line);

// The absl code for each kind of CUDA error (exposed for tests).
absl::StatusCode CudaStatusCode(cudaError_t error);
absl::StatusCode CudaStatusCode(CUresult error);
absl::StatusCode CudaStatusCode(nvrtcResult error);

// `status` with `log` (a compiler's or JIT linker's diagnostics) appended
// to its message; `status` itself when OK or when the log is empty.
absl::Status WithLog(absl::Status status, absl::string_view log);

}  // namespace weft::runtime::cuda

// Evaluates a CUDA call and yields its absl::Status.
#define WEFT_CUDA_STATUS(expr) \
  ::weft::runtime::cuda::CudaStatus((expr), #expr, __FILE__, __LINE__)

// Evaluates a CUDA call and returns its status from the enclosing function
// when it failed.
#define WEFT_CUDA_RETURN_IF_ERROR(expr)                        \
  do {                                                         \
    ::absl::Status weft_cuda_status_ = WEFT_CUDA_STATUS(expr); \
    if (!weft_cuda_status_.ok()) return weft_cuda_status_;     \
  } while (false)

#endif  // WEFT_RUNTIME_CUDA_CUDA_STATUS_H_
