// Stream labels, the strongest rule: nodes with the same label, device and
// engine share one stream, and no other node ever joins it. Labels get
// their streams in order of first use.
#ifndef WEFT_SCHEDULER_PASSES_ASSIGN_BY_LABEL_PASS_H_
#define WEFT_SCHEDULER_PASSES_ASSIGN_BY_LABEL_PASS_H_

#include "scheduler/passes/stream_pass.h"

namespace weft::scheduler {

class AssignByLabelPass final : public StreamPass {
 public:
  absl::string_view name() const override { return "assign_by_label"; }
  absl::Status Run(StreamContext& context) const override;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_ASSIGN_BY_LABEL_PASS_H_
