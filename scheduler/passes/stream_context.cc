#include "scheduler/passes/stream_context.h"

#include <algorithm>
#include <cstring>

#include "scheduler/huge_pages.h"

namespace weft::scheduler {

ClockArena::ClockArena(int num_streams)
    : dense_(num_streams <= kDenseStreams),
      num_streams_(num_streams),
      stride_((num_streams + kLanes - 1) / kLanes * kLanes) {
  if (dense_) {
    Grow(stride_);
    std::fill(rows_.get(), rows_.get() + stride_, 0);
  } else {
    offsets_ = {0, 0};
  }
}

int32_t ClockArena::Known(int32_t version, int32_t stream) const {
  if (dense_) return Row(version)[stream];
  return Known(Get(version), stream);
}

void ClockArena::Grow(size_t counters) {
  if (counters <= capacity_) return;
  std::unique_ptr<int32_t[]> rows(new int32_t[counters]);
  AdviseHugePages(rows.get(), counters * sizeof(int32_t));
  if (rows_ != nullptr) {
    std::copy(rows_.get(),
              rows_.get() + static_cast<size_t>(num_versions_) * stride_,
              rows.get());
  }
  rows_ = std::move(rows);
  capacity_ = counters;
}

int32_t ClockArena::AddRow(const int32_t* row) {
  int32_t* to = AppendRow();
  std::copy(row, row + num_streams_, to);
  std::fill(to + num_streams_, to + stride_, 0);  // padding
  return num_versions_ - 1;
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
    Grow(static_cast<size_t>(num_versions_ + versions) * stride_);
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
      choice(options.record_choices ? graph.num_nodes() : 0) {}

ReachabilityQuery& StreamContext::query() {
  if (shared_query == nullptr) {
    shared_query = std::make_unique<ReachabilityQuery>(dag.reach,
                                                       dag.preds);
  }
  return *shared_query;
}

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
