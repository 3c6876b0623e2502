// DNN-shaped graphs for memory planning: activations only (weights live
// outside the job), one node per layer, float32 tensors.
//
//   - MobileNetLike: a chain of inverted residual blocks (expand 6x,
//     depthwise, project, residual add), resolution halving per stage;
//   - NasLike: irregular cells (NASNet/DARTS style): each cell reads the two
//     cells before it, its intermediate nodes combine two earlier states at
//     random, and its output concatenates the states nothing else read;
//   - TransformerStack: pre-norm blocks (q, k, v, attention scores per head,
//     softmax, context, projection, residual; norm, 4x MLP, residual);
//   - UNet: an encoder whose every level is read again by the decoder at
//     the same level (long skips);
//   - RandomDag: random layered DAGs with tensors from 4 KiB to 1 MiB, each
//     node reading one to three tensors of the last layers.
//
// `nodes` is the size to aim at: builders repeat their pattern until the
// graph has about that many nodes. The first tensor is host data, the last
// an output. Deterministic; thread-safe.
#ifndef WEFT_SCHEDULER_MEMORY_DNN_GRAPHS_H_
#define WEFT_SCHEDULER_MEMORY_DNN_GRAPHS_H_

#include <cstdint>

#include "scheduler/graph.h"

namespace weft::scheduler::memory {

Graph MobileNetLike(int nodes);
Graph NasLike(int nodes, uint32_t seed = 1);
Graph TransformerStack(int nodes);
Graph UNet(int nodes);
Graph RandomDag(int nodes, uint32_t seed = 1);

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_DNN_GRAPHS_H_
