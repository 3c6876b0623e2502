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
//   reduce_sum(x: float32 READ, out: float32 WRITE|READ_WRITE)
//       out[0] = sum(x)
//   spin(any number of buffers, any access)
//       occupies its stream for cost.estimated_us
//
// A scalar parameter typed f32 also accepts f64, i32 and i64 arguments
// (converted); `scalar` accepts any of the four.
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
