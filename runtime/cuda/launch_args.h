// LaunchArgs: the argument checks of a launch on CUDA devices.
//
// A backend cannot assume that its caller validated a launch, so the CUDA
// backend checks every built-in op's arguments again (arity, scalar or
// buffer, dtype, device, dimensions) with the aliasing rules of the CPU
// reference kernels (runtime/ops/cpu_kernels.h), on device addresses.
// Errors are INVALID_ARGUMENT naming the op and the argument, e.g.
// "axpy: argument 1 must be float32, got int32". Plain C++: checks that a
// buffer lies inside a live allocation are the backend's, passed in as a
// RangeCheck.
#ifndef WEFT_RUNTIME_CUDA_LAUNCH_ARGS_H_
#define WEFT_RUNTIME_CUDA_LAUNCH_ARGS_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/backend.h"

namespace weft::runtime::cuda {

// OK when [ptr, ptr + bytes) lies inside one live allocation on
// ptr.device; otherwise an error naming `what`.
using RangeCheck = std::function<absl::Status(DevicePtr ptr, uint64_t bytes,
                                              absl::string_view what)>;

bool IsScalar(const KernelArg& arg);

// "<op>: argument <index> <what>", INVALID_ARGUMENT.
absl::Status ArgError(absl::string_view op, size_t index,
                      absl::string_view what);

absl::Status CheckArity(absl::string_view op, const KernelLaunch& launch,
                        size_t want);

// Whether the first `a_bytes` of `a` and the first `b_bytes` of `b` share
// a byte (never across devices, never for empty ranges).
bool Overlaps(DevicePtr a, uint64_t a_bytes, DevicePtr b, uint64_t b_bytes);

// An elementwise output may be exactly an input or apart from it.
absl::Status CheckElementwiseAlias(absl::string_view op, size_t out_index,
                                   DevicePtr out, uint64_t out_bytes,
                                   size_t in_index, DevicePtr in,
                                   uint64_t in_bytes);

// An output that must not overlap an input (dot's and gemv's).
absl::Status CheckNoOverlap(absl::string_view op, size_t out_index,
                            absl::string_view out_name, DevicePtr out,
                            uint64_t out_bytes, size_t in_index,
                            absl::string_view in_name, DevicePtr in,
                            uint64_t in_bytes);

// A dimension (gemv's rows and cols): an integer scalar in [1, 2^31 - 1].
absl::StatusOr<uint64_t> DimensionAt(absl::string_view op,
                                     const KernelLaunch& launch, size_t index,
                                     absl::string_view name);

// The buffer argument at `index`, checked to lie on `device` (any device
// when negative) and, unless empty, inside an allocation.
absl::StatusOr<DeviceBufferArg> BufferAt(absl::string_view op,
                                         const KernelLaunch& launch,
                                         size_t index, int device,
                                         const RangeCheck& check_range);

// BufferAt, of dtype float32.
absl::StatusOr<DeviceBufferArg> Float32At(absl::string_view op,
                                          const KernelLaunch& launch,
                                          size_t index, int device,
                                          const RangeCheck& check_range);

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_LAUNCH_ARGS_H_
