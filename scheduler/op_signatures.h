// The built-in ops and the argument lists they accept.
//
// Shared by validation (GraphBuilder rejects a node whose arguments do not
// match) and by the backends that implement the ops. Argument order is part
// of the public contract:
//
//   fill(out: buffer WRITE|READ_WRITE, value: scalar)
//       every element of `out` (per its dtype) = value
//   copy(src: buffer READ, dst: buffer WRITE|READ_WRITE)
//       dst[0, src.size) = src; dst.size_bytes >= src.size_bytes
//   axpy(a: f32, x: float32 READ, y: float32 READ_WRITE)
//       y = a * x + y over min(len(x), len(y)) elements
//   scale(a: f32, x: float32 READ_WRITE)
//       x = a * x
//   add(a: float32 READ, b: float32 READ, out: float32 WRITE|READ_WRITE)
//       out = a + b over the shortest of the three
//   sub(a: float32 READ, b: float32 READ, out: float32 WRITE|READ_WRITE)
//   mul(...same...), div(...same...)
//       out[i] = a[i] - b[i] (resp. *, /) for i < n = min(len(a), len(out));
//       `b` holds either one element, used for every i (broadcast), or at
//       least n elements (b[i]); any other length is rejected. Elements of
//       `out` from n on are untouched. div follows IEEE 754 (x / 0 is an
//       infinity, 0 / 0 NaN).
//   reduce_sum(x: float32 READ, out: float32 WRITE|READ_WRITE)
//       out[0] = sum(x)
//   dot(x: float32 READ, y: float32 READ, out: float32 WRITE|READ_WRITE)
//       out[0] = sum of x[i] * y[i] over i < min(len(x), len(y)) (0 when
//       that is 0); products and sum in double, stored as float32
//   gemv(rows: i32, cols: i32, A: float32 READ, x: float32 READ,
//        y: float32 WRITE|READ_WRITE)
//       y[r] = sum over c < cols of A[r * cols + c] * x[c], for r < rows:
//       A is row-major rows x cols. rows, cols >= 1; A holds at least
//       rows * cols elements, x at least cols, y at least rows (elements
//       past those are ignored, resp. untouched). Sums in double.
//   less(x: float32 READ, t: f32, flag: int32 WRITE|READ_WRITE)
//   greater(...same...)
//       flag[0] = 1 if x[0] < t (resp. x[0] > t), else 0, with t rounded
//       to float32 first; a NaN on either side gives 0
//   spin(any number of buffers, any access)
//       occupies its stream for cost.estimated_us
//
// A scalar parameter typed f32 also accepts f64, i32 and i64 arguments
// (converted); `scalar` accepts any of the four; i32 accepts i32 and i64
// arguments whose value fits in int32.
//
// Aliasing: a node may name the same buffer as an input and as its output.
// Elementwise ops (axpy, scale, add, sub, mul, div) then compute in place,
// element i read before element i is written. reduce_sum reads all of `x`
// before writing out[0]. gemv and dot cannot: their `y` (resp. `out`) must
// not be the same buffer as an input, which is rejected here and, for
// overlapping memory, by the kernels.
//
// User kernels (NodeSpec::kernel set, op kUserKernelOp) have no signature
// here: their arguments are the kernel's parameters in order, any mix of
// buffers (any dtype, any access) and scalars, passed as they are.
#ifndef WEFT_SCHEDULER_OP_SIGNATURES_H_
#define WEFT_SCHEDULER_OP_SIGNATURES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "scheduler/graph.h"

namespace weft::scheduler {

// True for the names listed above.
bool IsBuiltinOp(absl::string_view op);
std::vector<std::string> BuiltinOpNames();

// Checks `node.args` against its op's signature. `buffers` resolves buffer
// ids (already validated). On mismatch returns INVALID_ARGUMENT whose message
// starts with `field_prefix` (e.g. "graph.nodes[3]") and names the argument.
absl::Status CheckOpSignature(const NodeSpec& node,
                              const std::vector<BufferSpec>& buffers,
                              absl::string_view field_prefix);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_OP_SIGNATURES_H_
