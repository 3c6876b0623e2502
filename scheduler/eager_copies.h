// Eager copies between devices: data crosses as soon as it is written.
//
// Without them, a node that reads a buffer last written on another device
// copies it on its own stream when it is issued to run: after its stream's
// earlier work and after every event it waits on, so the bytes cross only
// once all its inputs are ready, and the copy sits on the critical path.
// An eager copy starts instead when the buffer's writer ends, on a COPY
// stream of the reader's device that waits for the writer's event alone,
// and the reader waits for that copy (PlannedCopy, plan.h). It is issued
// just before its reader, so copies into a device take its copy engine in
// the order their readers are issued, the order in which device policies
// book them.
//
// PlanEagerCopies replays the issue order as the executor moves data
// (cost_model.h: where each buffer's latest version lives, which memories
// hold it up to date, whether any node wrote it) and gives every copy of a
// written version from one device to another, for a reader that runs on a
// device (a COMPUTE or COLLECTIVE node, or a control node whose bodies run
// on its device, BodiesRunOnItsDevice; COPY nodes move their input
// themselves) and whose writer is a device node (such control nodes
// included), to an eager copy from that writer to that reader. Other
// control nodes count as host nodes. A destination device gets a COPY
// stream (appended to the streams, label "eager copies") per stream its
// copies' writers run on, up to 32, then reuses the one whose last copy is
// oldest: copies of one writer stream start in the order their writers
// end. A writer without a signal event gets a new one. Streams stay within
// StreamOptions::max_nodes_per_stream tasks (split_streams_pass.h): a
// writer whose stream is full keeps its copies on their readers' streams,
// and a copy stream that is full gives way to a new one.
//
// Safety: the writer ends before the copy reads the source; the readers
// of the buffer's previous version ended before the writer started (the
// plan orders every write after earlier reads), so the destination is
// free; and the next writer of the source waits for the reader, which
// waits for the copy. Memory plans count the destination as used from the
// writer on and the source up to the reader (memory/lifetimes.h). An executor
// that skips eager copies still runs the plan correctly: its readers then copy
// the data themselves.
//
// O(V + A) for A buffer arguments. Not thread-safe (edits `streams`).
#ifndef WEFT_SCHEDULER_EAGER_COPIES_H_
#define WEFT_SCHEDULER_EAGER_COPIES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/passes/stream_context.h"
#include "scheduler/plan.h"

namespace weft::scheduler {

// The eager copies of `streams`' plan in issue order (dag.order), sorted
// by `before`; adds their streams and events to `streams`.
// `bodies_on_one_device`: PlannerOptions::bodies_on_one_device. REQUIRES:
// the stream pipeline has run (streams and events are planned).
absl::StatusOr<std::vector<PlannedCopy>> PlanEagerCopies(
    const Graph& graph, const Dag& dag, StreamContext& streams,
    bool bodies_on_one_device = true);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_EAGER_COPIES_H_
