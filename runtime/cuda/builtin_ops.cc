#include "runtime/cuda/builtin_ops.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/kernels.h"
#include "runtime/ops/scalars.h"
#include "scheduler/occupancy.h"
#include "scheduler/status_macros.h"

namespace weft::runtime::cuda {

using scheduler::DType;

absl::Status EnqueueDeviceCopy(DevicePtr dst, DevicePtr src, uint64_t bytes,
                               cudaStream_t stream) {
  if (dst.device != src.device) {
    return WEFT_CUDA_STATUS(cudaMemcpyAsync(AsPointer(dst), AsPointer(src),
                                            bytes, cudaMemcpyDefault, stream));
  }
  if (dst.address == src.address) return absl::OkStatus();
  const bool overlap =
      dst.address < src.address + bytes && src.address < dst.address + bytes;
  if (!overlap) {
    return WEFT_CUDA_STATUS(cudaMemcpyAsync(AsPointer(dst), AsPointer(src),
                                            bytes, cudaMemcpyDeviceToDevice,
                                            stream));
  }
  void* scratch = nullptr;
  WEFT_CUDA_RETURN_IF_ERROR(cudaMallocAsync(&scratch, bytes, stream));
  absl::Status copied = WEFT_CUDA_STATUS(cudaMemcpyAsync(
      scratch, AsPointer(src), bytes, cudaMemcpyDeviceToDevice, stream));
  const absl::Status copied_back =
      copied.ok()
          ? WEFT_CUDA_STATUS(cudaMemcpyAsync(AsPointer(dst), scratch, bytes,
                                             cudaMemcpyDeviceToDevice, stream))
          : copied;
  const absl::Status freed = WEFT_CUDA_STATUS(cudaFreeAsync(scratch, stream));
  return copied_back.ok() ? freed : copied_back;
}

bool BuiltinOps::Supports(absl::string_view op) {
  return op == "fill" || op == "copy" || op == "axpy" || op == "scale" ||
         op == "add" || op == "sub" || op == "mul" || op == "div" ||
         op == "reduce_sum" || op == "dot" || op == "gemv" || op == "less" ||
         op == "greater" || op == "spin";
}

absl::Status BuiltinOps::Launch(const KernelLaunch& launch, int device,
                                cudaStream_t stream) const {
  const std::string& op = launch.op;
  if (op == "fill") return LaunchFill(launch, device, stream);
  if (op == "copy") return LaunchCopy(launch, device, stream);
  if (op == "axpy") return LaunchAxpy(launch, device, stream);
  if (op == "scale") return LaunchScale(launch, device, stream);
  if (op == "add") return LaunchAdd(launch, device, stream);
  if (op == "sub" || op == "mul" || op == "div") {
    return LaunchBinary(launch, device, stream);
  }
  if (op == "reduce_sum") return LaunchReduceSum(launch, device, stream);
  if (op == "dot") return LaunchDot(launch, device, stream);
  if (op == "gemv") return LaunchGemv(launch, device, stream);
  if (op == "less" || op == "greater") {
    return LaunchCompare(launch, device, stream);
  }
  if (op == "spin") return LaunchSpin(launch, device, stream);
  return absl::UnimplementedError(
      absl::StrCat("no CUDA kernel for op '", op, "'"));
}

absl::Status BuiltinOps::LaunchFill(const KernelLaunch& launch, int device,
                                    cudaStream_t stream) const {
  constexpr absl::string_view kOp = "fill";
  WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 2));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg out,
                        BufferAt(kOp, launch, 0, device, check_range_));
  const KernelArg& value = launch.args[1];
  if (!IsScalar(value)) return ArgError(kOp, 1, "must be a scalar");
  const std::optional<FillPattern> element = FillPatternOf(out.dtype, value);
  if (!element) return ArgError(kOp, 0, "has an unknown dtype");
  return cuda::LaunchFill(AsPointer(out.ptr), out.size_bytes / element->bytes,
                          element->bytes, element->bits, stream);
}

absl::Status BuiltinOps::LaunchCopy(const KernelLaunch& launch, int device,
                                    cudaStream_t stream) const {
  constexpr absl::string_view kOp = "copy";
  WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 2));
  // Either side may live on another device: the copy engines reach peers.
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg src,
                        BufferAt(kOp, launch, 0, /*device=*/-1, check_range_));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg dst,
                        BufferAt(kOp, launch, 1, /*device=*/-1, check_range_));
  if (dst.size_bytes < src.size_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "copy: destination (", dst.size_bytes,
        " bytes) is smaller than source (", src.size_bytes, " bytes)"));
  }
  if (src.size_bytes == 0) return absl::OkStatus();
  return EnqueueDeviceCopy(dst.ptr, src.ptr, src.size_bytes, stream);
}

absl::Status BuiltinOps::LaunchAxpy(const KernelLaunch& launch, int device,
                                    cudaStream_t stream) const {
  constexpr absl::string_view kOp = "axpy";
  WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 3));
  if (!IsScalar(launch.args[0])) return ArgError(kOp, 0, "must be a scalar");
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                        Float32At(kOp, launch, 1, device, check_range_));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg y,
                        Float32At(kOp, launch, 2, device, check_range_));
  const float a = static_cast<float>(ScalarAsDouble(launch.args[0]));
  const uint64_t n = std::min(x.size_bytes / 4, y.size_bytes / 4);
  WEFT_RETURN_IF_ERROR(
      CheckElementwiseAlias(kOp, 2, y.ptr, 4 * n, 1, x.ptr, 4 * n));
  return cuda::LaunchAxpy(a, static_cast<const float*>(AsPointer(x.ptr)),
                          static_cast<float*>(AsPointer(y.ptr)), n, stream);
}

absl::Status BuiltinOps::LaunchScale(const KernelLaunch& launch, int device,
                                     cudaStream_t stream) const {
  constexpr absl::string_view kOp = "scale";
  WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 2));
  if (!IsScalar(launch.args[0])) return ArgError(kOp, 0, "must be a scalar");
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                        Float32At(kOp, launch, 1, device, check_range_));
  const float a = static_cast<float>(ScalarAsDouble(launch.args[0]));
  return cuda::LaunchScale(a, static_cast<float*>(AsPointer(x.ptr)),
                           x.size_bytes / 4, stream);
}

absl::Status BuiltinOps::LaunchAdd(const KernelLaunch& launch, int device,
                                   cudaStream_t stream) const {
  constexpr absl::string_view kOp = "add";
  WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 3));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg a,
                        Float32At(kOp, launch, 0, device, check_range_));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg b,
                        Float32At(kOp, launch, 1, device, check_range_));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg out,
                        Float32At(kOp, launch, 2, device, check_range_));
  const uint64_t n =
      std::min({a.size_bytes / 4, b.size_bytes / 4, out.size_bytes / 4});
  WEFT_RETURN_IF_ERROR(
      CheckElementwiseAlias(kOp, 2, out.ptr, 4 * n, 0, a.ptr, 4 * n));
  WEFT_RETURN_IF_ERROR(
      CheckElementwiseAlias(kOp, 2, out.ptr, 4 * n, 1, b.ptr, 4 * n));
  return cuda::LaunchAdd(static_cast<const float*>(AsPointer(a.ptr)),
                         static_cast<const float*>(AsPointer(b.ptr)),
                         static_cast<float*>(AsPointer(out.ptr)), n, stream);
}

absl::Status BuiltinOps::LaunchReduceSum(const KernelLaunch& launch, int device,
                                         cudaStream_t stream) const {
  constexpr absl::string_view kOp = "reduce_sum";
  WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 2));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                        Float32At(kOp, launch, 0, device, check_range_));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg out,
                        Float32At(kOp, launch, 1, device, check_range_));
  if (out.size_bytes < sizeof(float)) {
    return ArgError(kOp, 1, "must hold at least one float32");
  }
  return cuda::LaunchReduceSum(static_cast<const float*>(AsPointer(x.ptr)),
                               x.size_bytes / 4,
                               static_cast<float*>(AsPointer(out.ptr)), stream);
}

absl::Status BuiltinOps::LaunchBinary(const KernelLaunch& launch, int device,
                                      cudaStream_t stream) const {
  const std::string& op = launch.op;
  WEFT_RETURN_IF_ERROR(CheckArity(op, launch, 3));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg a,
                        Float32At(op, launch, 0, device, check_range_));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg b,
                        Float32At(op, launch, 1, device, check_range_));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg out,
                        Float32At(op, launch, 2, device, check_range_));
  const uint64_t n = std::min(a.size_bytes / 4, out.size_bytes / 4);
  const uint64_t nb = b.size_bytes / 4;
  const bool broadcast = nb == 1;
  if (!broadcast && nb < n) {
    return ArgError(op, 1,
                    absl::StrCat("(b) holds ", nb,
                                 " float32 elements; it must hold one "
                                 "(broadcast) or at least ",
                                 n, " (the shorter of a and out)"));
  }
  WEFT_RETURN_IF_ERROR(
      CheckElementwiseAlias(op, 2, out.ptr, 4 * n, 0, a.ptr, 4 * n));
  WEFT_RETURN_IF_ERROR(CheckElementwiseAlias(op, 2, out.ptr, 4 * n, 1, b.ptr,
                                             broadcast ? 4 : 4 * n));
  const auto* ap = static_cast<const float*>(AsPointer(a.ptr));
  const auto* bp = static_cast<const float*>(AsPointer(b.ptr));
  auto* outp = static_cast<float*>(AsPointer(out.ptr));
  if (op == "sub") {
    return cuda::LaunchSub(ap, bp, broadcast, outp, n, stream);
  }
  if (op == "mul") {
    return cuda::LaunchMul(ap, bp, broadcast, outp, n, stream);
  }
  return cuda::LaunchDiv(ap, bp, broadcast, outp, n, stream);
}

absl::Status BuiltinOps::LaunchDot(const KernelLaunch& launch, int device,
                                   cudaStream_t stream) const {
  constexpr absl::string_view kOp = "dot";
  WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 3));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                        Float32At(kOp, launch, 0, device, check_range_));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg y,
                        Float32At(kOp, launch, 1, device, check_range_));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg out,
                        Float32At(kOp, launch, 2, device, check_range_));
  if (out.size_bytes < sizeof(float)) {
    return ArgError(kOp, 2, "(out) must hold at least one float32");
  }
  const uint64_t n = std::min(x.size_bytes / 4, y.size_bytes / 4);
  WEFT_RETURN_IF_ERROR(
      CheckNoOverlap(kOp, 2, "out", out.ptr, 4, 0, "x", x.ptr, 4 * n));
  WEFT_RETURN_IF_ERROR(
      CheckNoOverlap(kOp, 2, "out", out.ptr, 4, 1, "y", y.ptr, 4 * n));
  return cuda::LaunchDot(static_cast<const float*>(AsPointer(x.ptr)),
                         static_cast<const float*>(AsPointer(y.ptr)), n,
                         static_cast<float*>(AsPointer(out.ptr)), stream);
}

absl::Status BuiltinOps::LaunchGemv(const KernelLaunch& launch, int device,
                                    cudaStream_t stream) const {
  constexpr absl::string_view kOp = "gemv";
  WEFT_RETURN_IF_ERROR(CheckArity(kOp, launch, 5));
  WEFT_ASSIGN_OR_RETURN(const uint64_t rows,
                        DimensionAt(kOp, launch, 0, "rows"));
  WEFT_ASSIGN_OR_RETURN(const uint64_t cols,
                        DimensionAt(kOp, launch, 1, "cols"));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg a,
                        Float32At(kOp, launch, 2, device, check_range_));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                        Float32At(kOp, launch, 3, device, check_range_));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg y,
                        Float32At(kOp, launch, 4, device, check_range_));
  struct Need {
    size_t index;
    const char* name;
    uint64_t have;
    uint64_t elements;
    const char* what;
  };
  for (const Need& need :
       {Need{2, "A", a.size_bytes / 4, rows * cols, "rows * cols"},
        Need{3, "x", x.size_bytes / 4, cols, "cols"},
        Need{4, "y", y.size_bytes / 4, rows, "rows"}}) {
    if (need.have < need.elements) {
      return ArgError(kOp, need.index,
                      absl::StrCat("(", need.name, ") holds ", need.have,
                                   " float32 elements, fewer than ", need.what,
                                   " = ", need.elements));
    }
  }
  WEFT_RETURN_IF_ERROR(CheckNoOverlap(kOp, 4, "y", y.ptr, 4 * rows, 2, "A",
                                      a.ptr, 4 * rows * cols));
  WEFT_RETURN_IF_ERROR(
      CheckNoOverlap(kOp, 4, "y", y.ptr, 4 * rows, 3, "x", x.ptr, 4 * cols));
  return cuda::LaunchGemv(rows, cols,
                          static_cast<const float*>(AsPointer(a.ptr)),
                          static_cast<const float*>(AsPointer(x.ptr)),
                          static_cast<float*>(AsPointer(y.ptr)), stream);
}

absl::Status BuiltinOps::LaunchCompare(const KernelLaunch& launch, int device,
                                       cudaStream_t stream) const {
  const std::string& op = launch.op;
  WEFT_RETURN_IF_ERROR(CheckArity(op, launch, 3));
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg x,
                        Float32At(op, launch, 0, device, check_range_));
  if (!IsScalar(launch.args[1])) return ArgError(op, 1, "(t) must be a scalar");
  WEFT_ASSIGN_OR_RETURN(const DeviceBufferArg flag,
                        BufferAt(op, launch, 2, device, check_range_));
  if (flag.dtype != DType::kInt32) {
    return ArgError(op, 2,
                    absl::StrCat("(flag) must be int32, got ",
                                 scheduler::DTypeName(flag.dtype)));
  }
  if (x.size_bytes < sizeof(float)) {
    return ArgError(op, 0, "(x) must hold at least one float32");
  }
  if (flag.size_bytes < sizeof(int32_t)) {
    return ArgError(op, 2, "(flag) must hold at least one int32");
  }
  const float t = static_cast<float>(ScalarAsDouble(launch.args[1]));
  return cuda::LaunchCompare(
      static_cast<const float*>(AsPointer(x.ptr)), t, op == "greater",
      static_cast<int32_t*>(AsPointer(flag.ptr)), stream);
}

absl::Status BuiltinOps::LaunchSpin(const KernelLaunch& launch, int device,
                                    cudaStream_t stream) const {
  for (size_t i = 0; i < launch.args.size(); ++i) {
    if (IsScalar(launch.args[i]))
      return ArgError("spin", i, "must be a buffer");
  }
  const double ns = launch.cost_us * 1e3;
  // NaN and negative costs spin for no time; absurd ones are capped at an
  // hour rather than overflowing.
  const uint64_t duration_ns =
      ns > 0 ? static_cast<uint64_t>(std::min(ns, 3.6e12)) : 0;
  // The node's share of the device, as multiprocessors (at least one).
  SpinShape shape;
  if (device >= 0 && device < static_cast<int>(spin_shapes_.size())) {
    shape = spin_shapes_[device];
  }
  const double share = std::clamp(
      static_cast<double>(launch.occupancy_units) / scheduler::kOccupancyUnits,
      0.0, 1.0);
  const unsigned blocks = std::max(
      1u, static_cast<unsigned>(std::ceil(share * shape.multiprocessors)));
  return cuda::LaunchSpin(duration_ns, blocks, shape.shared_bytes, stream);
}

}  // namespace weft::runtime::cuda
