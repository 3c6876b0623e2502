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
  const int n = c.num_nodes();
  // Every node needs a stream (read by NodeId; the first one without, in
  // issue order, is named).
  bool unassigned = false;
  for (NodeId v = 0; v < n; ++v) unassigned |= c.stream_of[v] < 0;
  if (unassigned) {
    for (NodeId v : c.dag.order) {
      if (c.stream_of[v] < 0) {
        return absl::InternalError(
            absl::StrCat("node '", c.graph.node(v).name, "' has no stream"));
      }
    }
  }
  // New ids in order of first use. The walk stops once every stream has
  // been seen; if they were first used in id order, nothing moves.
  const int num_streams = static_cast<int>(c.streams.size());
  std::vector<int32_t> dense(num_streams, -1);
  int32_t next = 0;
  bool identity = true;
  for (int32_t i = 0; i < n && next < num_streams; ++i) {
    const NodeId v = c.dag.order[i];
    for (const int32_t s : {c.stream_of[v], c.peer_of(v)}) {
      if (s < 0 || dense[s] >= 0) continue;
      identity = identity && s == next;
      dense[s] = next++;
    }
  }
  if (identity && next == num_streams) {
    for (LogicalStream& stream : c.streams) stream.alive = true;
    return absl::OkStatus();
  }
  std::vector<LogicalStream> streams(next);
  for (int s = 0; s < num_streams; ++s) {
    if (dense[s] < 0) continue;
    streams[dense[s]] = std::move(c.streams[s]);
    streams[dense[s]].alive = true;
  }
  for (NodeId v = 0; v < n; ++v) c.stream_of[v] = dense[c.stream_of[v]];
  if (!c.peer_stream.empty()) {
    for (NodeId v = 0; v < n; ++v) {
      if (c.peer_stream[v] >= 0) c.peer_stream[v] = dense[c.peer_stream[v]];
    }
  }
  c.streams = std::move(streams);
  return absl::OkStatus();
}

}  // namespace weft::scheduler
