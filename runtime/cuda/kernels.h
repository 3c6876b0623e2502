// The built-in ops (scheduler/op_signatures.h) as CUDA kernels.
//
// Host-side launchers enqueue one op on a stream and return at once; the
// kernels match the CPU reference kernels of runtime/ops/cpu_kernels.h:
// fill writes a per-dtype element pattern, axpy/scale/add are elementwise
// float32, reduce_sum accumulates in double and stores float32 into out[0],
// and spin busy-waits on the device clock. A returned error is a launch
// error; faults while the kernel runs surface through the stream.
//
// The caller must have made the stream's device current (cudaSetDevice) and
// guarantees that every pointer is device memory on that device, valid for
// the given element count until the work has run. Pointers must be aligned
// to their element size (INVALID_ARGUMENT otherwise).
//
// Plain C++: this header needs only the CUDA runtime API types, so host code
// compiled by the ordinary C++ compiler can call into the nvcc-built kernels.
#ifndef WEFT_RUNTIME_CUDA_KERNELS_H_
#define WEFT_RUNTIME_CUDA_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace weft::runtime::cuda {

// Sets `count` elements of `element_size` bytes (1, 4 or 8) at `out` to the
// low `element_size` bytes of `pattern` (the element's bit pattern).
absl::Status LaunchFill(void* out, uint64_t count, int element_size,
                        uint64_t pattern, cudaStream_t stream);

// y[i] = a * x[i] + y[i] for i < n.
absl::Status LaunchAxpy(float a, const float* x, float* y, uint64_t n,
                        cudaStream_t stream);

// x[i] = a * x[i] for i < n.
absl::Status LaunchScale(float a, float* x, uint64_t n, cudaStream_t stream);

// out[i] = a[i] + b[i] for i < n.
absl::Status LaunchAdd(const float* a, const float* b, float* out, uint64_t n,
                       cudaStream_t stream);

// out[0] = sum of x[0, n) accumulated in double (0 when n is 0). `out` may
// alias `x`. Large inputs take a two-pass tree reduction whose scratch
// memory comes from the device's stream-ordered pool (cudaMallocAsync).
absl::Status LaunchReduceSum(const float* x, uint64_t n, float* out,
                             cudaStream_t stream);

// Occupies the stream for `duration_ns` of device time (one thread reading
// the global timer). Zero launches an empty kernel.
absl::Status LaunchSpin(uint64_t duration_ns, cudaStream_t stream);

// The spin kernel's entry point, for benchmarks that compare against a raw
// cudaLaunchKernel: one parameter, `unsigned long long duration_ns`.
const void* SpinKernelFunction();

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_KERNELS_H_
