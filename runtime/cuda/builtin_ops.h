// BuiltinOps: the built-in ops (scheduler/op_signatures.h) on CUDA streams.
//
// Launch checks a built-in op's arguments (launch_args.h) and enqueues its
// kernel (kernels.h) on a stream; scalars convert as in the CPU reference
// kernels (runtime/ops/scalars.h), so both produce the same bits. Copies,
// the copy op's and the backend's, go through EnqueueDeviceCopy. The
// CUDA backend owns one and hands it the check that a buffer lies inside a
// live allocation. Thread-safe (const; the RangeCheck must be).
#ifndef WEFT_RUNTIME_CUDA_BUILTIN_OPS_H_
#define WEFT_RUNTIME_CUDA_BUILTIN_OPS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/backend.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/launch_args.h"

namespace weft::runtime::cuda {

inline void* AsPointer(DevicePtr ptr) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr.address));
}

// Enqueues a copy of `bytes` from `src` to `dst` on `stream`, of any two
// devices. Across devices cudaMemcpyDefault, which unified addressing
// resolves to a peer copy (staged through the host when peer access is off)
// and which stream capture records as an ordinary memcpy node, so the same
// call serves node-by-node launches and device graphs. Overlapping
// same-device ranges (memmove semantics in the CPU reference) go through
// stream-ordered scratch memory. The caller has made a device current.
absl::Status EnqueueDeviceCopy(DevicePtr dst, DevicePtr src, uint64_t bytes,
                               cudaStream_t stream);

class BuiltinOps {
 public:
  // `spin_shapes`: each device's SpinShape (kernels.h), by index; a device
  // without one spins on one multiprocessor.
  BuiltinOps(RangeCheck check_range, std::vector<SpinShape> spin_shapes)
      : check_range_(std::move(check_range)),
        spin_shapes_(std::move(spin_shapes)) {}

  // Whether `op` is a built-in op that Launch runs (every one of them can
  // also be captured into a device graph).
  static bool Supports(absl::string_view op);

  // Runs `launch` of a built-in op on `stream` of `device`, which the
  // caller has made current. UNIMPLEMENTED for ops Supports denies.
  absl::Status Launch(const KernelLaunch& launch, int device,
                      cudaStream_t stream) const;

 private:
  absl::Status LaunchFill(const KernelLaunch& launch, int device,
                          cudaStream_t stream) const;
  absl::Status LaunchCopy(const KernelLaunch& launch, int device,
                          cudaStream_t stream) const;
  absl::Status LaunchAxpy(const KernelLaunch& launch, int device,
                          cudaStream_t stream) const;
  absl::Status LaunchScale(const KernelLaunch& launch, int device,
                           cudaStream_t stream) const;
  absl::Status LaunchAdd(const KernelLaunch& launch, int device,
                         cudaStream_t stream) const;
  absl::Status LaunchReduceSum(const KernelLaunch& launch, int device,
                               cudaStream_t stream) const;
  // sub, mul, div: over min(len(a), len(out)), `b` of one element
  // broadcast, as in the CPU reference.
  absl::Status LaunchBinary(const KernelLaunch& launch, int device,
                            cudaStream_t stream) const;
  absl::Status LaunchDot(const KernelLaunch& launch, int device,
                         cudaStream_t stream) const;
  absl::Status LaunchGemv(const KernelLaunch& launch, int device,
                          cudaStream_t stream) const;
  // less, greater: flag[0] = x[0] < t (resp. >), t rounded to float32.
  absl::Status LaunchCompare(const KernelLaunch& launch, int device,
                             cudaStream_t stream) const;
  absl::Status LaunchSpin(const KernelLaunch& launch, int device,
                          cudaStream_t stream) const;

  const RangeCheck check_range_;
  const std::vector<SpinShape> spin_shapes_;
};

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_BUILTIN_OPS_H_
