// Stream-id continuity: drops streams no node uses (merged away, or never
// filled) and renumbers the rest densely from 0 in order of first use in
// issue order (a node's stream before its peer stream). Runs after every
// pass that may empty a stream. When every stream is used and first used in
// id order, nothing moves: the walk stops once each has been seen.
#ifndef WEFT_SCHEDULER_PASSES_STREAM_ID_CONTINUITY_PASS_H_
#define WEFT_SCHEDULER_PASSES_STREAM_ID_CONTINUITY_PASS_H_

#include "scheduler/passes/stream_pass.h"

namespace weft::scheduler {

class StreamIdContinuityPass final : public StreamPass {
 public:
  absl::string_view name() const override { return "stream_id_continuity"; }
  // REQUIRES: every node has a stream; events not planned yet. INTERNAL
  // otherwise.
  absl::Status Run(StreamContext& context) const override;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_STREAM_ID_CONTINUITY_PASS_H_
