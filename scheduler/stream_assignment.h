// Stream assignment and event planning.
//
// Given the dependency DAG and each node's device, puts every node on a
// logical stream and plans the events that order work across streams.
// Stream rules, strongest first:
//
//   1. SINGLE mode: one stream per device, whatever the engines, nothing
//      else (a stream label is INVALID_ARGUMENT naming
//      graph.nodes[i].stream_label).
//   2. Stream labels: nodes with the same label, device and engine share one
//      stream, used by nothing else.
//   3. Engines stay apart: COPY, COLLECTIVE and HOST nodes never share a
//      stream with COMPUTE nodes (nor with each other).
//   4. Dependencies (NNC's static schedule, with a real rank): walk the
//      nodes in issue order; an unassigned node takes a recyclable stream of
//      its device and engine (one whose last node is its ancestor, so the
//      reuse adds no ordering; a stream that already ran the node's op is
//      preferred, then the lowest id), else a new stream while the device
//      has fewer than max_streams_per_device of them, else (soft cap) the
//      stream whose node just before it in issue order is expected to
//      finish first (the sharing adds ordering). The stream then follows
//      the node's highest-ranked unassigned successor on the same device and
//      engine, and so on down the chain. Rank: the longest cost-weighted
//      path to a sink, then the longest path in edges; ties prefer an op the
//      stream already ran, then the lower node id.
//
// A stream runs its nodes in issue order, a topological order, and events
// only point from earlier to later nodes, so no assignment can deadlock. Stream
// ids are dense from 0, in order of first use in issue order.
//
// Events: a dependency p -> v between different streams needs v's stream to
// wait for p unless that stream already knows p is done. Each stream keeps
// a vector clock (for every other stream, the last node known finished);
// a wait adopts the waited node's clock. Per node, candidate waits are
// considered latest-issued first and dropped when an earlier-chosen wait
// already covers them, so no wait is implied by the stream's history or by
// the node's other waits. Each waited-on node signals one event, shared by
// all its waiters; event ids are dense from 0 in issue order of the
// signalling nodes.
//
// Cost: O(V + E) for the walk plus one reachability query per stream of the
// device for each chain start (reachability.h), and O(W * S) for W waits
// over S streams for the clocks.
#ifndef WEFT_SCHEDULER_STREAM_ASSIGNMENT_H_
#define WEFT_SCHEDULER_STREAM_ASSIGNMENT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/cost_model.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/plan.h"
#include "scheduler/planner_options.h"

namespace weft::scheduler {

struct StreamOptions {
  StreamMode mode = StreamMode::kMulti;
  int max_streams_per_device = 8;  // soft cap, per device and engine
};

// Why a node went to its stream.
struct StreamChoice {
  enum class Why : uint8_t {
    kSingle,    // SINGLE mode
    kLabel,     // its stream label
    kChain,     // the highest-ranked successor of `related`
    kRecycled,  // the stream's last node `related` is an ancestor
    kNew,       // no recyclable stream, below the cap
    kSoftCap,   // at the cap: after `related` (-1: an idle stream), the
                // stream expected to free up first
  };
  Why why = Why::kNew;
  NodeId related = -1;
};

// REQUIRES: plan->nodes lists dag.order (nodes[i].node == dag.order[i]) with
// devices set. Fills each node's stream, wait_events and signal_event, and
// plan->streams and plan->num_events. Returns the choices by NodeId.
// Thread-safe (stateless).
absl::StatusOr<std::vector<StreamChoice>> AssignStreams(
    const Graph& graph, const Dag& dag, const CostLevels& levels,
    const StreamOptions& options, Plan* plan);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_STREAM_ASSIGNMENT_H_
