#include "scheduler/passes/stream_context.h"

#include <algorithm>

#include "scheduler/huge_pages.h"

namespace weft::scheduler {

ClockArena::ClockArena(int num_streams)
    : dense_(num_streams <= kDenseStreams), num_streams_(num_streams) {
  if (dense_) {
    rows_.assign(num_streams_, 0);
  } else {
    offsets_ = {0, 0};
  }
}

int32_t ClockArena::Known(int32_t version, int32_t stream) const {
  if (dense_) return Row(version)[stream];
  return Known(Get(version), stream);
}

int32_t ClockArena::AddRow(const int32_t* row) {
  rows_.insert(rows_.end(), row, row + num_streams_);
  return num_versions_++;
}

int32_t ClockArena::Add(absl::Span<const Entry> clock) {
  entries_.insert(entries_.end(), clock.begin(), clock.end());
  offsets_.push_back(static_cast<int64_t>(entries_.size()));
  return num_versions_++;
}

int32_t ClockArena::Known(absl::Span<const Entry> clock, int32_t stream) {
  for (const Entry& e : clock) {
    if (e.first >= stream) return e.first == stream ? e.second : 0;
  }
  return 0;
}

void ClockArena::Reserve(int64_t versions) {
  if (dense_) {
    ReserveHuge(rows_, rows_.size() + versions * num_streams_);
  } else {
    offsets_.reserve(offsets_.size() + versions);
  }
}

StreamContext::StreamContext(const Graph& graph, const Dag& dag,
                             const CostLevels& levels, std::vector<int> device,
                             const StreamOptions& options)
    : graph(graph),
      dag(dag),
      levels(levels),
      device(std::move(device)),
      options(options),
      stream_of(graph.num_nodes(), -1),
      choice(graph.num_nodes()) {}

int StreamContext::NewStream(int device, Engine engine,
                             LogicalStream::Kind kind, std::string label) {
  LogicalStream s;
  s.device = device;
  s.engine = engine;
  s.kind = kind;
  s.label = std::move(label);
  streams.push_back(std::move(s));
  return static_cast<int>(streams.size()) - 1;
}

}  // namespace weft::scheduler
