// Wire graphs (weft.v1.Graph) that tests across the layers share.
#ifndef WEFT_TESTING_WIRE_GRAPHS_H_
#define WEFT_TESTING_WIRE_GRAPHS_H_

#include <cstdint>

#include "weft/v1/weft.pb.h"

namespace weft::testing {

// Three FLOAT32 tensors of `tensor_bytes` each, a (filled with 1), b (2,
// the output) and c (3), and an INT32 condition go (1), used in turn:
// scale_c (c *= 2), a_into_b (b += a), loop (at most 8 times: double_b,
// b *= 2; test, go = b < 40), c_into_b (b += c). Every element of b ends
// at 54. Issued in that order on one stream, all three tensors are live
// at a_into_b, and b and go through the loop.
weft::v1::Graph LoopBetweenTensors(int64_t tensor_bytes);

// x (1,000,000 bytes, FLOAT32), written by `make` pinned to device 0; a
// loop (at most twice, condition go, INT32) whose body's `step` (y += x,
// y 1,000 bytes, an output) is pinned to device 1 and `stop` (go = 0) to
// device 0. The loop goes where x is, device 0, and its body runs `step`
// on the other device.
weft::v1::Graph LoopWithABodyNodeElsewhere();

// A chain of `n` adds over 4 KiB FLOAT32 buffers, each writing a buffer of
// its own: b<i> = b<i-1> + one (add<i>, for i from 1 to n; one and b0 are
// filled with 1), so b<n>, the output, holds n + 1 everywhere. Each buffer
// by itself, the chain needs (n + 2) * 4 KiB of device memory; no more
// than three are ever live.
weft::v1::Graph AddChain(int n);

}  // namespace weft::testing

#endif  // WEFT_TESTING_WIRE_GRAPHS_H_
