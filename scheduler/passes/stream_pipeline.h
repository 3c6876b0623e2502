// The ordered chains of stream passes.
//
//   MULTI:  assign_by_label -> independent_engine -> assign_by_dependency
//           -> merge_ineffective_streams -> stream_id_continuity
//           -> insert_events -> event_id_continuity -> split_streams
//   SINGLE: single_stream -> stream_id_continuity -> insert_events
//           -> event_id_continuity -> split_streams
//
// Logical allocation (streams by rule) comes first and ends with dense
// stream ids; events come next; physical splitting, which needs to count
// events, comes last.
#ifndef WEFT_SCHEDULER_PASSES_STREAM_PIPELINE_H_
#define WEFT_SCHEDULER_PASSES_STREAM_PIPELINE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/passes/stream_context.h"
#include "scheduler/passes/stream_pass.h"
#include "scheduler/planner_options.h"

namespace weft::scheduler {

// Runs the chain of context.options.mode (above) on `context`, stopping at
// the first error. If `seconds` is not null, appends each pass's name and
// the calling thread's CPU seconds it took.
absl::Status RunStreamPipeline(
    StreamContext& context,
    std::vector<std::pair<std::string, double>>* seconds = nullptr);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_PASSES_STREAM_PIPELINE_H_
