// The built-in ops (scheduler/op_signatures.h) as CUDA kernels.
//
// Host-side launchers enqueue one op on a stream and return at once; the
// kernels match the CPU reference kernels of runtime/ops/cpu_kernels.h:
// fill writes a per-dtype element pattern, axpy/scale/add/sub/mul/div are
// elementwise float32, reduce_sum and dot accumulate in double and store
// float32 into out[0], gemv sums each row in double, less/greater write an
// int32 flag, and spin busy-waits on the device clock. A returned error is a
// launch error; faults while the kernel runs surface through the stream.
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
#include "absl/status/statusor.h"

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

// out[i] = a[i] - b[i] (LaunchSub), a[i] * b[i] (LaunchMul) or a[i] / b[i]
// (LaunchDiv, IEEE) for i < n; with `broadcast`, b[0] stands for every b[i].
// `out` may be `a` or `b` itself (the same address); the caller rejects any
// other overlap, including a broadcast `b` inside `out` when n > 1.
absl::Status LaunchSub(const float* a, const float* b, bool broadcast,
                       float* out, uint64_t n, cudaStream_t stream);
absl::Status LaunchMul(const float* a, const float* b, bool broadcast,
                       float* out, uint64_t n, cudaStream_t stream);
absl::Status LaunchDiv(const float* a, const float* b, bool broadcast,
                       float* out, uint64_t n, cudaStream_t stream);

// out[0] = sum of x[i] * y[i] for i < n, products and sum in double (0 when
// n is 0). The last kernel stores out[0] outright, so it needs no zeroing.
// Like LaunchReduceSum, large inputs take two passes with stream-ordered
// scratch memory. `out` must not overlap x[0, n) or y[0, n).
absl::Status LaunchDot(const float* x, const float* y, uint64_t n, float* out,
                       cudaStream_t stream);

// y[r] = sum over c < cols of a[r * cols + c] * x[c], for r < rows (a is
// row-major), summed in double by one warp per row. `y` must not overlap
// the inputs.
absl::Status LaunchGemv(uint64_t rows, uint64_t cols, const float* a,
                        const float* x, float* y, cudaStream_t stream);

// flag[0] = x[0] > t (`greater`) or x[0] < t, as 1 or 0.
absl::Status LaunchCompare(const float* x, float t, bool greater, int32_t* flag,
                           cudaStream_t stream);

// How `spin` fills a device: a block of one warp per multiprocessor it
// takes, each block holding `shared_bytes` of dynamic shared memory (the
// most one block may take), so that no other spin block shares its
// multiprocessor. Spins then share a device as the cost model says
// kernels do (scheduler/occupancy.h): spins whose occupancies add up to
// more than the device wait for multiprocessors to come free.
struct SpinShape {
  unsigned multiprocessors = 1;
  uint32_t shared_bytes = 0;
};

// The spin shape of `device`, allowing the spin kernel that much shared
// memory there. Makes `device` current.
absl::StatusOr<SpinShape> PrepareSpin(int device);

// Occupies `blocks` multiprocessors of the stream's device (see SpinShape)
// for `duration_ns` of device time, each block reading the global timer.
// Zero launches an empty kernel.
absl::Status LaunchSpin(uint64_t duration_ns, unsigned blocks,
                        uint32_t shared_bytes, cudaStream_t stream);

// The spin kernel's entry point, for benchmarks that compare against a raw
// cudaLaunchKernel: one parameter, `unsigned long long duration_ns`.
const void* SpinKernelFunction();

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_KERNELS_H_
