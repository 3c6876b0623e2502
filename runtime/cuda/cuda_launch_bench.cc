// Per-kernel host overhead of CudaBackend::Launch against raw
// cudaLaunchKernel of the same zero-length spin kernel.
//
//   cuda_launch_bench [launches]   (default 20000)
//
// For each path it issues `launches` spin(0) kernels on one stream, then
// synchronizes, and prints the host time per launch while issuing and the
// time per kernel including the drain. Exits 0 with a message when no GPU is
// visible.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/backend.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/kernels.h"

namespace weft::runtime {
namespace {

struct Timing {
  double issue_us_per_launch = 0;
  double total_us_per_launch = 0;
};

absl::StatusOr<Timing> TimeBackend(Backend& backend, int launches) {
  absl::StatusOr<StreamHandle> stream = backend.CreateStream(0);
  if (!stream.ok()) return stream.status();
  KernelLaunch spin;
  spin.op = "spin";
  spin.cost_us = 0;
  for (int i = 0; i < 100; ++i) {  // warm-up
    if (absl::Status s = backend.Launch(spin, *stream); !s.ok()) return s;
  }
  if (absl::Status s = backend.SynchronizeStream(*stream); !s.ok()) return s;
  const absl::Time start = absl::Now();
  for (int i = 0; i < launches; ++i) {
    if (absl::Status s = backend.Launch(spin, *stream); !s.ok()) return s;
  }
  const absl::Time issued = absl::Now();
  if (absl::Status s = backend.SynchronizeStream(*stream); !s.ok()) return s;
  const absl::Time drained = absl::Now();
  if (absl::Status s = backend.DestroyStream(*stream); !s.ok()) return s;
  return Timing{absl::ToDoubleMicroseconds(issued - start) / launches,
                absl::ToDoubleMicroseconds(drained - start) / launches};
}

absl::StatusOr<Timing> TimeRaw(int launches) {
  WEFT_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const void* kernel = cuda::SpinKernelFunction();
  unsigned long long duration_ns = 0;
  void* args[] = {&duration_ns};
  for (int i = 0; i < 100; ++i) {  // warm-up
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, stream));
  }
  WEFT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const absl::Time start = absl::Now();
  for (int i = 0; i < launches; ++i) {
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, stream));
  }
  const absl::Time issued = absl::Now();
  WEFT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const absl::Time drained = absl::Now();
  WEFT_CUDA_RETURN_IF_ERROR(cudaStreamDestroy(stream));
  return Timing{absl::ToDoubleMicroseconds(issued - start) / launches,
                absl::ToDoubleMicroseconds(drained - start) / launches};
}

int Main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (launches <= 0) {
    std::fprintf(stderr, "usage: %s [launches > 0]\n", argv[0]);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create();
  if (!backend.ok()) {
    std::printf("no GPU, nothing to measure: %s\n",
                std::string(backend.status().message()).c_str());
    return 0;
  }
  const DeviceInfo info = (*backend)->device_info(0);
  std::printf("device 0: %s (%s), %d spin(0) launches per path\n",
              info.name.c_str(), info.uuid.c_str(), launches);

  absl::StatusOr<Timing> raw = TimeRaw(launches);
  absl::StatusOr<Timing> through_backend = TimeBackend(**backend, launches);
  for (const absl::Status& s : {raw.status(), through_backend.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "benchmark failed: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("%-22s %14s %14s\n", "path", "issue us/op", "total us/op");
  std::printf("%-22s %14.3f %14.3f\n", "raw cudaLaunchKernel",
              raw->issue_us_per_launch, raw->total_us_per_launch);
  std::printf("%-22s %14.3f %14.3f\n", "CudaBackend::Launch",
              through_backend->issue_us_per_launch,
              through_backend->total_us_per_launch);
  std::printf("backend overhead: %+.3f us per launch (issue)\n",
              through_backend->issue_us_per_launch - raw->issue_us_per_launch);
  return 0;
}

}  // namespace
}  // namespace weft::runtime

int main(int argc, char** argv) { return weft::runtime::Main(argc, argv); }
