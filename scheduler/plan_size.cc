#include "scheduler/plan_size.h"

namespace weft::scheduler {
namespace {

// Bytes of a varint holding `v` (v >= 0).
int64_t VarintBytes(uint64_t v) {
  int64_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// A length-delimited field of `len` bytes with a one-byte tag.
int64_t FieldBytes(int64_t len) {
  return 1 + VarintBytes(static_cast<uint64_t>(len)) + len;
}

// One PlannedNode with its Plan.nodes framing.
int64_t NodeBytes(size_t name_bytes, double cost_us,
                  const PlannerOptions& options) {
  int64_t node = FieldBytes(static_cast<int64_t>(name_bytes));
  node += 2;  // signal_event: tag and at least one byte
  if (options.explain) node += FieldBytes(kMinReasonBytes);
  if (options.simulate && cost_us > 0) node += 9;  // end time
  return FieldBytes(node);
}

}  // namespace

int64_t PlanProtoBytesAtLeast(const Graph& graph,
                              const PlannerOptions& options) {
  int64_t total = 0;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    total += NodeBytes(graph.node(v).name.size(), graph.cost_us(v), options);
  }
  // The one node whose signal_event may be 0 and thus not encoded.
  if (graph.num_nodes() > 0) total -= 2;
  return total;
}

int64_t PlanProtoBytesAtLeast(const weft::v1::Graph& graph,
                              const PlannerOptions& options) {
  int64_t total = 0;
  for (const weft::v1::Node& node : graph.nodes()) {
    total += NodeBytes(node.name().size(), node.cost().estimated_us(), options);
  }
  if (graph.nodes_size() > 0) total -= 2;
  return total;
}

}  // namespace weft::scheduler
