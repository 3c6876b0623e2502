// Where control nodes' bodies use the job's buffers.
//
// A control node's bodies (ControlSpec::bodies, planned apart as
// Plan::bodies) run over the enclosing job's buffers, as nested jobs or
// device graphs: a body node that uses device memory (every node but a
// HOST one; a nested control node uses its buffers on its device) makes
// each buffer it uses current on its own device; and where every node of
// a control node's bodies runs on one device, that device may decide the
// node, so every buffer the node uses (its condition or selector
// included) is made current there. Nested control nodes' bodies count at
// any depth. The memory plan's lifetimes (lifetimes.h) place these copies
// and BodyBytesBeyondPlan (memory_plan.h) counts those it did not place;
// both walk the bodies here.
//
// Thread-safe (stateless).
#ifndef WEFT_SCHEDULER_MEMORY_BODY_USES_H_
#define WEFT_SCHEDULER_MEMORY_BODY_USES_H_

#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"

namespace weft::scheduler::memory {

// Whether node `v` of `graph` uses device memory on its device: every node
// but a HOST one; a control node (HOST, as the graph has it) uses its
// buffers on its device, where its bodies run.
bool UsesDeviceMemory(const Graph& graph, NodeId v);

// Calls use(buffer, device) for every buffer the bodies of control node
// `v` of `graph` make current on a device (repeats possible, the control
// node's own device included), given its bodies' plans `bodies`
// (Plan::bodies[v]; null entries are skipped). No-op for a node that is
// not a control node.
void ForEachBodyUse(const Graph& graph, NodeId v,
                    const std::vector<std::shared_ptr<const Plan>>& bodies,
                    absl::FunctionRef<void(BufferId buffer, int device)> use);

}  // namespace weft::scheduler::memory

#endif  // WEFT_SCHEDULER_MEMORY_BODY_USES_H_
