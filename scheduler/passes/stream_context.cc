#include "scheduler/passes/stream_context.h"

#include <algorithm>
#include <cstring>

#include "scheduler/huge_pages.h"

namespace weft::scheduler {

ClockArena::ClockArena(int num_streams, int32_t max_seq)
    : dense_(num_streams <= kDenseStreams),
      narrow_(dense_ && max_seq <= kNarrowMax),
      num_streams_(num_streams) {
  const int lanes = kVector / (narrow_ ? sizeof(uint16_t) : sizeof(int32_t));
  stride_ = (num_streams + lanes - 1) / lanes * lanes;
  if (dense_) {
    Grow(stride_);
    if (narrow_) {
      std::fill(narrow_rows_.get(), narrow_rows_.get() + stride_, 0);
    } else {
      std::fill(wide_rows_.get(), wide_rows_.get() + stride_, 0);
    }
  } else {
    offsets_ = {0, 0};
  }
}

int32_t ClockArena::Known(int32_t version, int32_t stream) const {
  if (!dense_) return Known(Get(version), stream);
  if (narrow_) return RowAs<uint16_t>(version)[stream];
  return Row(version)[stream];
}

namespace {

// Room for `counters` counters in `rows`, keeping the first `keep`.
template <typename T>
void GrowRows(std::unique_ptr<T[]>& rows, size_t keep, size_t counters) {
  std::unique_ptr<T[]> grown(new T[counters]);
  AdviseHugePages(grown.get(), counters * sizeof(T));
  if (rows != nullptr) std::copy(rows.get(), rows.get() + keep, grown.get());
  rows = std::move(grown);
}

}  // namespace

void ClockArena::Grow(size_t counters) {
  if (counters <= capacity_) return;
  const size_t keep = static_cast<size_t>(num_versions_) * stride_;
  if (narrow_) {
    GrowRows(narrow_rows_, keep, counters);
  } else {
    GrowRows(wide_rows_, keep, counters);
  }
  capacity_ = counters;
}

int32_t ClockArena::AddRow(const int32_t* row) {
  int32_t* to = AppendRow<int32_t>();
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

void ClockArena::Reserve(int64_t versions, size_t max_bytes) {
  if (!dense_) {
    offsets_.reserve(offsets_.size() + versions);
    return;
  }
  const size_t row_bytes =
      static_cast<size_t>(stride_) * (narrow_ ? sizeof(uint16_t) : 4);
  const int64_t rows = num_versions_ + versions;
  if (num_versions_ != 1 || window_ != 0 ||
      static_cast<double>(rows) * row_bytes <= max_bytes) {
    if (window_ == 0) Grow(static_cast<size_t>(rows) * stride_);
    return;
  }
  int32_t window = kMinWindow;
  while (static_cast<size_t>(window) * 2 * row_bytes <= max_bytes &&
         window < (int32_t{1} << 29)) {
    window *= 2;
  }
  // The empty clock stays in slot 0; the zero row follows the ring.
  window_ = 0;
  Grow(static_cast<size_t>(window + 1) * stride_);
  if (narrow_) {
    std::fill(narrow_rows_.get() + static_cast<size_t>(window) * stride_,
              narrow_rows_.get() + static_cast<size_t>(window + 1) * stride_,
              0);
  } else {
    std::fill(wide_rows_.get() + static_cast<size_t>(window) * stride_,
              wide_rows_.get() + static_cast<size_t>(window + 1) * stride_, 0);
  }
  held_.assign(window, -1);
  held_[0] = 0;
  window_ = window;
}

StreamContext::StreamContext(const Graph& graph, const Dag& dag,
                             const CostLevels& levels, std::vector<int> device,
                             const StreamOptions& options)
    : graph(graph),
      dag(dag),
      levels(levels),
      device(std::move(device)),
      options(options),
      choice(options.record_choices ? graph.num_nodes() : 0) {
  AssignHuge(stream_of, graph.num_nodes(), -1);
}

ReachabilityQuery& StreamContext::query() {
  if (shared_query == nullptr) {
    shared_query = std::make_unique<ReachabilityQuery>(dag.reach, dag.preds);
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
