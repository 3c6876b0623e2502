#include "scheduler/passes/stream_pipeline.h"

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

std::vector<std::unique_ptr<StreamPass>> StreamPipeline(StreamMode mode) {
  std::vector<std::unique_ptr<StreamPass>> passes;
  if (mode == StreamMode::kSingle) {
    passes.push_back(std::make_unique<SingleStreamPass>());
  } else {
    passes.push_back(std::make_unique<AssignByLabelPass>());
    passes.push_back(std::make_unique<IndependentEnginePass>());
    passes.push_back(std::make_unique<AssignByDependencyPass>());
    passes.push_back(std::make_unique<MergeIneffectiveStreamsPass>());
  }
  passes.push_back(std::make_unique<StreamIdContinuityPass>());
  passes.push_back(std::make_unique<InsertEventsPass>());
  passes.push_back(std::make_unique<EventIdContinuityPass>());
  passes.push_back(std::make_unique<SplitStreamsPass>());
  return passes;
}

absl::Status RunStreamPipeline(
    StreamContext& context,
    std::vector<std::pair<std::string, double>>* seconds) {
  for (const std::unique_ptr<StreamPass>& pass :
       StreamPipeline(context.options.mode)) {
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
