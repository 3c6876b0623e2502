// One rule of stream allocation, applied to a StreamContext.
//
// Passes run in a fixed order (stream_pipeline.h); each one states what it
// REQUIRES of the passes before it. A pass either refines the context and
// returns OK or returns an error and leaves the plan undefined.
#ifndef WEFT_SCHEDULER_PASSES_STREAM_PASS_H_
#define WEFT_SCHEDULER_PASSES_STREAM_PASS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "scheduler/passes/stream_context.h"

namespace weft::scheduler {

// Implementations are stateless and thread-safe.
class StreamPass {
 public:
  virtual ~StreamPass() = default;
  virtual absl::string_view name() const = 0;
  virtual absl::Status Run(StreamContext& context) const = 0;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_STREAM_PASS_H_
