#include "scheduler/passes/stream_pipeline.h"

#include "absl/types/span.h"
#include "common/thread_time.h"
#include "scheduler/passes/assign_by_dependency_pass.h"
#include "scheduler/passes/assign_by_label_pass.h"
#include "scheduler/passes/event_id_continuity_pass.h"
#include "scheduler/passes/independent_engine_pass.h"
#include "scheduler/passes/insert_events_pass.h"
#include "scheduler/passes/merge_ineffective_streams_pass.h"
#include "scheduler/passes/single_stream_pass.h"
#include "scheduler/passes/split_streams_pass.h"
#include "scheduler/passes/stream_id_continuity_pass.h"

namespace weft::scheduler {

absl::Status RunStreamPipeline(
    StreamContext& context,
    std::vector<std::pair<std::string, double>>* seconds) {
  // The passes hold no state: a plan runs them from here, with nothing
  // allocated (small jobs are planned on every submission).
  const AssignByLabelPass assign_by_label;
  const IndependentEnginePass independent_engine;
  const AssignByDependencyPass assign_by_dependency;
  const MergeIneffectiveStreamsPass merge_ineffective_streams;
  const SingleStreamPass single_stream;
  const StreamIdContinuityPass stream_id_continuity;
  const InsertEventsPass insert_events;
  const EventIdContinuityPass event_id_continuity;
  const SplitStreamsPass split_streams;
  const StreamPass* const multi[] = {
      &assign_by_label,           &independent_engine,   &assign_by_dependency,
      &merge_ineffective_streams, &stream_id_continuity, &insert_events,
      &event_id_continuity,       &split_streams};
  const StreamPass* const single[] = {&single_stream, &stream_id_continuity,
                                      &insert_events, &event_id_continuity,
                                      &split_streams};
  const absl::Span<const StreamPass* const> passes =
      context.options.mode == StreamMode::kSingle
          ? absl::Span<const StreamPass* const>(single)
          : absl::Span<const StreamPass* const>(multi);
  for (const StreamPass* pass : passes) {
    const double start = seconds != nullptr ? ThreadSeconds() : 0;
    absl::Status status = pass->Run(context);
    if (!status.ok()) return status;
    if (seconds != nullptr) {
      seconds->emplace_back(std::string(pass->name()), ThreadSeconds() - start);
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
