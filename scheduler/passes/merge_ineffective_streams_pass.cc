#include "scheduler/passes/merge_ineffective_streams_pass.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace weft::scheduler {
namespace {

// True if the issue positions `a` and `b` (each sorted) interleave into a
// sequence the DAG totally orders.
bool CannotOverlap(const StreamContext& c, const std::vector<int32_t>& a,
                   const std::vector<int32_t>& b, ReachabilityQuery& query) {
  size_t i = 0, j = 0;
  int32_t prev = -1;
  int prev_side = -1;
  while (i < a.size() || j < b.size()) {
    const bool take_a = j == b.size() || (i < a.size() && a[i] < b[j]);
    const int32_t pos = take_a ? a[i++] : b[j++];
    const int side = take_a ? 0 : 1;
    if (prev >= 0 && side != prev_side &&
        !query.Reaches(c.dag.order[prev], c.dag.order[pos])) {
      return false;
    }
    prev = pos;
    prev_side = side;
  }
  return true;
}

}  // namespace

absl::Status MergeIneffectiveStreamsPass::Run(StreamContext& c) const {
  const int num_streams = static_cast<int>(c.streams.size());
  // Issue positions of each mergeable stream's nodes.
  std::vector<std::vector<int32_t>> nodes(num_streams);
  for (int32_t i = 0; i < c.num_nodes(); ++i) {
    const NodeId v = c.dag.order[i];
    for (const int s : {c.stream_of[v], c.peer_of(v)}) {
      if (s >= 0 && c.streams[s].kind == LogicalStream::Kind::kShared) {
        nodes[s].push_back(i);
      }
    }
  }
  // (device, engine) -> its mergeable streams, by id.
  std::map<std::pair<int, int>, std::vector<int>> classes;
  for (int s = 0; s < num_streams; ++s) {
    const LogicalStream& stream = c.streams[s];
    if (stream.kind == LogicalStream::Kind::kShared && stream.alive &&
        !nodes[s].empty()) {
      classes[{stream.device, static_cast<int>(stream.engine)}].push_back(s);
    }
  }
  ReachabilityQuery query(c.dag.reach, c.dag.raw_preds);
  std::vector<int32_t> merged;
  for (auto& [key, members] : classes) {
    std::vector<int> kept;
    for (int s : members) {
      int into = -1;
      for (int k : kept) {
        if (CannotOverlap(c, nodes[k], nodes[s], query)) {
          into = k;
          break;
        }
      }
      if (into < 0) {
        kept.push_back(s);
        continue;
      }
      const NodeId first = c.dag.order[std::min(nodes[into].front(),
                                                nodes[s].front())];
      for (int32_t pos : nodes[s]) {
        const NodeId v = c.dag.order[pos];
        if (c.stream_of[v] == s) {
          c.stream_of[v] = into;
          c.choice[v] = {StreamChoice::Why::kMerged, first};
        } else {
          c.peer_stream[v] = into;  // streams of one device: never `into`
        }
      }
      merged.clear();
      std::merge(nodes[into].begin(), nodes[into].end(), nodes[s].begin(),
                 nodes[s].end(), std::back_inserter(merged));
      nodes[into].swap(merged);
      nodes[s].clear();
      c.streams[s].alive = false;
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
