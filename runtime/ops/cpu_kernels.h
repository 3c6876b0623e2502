// CPU reference implementations of the built-in ops.
//
// Each op of scheduler/op_signatures.h (fill, copy, axpy, scale, add, sub,
// mul, div, reduce_sum, dot, gemv, less, greater, spin) has a kernel here
// that works on plain host memory. The simulated backend runs them on its
// "device" memory (which is host memory), host-engine nodes can run them
// directly, and the CUDA kernels are checked against them. Kernels validate
// what they touch (argument count and kinds, dtypes, sizes) and answer
// INVALID_ARGUMENT instead of reading or writing out of bounds, because a
// backend cannot assume its caller validated the graph.
//
// Aliasing: an elementwise op (axpy, scale, add, sub, mul, div) may write
// into one of its inputs when the two are exactly the same memory (same
// address, same length used); any other overlap of its output with an
// input is INVALID_ARGUMENT, since its result would depend on the order the
// elements are computed in. gemv's `y` and dot's `out` must not overlap
// their inputs at all (INVALID_ARGUMENT). Only the elements an op uses
// count: e.g. the first rows * cols of gemv's `A`.
//
// `spin` has no effect on memory: occupying a stream for the node's cost is
// timing, which belongs to the backend that runs the kernel.
//
// Kernels are looked up in a CpuKernelTable, an ordinary object that callers
// create and inject (there is no global registry), so tests can add ops of
// their own, e.g. one that fails.
#ifndef WEFT_RUNTIME_OPS_CPU_KERNELS_H_
#define WEFT_RUNTIME_OPS_CPU_KERNELS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "scheduler/graph.h"

namespace weft::runtime {

// A buffer argument as host memory. `data` is not owned.
struct HostBufferArg {
  void* data = nullptr;
  uint64_t size_bytes = 0;
  scheduler::DType dtype = scheduler::DType::kBytes;
  scheduler::Access access = scheduler::Access::kRead;
};

using HostArg = std::variant<HostBufferArg, float, double, int32_t, int64_t>;

// A kernel: runs the op over `args` synchronously on the calling thread.
using CpuKernel = std::function<absl::Status(absl::Span<const HostArg> args)>;

// Maps op names to kernels. Not thread-safe while being filled; once filled,
// concurrent Find/Run calls are safe (they only read).
class CpuKernelTable {
 public:
  CpuKernelTable() = default;
  CpuKernelTable(CpuKernelTable&&) = default;
  CpuKernelTable& operator=(CpuKernelTable&&) = default;
  CpuKernelTable(const CpuKernelTable&) = delete;
  CpuKernelTable& operator=(const CpuKernelTable&) = delete;

  // A table holding every built-in op.
  static CpuKernelTable WithBuiltins();

  // ALREADY_EXISTS when `op` is registered already.
  absl::Status Register(std::string op, CpuKernel kernel);

  bool Contains(absl::string_view op) const;
  // The kernel for `op`, or null. The pointer lives as long as the table.
  const CpuKernel* Find(absl::string_view op) const;

  // Runs `op`; UNIMPLEMENTED when no kernel is registered under that name.
  absl::Status Run(absl::string_view op, absl::Span<const HostArg> args) const;

 private:
  absl::flat_hash_map<std::string, CpuKernel> kernels_;
};

// The built-in kernels, exposed for direct use and tests.
absl::Status FillKernel(absl::Span<const HostArg> args);
absl::Status CopyKernel(absl::Span<const HostArg> args);
absl::Status AxpyKernel(absl::Span<const HostArg> args);
absl::Status ScaleKernel(absl::Span<const HostArg> args);
absl::Status AddKernel(absl::Span<const HostArg> args);
absl::Status SubKernel(absl::Span<const HostArg> args);
absl::Status MulKernel(absl::Span<const HostArg> args);
absl::Status DivKernel(absl::Span<const HostArg> args);
absl::Status ReduceSumKernel(absl::Span<const HostArg> args);
absl::Status DotKernel(absl::Span<const HostArg> args);
absl::Status GemvKernel(absl::Span<const HostArg> args);
absl::Status LessKernel(absl::Span<const HostArg> args);
absl::Status GreaterKernel(absl::Span<const HostArg> args);
absl::Status SpinKernel(absl::Span<const HostArg> args);

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_OPS_CPU_KERNELS_H_
