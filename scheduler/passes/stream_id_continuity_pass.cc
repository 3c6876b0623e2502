#include "scheduler/passes/stream_id_continuity_pass.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::scheduler {

absl::Status StreamIdContinuityPass::Run(StreamContext& c) const {
  if (c.events_planned) {
    return absl::InternalError(
        "stream ids must be made dense before events are planned");
  }
  std::vector<int32_t> dense(c.streams.size(), -1);
  std::vector<LogicalStream> streams;
  for (NodeId v : c.dag.order) {
    if (c.stream_of[v] < 0) {
      return absl::InternalError(absl::StrCat(
          "node '", c.graph.node(v).name, "' has no stream"));
    }
    for (int32_t* stream : {&c.stream_of[v], c.peer_of(v) >= 0
                                                  ? &c.peer_stream[v]
                                                  : nullptr}) {
      if (stream == nullptr) continue;
      const int32_t s = *stream;
      if (dense[s] < 0) {
        dense[s] = static_cast<int32_t>(streams.size());
        streams.push_back(std::move(c.streams[s]));
        streams.back().alive = true;
      }
      *stream = dense[s];
    }
  }
  c.streams = std::move(streams);
  return absl::OkStatus();
}

}  // namespace weft::scheduler
