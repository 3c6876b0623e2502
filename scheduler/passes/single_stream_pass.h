// SINGLE mode's only assignment rule: one stream per device, whatever the
// engines, in order of first use. A stream label is INVALID_ARGUMENT
// naming graph.nodes[i].stream_label. A copy between devices holds the
// stream of its source device as its peer stream.
#ifndef WEFT_SCHEDULER_PASSES_SINGLE_STREAM_PASS_H_
#define WEFT_SCHEDULER_PASSES_SINGLE_STREAM_PASS_H_

#include "scheduler/passes/stream_pass.h"

namespace weft::scheduler {

class SingleStreamPass final : public StreamPass {
 public:
  absl::string_view name() const override { return "single_stream"; }
  absl::Status Run(StreamContext& context) const override;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_SINGLE_STREAM_PASS_H_
