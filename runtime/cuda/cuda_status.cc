#include "runtime/cuda/cuda_status.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace weft::runtime::cuda {
namespace {

absl::Status MakeStatus(absl::StatusCode code, absl::string_view call,
                        absl::string_view name, absl::string_view text,
                        absl::string_view file, int line) {
  return absl::Status(code, absl::StrCat(call, " failed: ", name, ": ", text,
                                         " [", file, ":", line, "]"));
}

using CuGetErrorFn = CUresult (*)(CUresult, const char**);

// A CUresult can only come from a process that already loaded the driver,
// so its name tables are looked up in the loaded libcuda without loading
// anything or touching a context. Null when the driver is not loaded.
CuGetErrorFn LoadedDriverFunction(const char* symbol) {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* fn = dlsym(handle, symbol);
  dlclose(handle);  // drops only the reference RTLD_NOLOAD added
  return reinterpret_cast<CuGetErrorFn>(fn);
}

}  // namespace

absl::StatusCode CudaStatusCode(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return absl::StatusCode::kOk;
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorInvalidValue:
    // User code (a graph's modules) that does not load or lacks a kernel.
    case cudaErrorInvalidPtx:
    case cudaErrorInvalidKernelImage:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorSymbolNotFound:
      return absl::StatusCode::kInvalidArgument;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode CudaStatusCode(CUresult error) {
  switch (error) {
    case CUDA_SUCCESS:
      return absl::StatusCode::kOk;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return absl::StatusCode::kResourceExhausted;
    case CUDA_ERROR_INVALID_VALUE:
    // User code (a graph's modules) that does not load or lacks a kernel.
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_NOT_FOUND:
      return absl::StatusCode::kInvalidArgument;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode CudaStatusCode(nvrtcResult error) {
  switch (error) {
    case NVRTC_SUCCESS:
      return absl::StatusCode::kOk;
    case NVRTC_ERROR_OUT_OF_MEMORY:
      return absl::StatusCode::kResourceExhausted;
    case NVRTC_ERROR_INVALID_INPUT:
    case NVRTC_ERROR_INVALID_OPTION:
    // The source being compiled comes from a graph: a compile error is the
    // client's, not ours.
    case NVRTC_ERROR_COMPILATION:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status CudaStatus(cudaError_t error, const char* call, const char* file,
                        int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  return MakeStatus(CudaStatusCode(error), call, cudaGetErrorName(error),
                    cudaGetErrorString(error), file, line);
}

absl::Status CudaStatus(CUresult error, const char* call, const char* file,
                        int line) {
  if (error == CUDA_SUCCESS) return absl::OkStatus();
  std::string name = absl::StrCat("CUresult ", static_cast<int>(error));
  std::string text = "unknown driver error";
  if (CuGetErrorFn get_name = LoadedDriverFunction("cuGetErrorName")) {
    const char* s = nullptr;
    if (get_name(error, &s) == CUDA_SUCCESS && s != nullptr) name = s;
  }
  if (CuGetErrorFn get_text = LoadedDriverFunction("cuGetErrorString")) {
    const char* s = nullptr;
    if (get_text(error, &s) == CUDA_SUCCESS && s != nullptr) text = s;
  }
  return MakeStatus(CudaStatusCode(error), call, name, text, file, line);
}

absl::Status CudaStatus(nvrtcResult error, const char* call, const char* file,
                        int line) {
  if (error == NVRTC_SUCCESS) return absl::OkStatus();
  // NVRTC's only text for a code is the code's name.
  return MakeStatus(CudaStatusCode(error), call, nvrtcGetErrorString(error),
                    absl::StrCat("nvrtcResult ", static_cast<int>(error)), file,
                    line);
}

absl::Status WithLog(absl::Status status, absl::string_view log) {
  while (!log.empty() && (log.back() == '\n' || log.back() == '\0')) {
    log.remove_suffix(1);
  }
  if (status.ok() || log.empty()) return status;
  return absl::Status(status.code(), absl::StrCat(status.message(), "\n", log));
}

}  // namespace weft::runtime::cuda
