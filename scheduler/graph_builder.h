// Builds a validated Graph from its wire form (weft.v1.Graph).
//
// Every rejection is INVALID_ARGUMENT with a message that names the field by
// its path in the request (for example `graph.nodes[3].args[1].buffer.name`)
// and says why. Checks: empty or duplicate buffer and node names, unknown
// buffer and node references, missing access modes, unknown enum values,
// cycles (an `after` edge to a later node may close one together with the
// edges inferred from buffer access; dependency_inference.h), zero or
// absurd sizes and sizes that are not a whole number of elements, initial
// data longer than the buffer, non-finite fills of integer buffers, unknown
// ops, argument lists that do not match a built-in op's signature
// (op_signatures.h), negative, non-finite or over-limit costs, device pins
// outside [0, num_devices), graphs without nodes, and graphs, names and
// lists over the configured limits (GraphLimits). The graph's own name may
// be empty. Messages quote client input only up to a bounded length
// (common/quote.h).
//
// User kernels (weft.v1.Module, weft.v1.KernelLaunch): module names must be
// non-empty and unique; a module has CUDA source or PTX (not empty, not a
// file path left for the client to inline) and NVRTC options only with CUDA
// source; a node sets either `op` or `kernel`, names a known module and a
// non-empty kernel, has grid and block extents within CUDA's limits (grid
// x in [1, 2^31 - 1], y and z in [1, 65535]; block x and y in [1, 1024], z
// in [1, 64], at most 1024 threads), dynamic shared memory within
// max_shared_memory_bytes, and does not run on the HOST engine. Its buffer
// arguments create dependencies exactly as a built-in op's do.
//
// Control nodes (weft.v1.WhileLoop, weft.v1.CaseOf; ControlSpec in graph.h)
// set neither op, kernel, args, engine, cost nor device; name a known
// condition (any dtype) or selector (INT32 or INT64) buffer; a loop has
// max_iterations > 0 and a body of at least one node, a case..of at least
// one branch, each of at least one node. Bodies are validated as graphs of
// their own (their `after` edges name nodes of the same body), node names
// are unique across the whole graph, all nodes together count against
// max_nodes, and control nodes nest at most max_control_depth deep. Fields
// in bodies are named by their full path, e.g.
// `graph.nodes[3].while_loop.body[2].args[0]`.
#ifndef WEFT_SCHEDULER_GRAPH_BUILDER_H_
#define WEFT_SCHEDULER_GRAPH_BUILDER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/graph.h"
#include "weft/v1/weft.pb.h"

namespace weft::scheduler {

struct GraphLimits {
  int num_devices = 1;  // device pins must be below this
  int64_t max_nodes = 2'000'000;
  int64_t max_buffers = 1'000'000;
  uint64_t max_buffer_bytes = uint64_t{16} << 30;  // one buffer
  uint64_t max_total_bytes = uint64_t{64} << 30;   // all buffers
  int64_t max_args_per_node = 1024;
  int64_t max_after_per_node = 4096;
  // Graph, buffer, node, module and kernel names and stream labels.
  int64_t max_name_bytes = 256;
  // One node's cost.estimated_us: what a simulated device runs for it.
  double max_node_cost_us = 600e6;  // ten minutes
  int64_t max_modules = 1024;
  uint64_t max_module_bytes = uint64_t{16} << 20;  // one module's code
  // Dynamic shared memory of one user kernel launch (H100's opt-in limit).
  uint32_t max_shared_memory_bytes = 227 * 1024;
  // Control nodes inside control nodes: a graph's own list is depth 1.
  int max_control_depth = 8;
};

// Thread-safe (stateless).
absl::StatusOr<Graph> BuildGraph(const weft::v1::Graph& proto,
                                 const GraphLimits& limits);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_GRAPH_BUILDER_H_
