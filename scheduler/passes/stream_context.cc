#include "scheduler/passes/stream_context.h"

#include <algorithm>

namespace weft::scheduler {

int32_t ClockArena::Add(absl::Span<const Entry> clock) {
  entries_.insert(entries_.end(), clock.begin(), clock.end());
  offsets_.push_back(static_cast<int64_t>(entries_.size()));
  return num_versions() - 1;
}

int32_t ClockArena::Known(absl::Span<const Entry> clock, int32_t stream) {
  auto it = std::lower_bound(clock.begin(), clock.end(),
                             Entry(stream, int32_t{0}));
  return it != clock.end() && it->first == stream ? it->second : 0;
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
