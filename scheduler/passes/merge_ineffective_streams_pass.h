// Ineffective multi-stream removal: merges two streams that can never run
// at the same time anyway.
//
// Two dependency streams (LogicalStream::Kind::kShared) of one device and
// engine cannot overlap when every node of one is ordered with every node
// of the other: listing their nodes together in issue order, each node
// where the listing switches streams is reachable in the DAG from the node
// before it. Then merging them adds no ordering and saves the stream and
// the events between them. Streams are considered in id order; each is
// merged into the first earlier stream it fits with, which keeps the lower
// id. Labelled, independent-engine and SINGLE streams are left alone. A
// stream's nodes include those holding it as their peer stream (a copy
// between devices), which follow it when it is merged.
//
// Cost: for each pair of streams of one device and engine, a walk over
// their nodes that stops at the first switch the DAG does not order, with
// one reachability query per switch; at most max_streams_per_device^2 walks
// per device and engine. Each stream's nodes are listed lazily, in issue
// order, only as far as these walks read: when nothing merges, usually a
// small prefix of the graph.
#ifndef WEFT_SCHEDULER_PASSES_MERGE_INEFFECTIVE_STREAMS_PASS_H_
#define WEFT_SCHEDULER_PASSES_MERGE_INEFFECTIVE_STREAMS_PASS_H_

#include "scheduler/passes/stream_pass.h"

namespace weft::scheduler {

class MergeIneffectiveStreamsPass final : public StreamPass {
 public:
  absl::string_view name() const override {
    return "merge_ineffective_streams";
  }
  // REQUIRES: every node has a stream.
  absl::Status Run(StreamContext& context) const override;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_MERGE_INEFFECTIVE_STREAMS_PASS_H_
