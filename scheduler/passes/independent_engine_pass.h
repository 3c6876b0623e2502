// Independent engines: every unlabelled COLLECTIVE node of a device goes to
// that device's one collective stream, never shared with other engines.
// Collectives must be issued in the same order on every device they span,
// which one stream per device guarantees (GraphEngine gives its collective
// engine dedicated streams for the same reason). COPY and HOST nodes are
// kept off COMPUTE streams too, by the dependency pass, which only shares a
// stream within one engine.
#ifndef WEFT_SCHEDULER_PASSES_INDEPENDENT_ENGINE_PASS_H_
#define WEFT_SCHEDULER_PASSES_INDEPENDENT_ENGINE_PASS_H_

#include "scheduler/passes/stream_pass.h"

namespace weft::scheduler {

class IndependentEnginePass final : public StreamPass {
 public:
  absl::string_view name() const override { return "independent_engine"; }
  absl::Status Run(StreamContext& context) const override;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_INDEPENDENT_ENGINE_PASS_H_
