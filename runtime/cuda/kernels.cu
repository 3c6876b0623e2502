// CUDA kernels of the built-in ops. Built by nvcc (see BUILD); everything
// host code needs is declared in kernels.h.
#include "runtime/cuda/kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_status.h"

namespace weft::runtime::cuda {
namespace {

constexpr unsigned kThreads = 256;
// Grid-stride loops cap the grid; this is a few waves on current GPUs.
constexpr uint64_t kMaxBlocks = 4096;
// Work per thread below which reduce_sum runs in a single block.
constexpr uint64_t kReducePerThread = 8;
constexpr uint64_t kMaxReduceBlocks = 1024;

unsigned BlocksFor(uint64_t n) {
  return static_cast<unsigned>(
      std::min<uint64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
}

absl::Status CheckAligned(const void* p, uint64_t alignment,
                          const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % alignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is not aligned to ", alignment, " bytes"));
  }
  return absl::OkStatus();
}

cudaLaunchConfig_t Config(unsigned blocks, unsigned threads,
                          cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  return config;
}

template <typename T>
__global__ void FillKernel(T* out, uint64_t n, T value) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    out[i] = value;
  }
}

__global__ void AxpyKernel(float a, const float* x, float* y, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    // Explicit rounding: no fused multiply-add, so results match the CPU
    // reference bit for bit.
    y[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);
  }
}

__global__ void ScaleKernel(float a, float* x, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    x[i] = __fmul_rn(a, x[i]);
  }
}

__global__ void AddKernel(const float* a, const float* b, float* out,
                          uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    out[i] = __fadd_rn(a[i], b[i]);
  }
}

// Sum of `v` over the block, valid in thread 0. REQUIRES: blockDim.x ==
// kThreads; every thread of the block calls it.
__device__ double BlockSum(double v) {
  __shared__ double warp_sums[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? warp_sums[lane] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2) {
      v += __shfl_down_sync(0xffffffffu, v, offset);
    }
  }
  return v;
}

// Pass 1: block b writes the sum of its grid-stride share to partials[b].
__global__ void ReducePartialKernel(const float* x, uint64_t n,
                                    double* partials) {
  double sum = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    sum += x[i];
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// One block sums `in[0, n)` and stores the float32 result in out[0]. Every
// read of `in` happens before BlockSum's barrier, so `out` may alias it.
template <typename T>
__global__ void ReduceFinalKernel(const T* in, uint64_t n, float* out) {
  double sum = 0;
  for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) sum += in[i];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) out[0] = static_cast<float>(sum);
}

// sub, mul, div: out[i] = a[i] op b[i], or a[i] op b[0] when `broadcast`.
// Each thread reads its a[i] and b[i] before writing out[i], so `out` may be
// `a` or `b` itself; a broadcast `b` does not overlap `out` unless n is 1
// (the launcher checks).
enum class BinaryOp { kSub, kMul, kDiv };

template <BinaryOp kOp>
__global__ void BinaryKernel(const float* a, const float* b, bool broadcast,
                             float* out, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float x = a[i];
    const float y = broadcast ? b[0] : b[i];
    // Round-to-nearest intrinsics: IEEE results, as on the CPU.
    if constexpr (kOp == BinaryOp::kSub) {
      out[i] = __fsub_rn(x, y);
    } else if constexpr (kOp == BinaryOp::kMul) {
      out[i] = __fmul_rn(x, y);
    } else {
      out[i] = __fdiv_rn(x, y);
    }
  }
}

// Pass 1 of dot: block b writes its grid-stride share of sum x[i] * y[i]
// (in double, where the product is exact) to partials[b].
__global__ void DotPartialKernel(const float* x, const float* y, uint64_t n,
                                 double* partials) {
  double sum = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    sum += static_cast<double>(x[i]) * static_cast<double>(y[i]);
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

// Small dots: one block computes the whole sum and stores out[0], so `out`
// needs no zeroing beforehand.
__global__ void DotSingleBlockKernel(const float* x, const float* y, uint64_t n,
                                     float* out) {
  double sum = 0;
  for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) {
    sum += static_cast<double>(x[i]) * static_cast<double>(y[i]);
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) out[0] = static_cast<float>(sum);
}

// One warp per row (grid-stride over rows): lanes sum strided columns in
// double, then the warp adds up its lanes.
__global__ void GemvKernel(uint64_t rows, uint64_t cols, const float* a,
                           const float* x, float* y) {
  const unsigned lane = threadIdx.x % 32;
  const uint64_t warps = uint64_t{gridDim.x} * (blockDim.x / 32);
  for (uint64_t r = blockIdx.x * uint64_t{blockDim.x / 32} + threadIdx.x / 32;
       r < rows; r += warps) {
    const float* row = a + r * cols;
    double sum = 0;
    for (uint64_t c = lane; c < cols; c += 32) {
      sum += static_cast<double>(row[c]) * static_cast<double>(x[c]);
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if (lane == 0) y[r] = static_cast<float>(sum);
  }
}

// less (greater = false) or greater: flag[0] = x[0] < t (resp. >) as 1/0.
__global__ void CompareKernel(const float* x, float t, bool greater,
                              int32_t* flag) {
  const float v = x[0];
  flag[0] = (greater ? v > t : v < t) ? 1 : 0;
}

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One thread per block reads the clock; the block's other threads and its
// shared memory only hold the multiprocessor.
__global__ void SpinKernel(unsigned long long duration_ns) {
  if (duration_ns == 0 || threadIdx.x != 0) return;
  const unsigned long long start = GlobalTimerNs();
  while (GlobalTimerNs() - start < duration_ns) {
    __nanosleep(200);
  }
}

}  // namespace

absl::Status LaunchFill(void* out, uint64_t count, int element_size,
                        uint64_t pattern, cudaStream_t stream) {
  if (count == 0) return absl::OkStatus();
  switch (element_size) {
    case 1:
      return WEFT_CUDA_STATUS(cudaMemsetAsync(
          out, static_cast<int>(pattern & 0xff), count, stream));
    case 4: {
      absl::Status aligned = CheckAligned(out, 4, "fill output");
      if (!aligned.ok()) return aligned;
      cudaLaunchConfig_t config = Config(BlocksFor(count), kThreads, stream);
      return WEFT_CUDA_STATUS(cudaLaunchKernelEx(
          &config, FillKernel<uint32_t>, static_cast<uint32_t*>(out), count,
          static_cast<uint32_t>(pattern)));
    }
    case 8: {
      absl::Status aligned = CheckAligned(out, 8, "fill output");
      if (!aligned.ok()) return aligned;
      cudaLaunchConfig_t config = Config(BlocksFor(count), kThreads, stream);
      return WEFT_CUDA_STATUS(cudaLaunchKernelEx(
          &config, FillKernel<uint64_t>, static_cast<uint64_t*>(out), count,
          static_cast<uint64_t>(pattern)));
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("fill: unsupported element size ", element_size));
  }
}

absl::Status LaunchAxpy(float a, const float* x, float* y, uint64_t n,
                        cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  for (const void* p : {static_cast<const void*>(x),
                        static_cast<const void*>(y)}) {
    absl::Status aligned = CheckAligned(p, 4, "axpy operand");
    if (!aligned.ok()) return aligned;
  }
  cudaLaunchConfig_t config = Config(BlocksFor(n), kThreads, stream);
  return WEFT_CUDA_STATUS(cudaLaunchKernelEx(&config, AxpyKernel, a, x, y, n));
}

absl::Status LaunchScale(float a, float* x, uint64_t n, cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  absl::Status aligned = CheckAligned(x, 4, "scale operand");
  if (!aligned.ok()) return aligned;
  cudaLaunchConfig_t config = Config(BlocksFor(n), kThreads, stream);
  return WEFT_CUDA_STATUS(cudaLaunchKernelEx(&config, ScaleKernel, a, x, n));
}

absl::Status LaunchAdd(const float* a, const float* b, float* out, uint64_t n,
                       cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  for (const void* p :
       {static_cast<const void*>(a), static_cast<const void*>(b),
        static_cast<const void*>(out)}) {
    absl::Status aligned = CheckAligned(p, 4, "add operand");
    if (!aligned.ok()) return aligned;
  }
  cudaLaunchConfig_t config = Config(BlocksFor(n), kThreads, stream);
  return WEFT_CUDA_STATUS(
      cudaLaunchKernelEx(&config, AddKernel, a, b, out, n));
}

absl::Status LaunchReduceSum(const float* x, uint64_t n, float* out,
                             cudaStream_t stream) {
  for (const void* p :
       {static_cast<const void*>(x), static_cast<const void*>(out)}) {
    absl::Status aligned = CheckAligned(p, 4, "reduce_sum operand");
    if (!aligned.ok()) return aligned;
  }
  const uint64_t blocks =
      std::min<uint64_t>(n / (kThreads * kReducePerThread), kMaxReduceBlocks);
  if (blocks <= 1) {
    cudaLaunchConfig_t config = Config(1, kThreads, stream);
    return WEFT_CUDA_STATUS(
        cudaLaunchKernelEx(&config, ReduceFinalKernel<float>, x, n, out));
  }
  double* partials = nullptr;
  WEFT_CUDA_RETURN_IF_ERROR(cudaMallocAsync(
      reinterpret_cast<void**>(&partials), blocks * sizeof(double), stream));
  cudaLaunchConfig_t partial_config =
      Config(static_cast<unsigned>(blocks), kThreads, stream);
  const absl::Status partial_launched = WEFT_CUDA_STATUS(cudaLaunchKernelEx(
      &partial_config, ReducePartialKernel, x, n, partials));
  cudaLaunchConfig_t final_config = Config(1, kThreads, stream);
  const absl::Status launched =
      partial_launched.ok()
          ? WEFT_CUDA_STATUS(cudaLaunchKernelEx(
                &final_config, ReduceFinalKernel<double>,
                static_cast<const double*>(partials), blocks, out))
          : partial_launched;
  // Stream-ordered: the scratch returns to the pool after the kernels ran.
  const absl::Status freed =
      WEFT_CUDA_STATUS(cudaFreeAsync(partials, stream));
  return launched.ok() ? freed : launched;
}

namespace {

template <BinaryOp kOp>
absl::Status LaunchBinary(const char* what, const float* a, const float* b,
                          bool broadcast, float* out, uint64_t n,
                          cudaStream_t stream) {
  if (n == 0) return absl::OkStatus();
  for (const void* p :
       {static_cast<const void*>(a), static_cast<const void*>(b),
        static_cast<const void*>(out)}) {
    absl::Status aligned = CheckAligned(p, 4, what);
    if (!aligned.ok()) return aligned;
  }
  cudaLaunchConfig_t config = Config(BlocksFor(n), kThreads, stream);
  return WEFT_CUDA_STATUS(cudaLaunchKernelEx(&config, BinaryKernel<kOp>, a, b,
                                             broadcast, out, n));
}

}  // namespace

absl::Status LaunchSub(const float* a, const float* b, bool broadcast,
                       float* out, uint64_t n, cudaStream_t stream) {
  return LaunchBinary<BinaryOp::kSub>("sub operand", a, b, broadcast, out, n,
                                      stream);
}

absl::Status LaunchMul(const float* a, const float* b, bool broadcast,
                       float* out, uint64_t n, cudaStream_t stream) {
  return LaunchBinary<BinaryOp::kMul>("mul operand", a, b, broadcast, out, n,
                                      stream);
}

absl::Status LaunchDiv(const float* a, const float* b, bool broadcast,
                       float* out, uint64_t n, cudaStream_t stream) {
  return LaunchBinary<BinaryOp::kDiv>("div operand", a, b, broadcast, out, n,
                                      stream);
}

absl::Status LaunchDot(const float* x, const float* y, uint64_t n, float* out,
                       cudaStream_t stream) {
  for (const void* p :
       {static_cast<const void*>(x), static_cast<const void*>(y),
        static_cast<const void*>(out)}) {
    absl::Status aligned = CheckAligned(p, 4, "dot operand");
    if (!aligned.ok()) return aligned;
  }
  const uint64_t blocks =
      std::min<uint64_t>(n / (kThreads * kReducePerThread), kMaxReduceBlocks);
  if (blocks <= 1) {
    cudaLaunchConfig_t config = Config(1, kThreads, stream);
    return WEFT_CUDA_STATUS(
        cudaLaunchKernelEx(&config, DotSingleBlockKernel, x, y, n, out));
  }
  double* partials = nullptr;
  WEFT_CUDA_RETURN_IF_ERROR(cudaMallocAsync(
      reinterpret_cast<void**>(&partials), blocks * sizeof(double), stream));
  cudaLaunchConfig_t partial_config =
      Config(static_cast<unsigned>(blocks), kThreads, stream);
  const absl::Status partial_launched = WEFT_CUDA_STATUS(cudaLaunchKernelEx(
      &partial_config, DotPartialKernel, x, y, n, partials));
  cudaLaunchConfig_t final_config = Config(1, kThreads, stream);
  const absl::Status launched =
      partial_launched.ok()
          ? WEFT_CUDA_STATUS(cudaLaunchKernelEx(
                &final_config, ReduceFinalKernel<double>,
                static_cast<const double*>(partials), blocks, out))
          : partial_launched;
  const absl::Status freed =
      WEFT_CUDA_STATUS(cudaFreeAsync(partials, stream));
  return launched.ok() ? freed : launched;
}

absl::Status LaunchGemv(uint64_t rows, uint64_t cols, const float* a,
                        const float* x, float* y, cudaStream_t stream) {
  if (rows == 0) return absl::OkStatus();
  for (const void* p :
       {static_cast<const void*>(a), static_cast<const void*>(x),
        static_cast<const void*>(y)}) {
    absl::Status aligned = CheckAligned(p, 4, "gemv operand");
    if (!aligned.ok()) return aligned;
  }
  constexpr uint64_t kWarpsPerBlock = kThreads / 32;
  const unsigned blocks = static_cast<unsigned>(std::min<uint64_t>(
      (rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks));
  cudaLaunchConfig_t config = Config(blocks, kThreads, stream);
  return WEFT_CUDA_STATUS(
      cudaLaunchKernelEx(&config, GemvKernel, rows, cols, a, x, y));
}

absl::Status LaunchCompare(const float* x, float t, bool greater,
                           int32_t* flag, cudaStream_t stream) {
  for (const void* p :
       {static_cast<const void*>(x), static_cast<const void*>(flag)}) {
    absl::Status aligned =
        CheckAligned(p, 4, greater ? "greater operand" : "less operand");
    if (!aligned.ok()) return aligned;
  }
  cudaLaunchConfig_t config = Config(1, 1, stream);
  return WEFT_CUDA_STATUS(
      cudaLaunchKernelEx(&config, CompareKernel, x, t, greater, flag));
}

absl::StatusOr<SpinShape> PrepareSpin(int device) {
  WEFT_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  int multiprocessors = 0;
  int optin = 0;
  WEFT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
      &multiprocessors, cudaDevAttrMultiProcessorCount, device));
  WEFT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
      &optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  SpinShape shape;
  shape.multiprocessors = static_cast<unsigned>(std::max(1, multiprocessors));
  shape.shared_bytes = static_cast<uint32_t>(std::max(0, optin));
  WEFT_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
      SpinKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(shape.shared_bytes)));
  return shape;
}

absl::Status LaunchSpin(uint64_t duration_ns, unsigned blocks,
                        uint32_t shared_bytes, cudaStream_t stream) {
  cudaLaunchConfig_t config = Config(std::max(1u, blocks), 32, stream);
  config.dynamicSmemBytes = duration_ns == 0 ? 0 : shared_bytes;
  return WEFT_CUDA_STATUS(cudaLaunchKernelEx(
      &config, SpinKernel, static_cast<unsigned long long>(duration_ns)));
}

const void* SpinKernelFunction() {
  return reinterpret_cast<const void*>(&SpinKernel);
}

}  // namespace weft::runtime::cuda
