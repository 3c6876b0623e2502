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
// (op_signatures.h), negative or non-finite costs, device pins outside
// [0, num_devices), and graphs over the configured limits. The graph's own
// name may be empty.
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
};

// Thread-safe (stateless).
absl::StatusOr<Graph> BuildGraph(const weft::v1::Graph& proto,
                                 const GraphLimits& limits);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_GRAPH_BUILDER_H_
