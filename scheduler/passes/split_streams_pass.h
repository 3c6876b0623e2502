// Physical stream splitting: no stream holds more than
// options.max_nodes_per_stream tasks, where a node counts one task plus one
// per event it records or waits on (events are tasks too).
//
// Each stream's nodes are taken in issue order; when the next node would
// overflow the stream, it and the rest move to a new stream (appended, so
// ids stay dense) on the same device, engine and label, which continues the
// old one: its first node waits on an event recorded after the last node of
// the old part, unless that node's other waits already imply the order
// (the clocks of insert_events_pass.h tell). One task of room is kept for
// that record. A single node with more tasks than the limit gets a stream
// of its own, over the limit. New events get the next ids, so event ids
// stay dense. 0 disables splitting.
//
// A node with a peer stream (a copy between devices) is a member of both
// of its streams: three tasks on its peer stream (itself and the join's
// record and wait) and on its own stream, besides itself and its waits,
// the join's two, and room for a record and for a continuing wait per
// stream (splitting either stream may put them there). When a split
// starts a new part at it, the
// continuing wait goes on its own stream, before the join, unless its
// waits or the history of its other stream already imply the order.
//
// Cost: without peer streams, one walk in issue order decides every split
// (a counter per stream), and only if something splits, a second walk from
// the first split moves nodes to their parts; links are added to the waits
// in place, moving only the rows after the first link. With peer streams,
// each stream's members are listed and walked in turn.
#ifndef WEFT_SCHEDULER_PASSES_SPLIT_STREAMS_PASS_H_
#define WEFT_SCHEDULER_PASSES_SPLIT_STREAMS_PASS_H_

#include "scheduler/passes/stream_pass.h"

namespace weft::scheduler {

class SplitStreamsPass final : public StreamPass {
 public:
  // The smallest limit that lets a chain continue across a split: a node,
  // the wait that continues its stream and the record for the next part.
  static constexpr int kMinTasksPerStream = 3;

  absl::string_view name() const override { return "split_streams"; }
  // REQUIRES: events planned and ids dense. INVALID_ARGUMENT naming
  // options.max_nodes_per_stream if it is below kMinTasksPerStream (and not
  // 0).
  absl::Status Run(StreamContext& context) const override;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_SPLIT_STREAMS_PASS_H_
