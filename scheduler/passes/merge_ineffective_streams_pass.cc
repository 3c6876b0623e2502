#include "scheduler/passes/merge_ineffective_streams_pass.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace weft::scheduler {
namespace {

// The issue positions of each mergeable stream's nodes, listed lazily:
// positions are distributed in issue order only as far as a question needs
// them. Streams that overlap are told apart at their first few nodes, so
// when nothing merges, little of the graph is read. Not thread-safe.
class Members {
 public:
  explicit Members(const StreamContext& c) : c_(c), lists_(c.streams.size()) {}

  std::vector<int32_t>& list(int s) { return lists_[s]; }

  // True if stream s has a node at index k of its list, reading further
  // into the issue order if needed.
  bool Has(int s, size_t k) {
    while (k >= lists_[s].size() && scanned_ < c_.num_nodes()) Scan();
    return k < lists_[s].size();
  }

 private:
  void Scan() {
    const int32_t i = scanned_++;
    const NodeId v = c_.dag.order[i];
    for (const int32_t s : {c_.stream_of[v], c_.peer_of(v)}) {
      if (s >= 0 && c_.streams[s].kind == LogicalStream::Kind::kShared) {
        lists_[s].push_back(i);
      }
    }
  }

  const StreamContext& c_;
  std::vector<std::vector<int32_t>> lists_;
  int32_t scanned_ = 0;
};

// True if the nodes of streams a and b interleave, in issue order, into a
// sequence the DAG totally orders. Only returns true once it has read
// both streams to their ends.
bool CannotOverlap(const StreamContext& c, Members& members, int a, int b,
                   ReachabilityQuery& query) {
  size_t i = 0, j = 0;
  int32_t prev = -1;
  int prev_side = -1;
  while (true) {
    const bool has_a = members.Has(a, i);
    const bool has_b = members.Has(b, j);
    if (!has_a && !has_b) return true;
    const std::vector<int32_t>& la = members.list(a);
    const std::vector<int32_t>& lb = members.list(b);
    const bool take_a = !has_b || (has_a && la[i] < lb[j]);
    const int32_t pos = take_a ? la[i++] : lb[j++];
    const int side = take_a ? 0 : 1;
    if (prev >= 0 && side != prev_side &&
        !query.Reaches(c.dag.order[prev], c.dag.order[pos])) {
      return false;
    }
    prev = pos;
    prev_side = side;
  }
}

}  // namespace

absl::Status MergeIneffectiveStreamsPass::Run(StreamContext& c) const {
  const int num_streams = static_cast<int>(c.streams.size());
  // (device, engine) -> its mergeable streams, by id.
  std::map<std::pair<int, int>, std::vector<int>> classes;
  for (int s = 0; s < num_streams; ++s) {
    const LogicalStream& stream = c.streams[s];
    if (stream.kind == LogicalStream::Kind::kShared && stream.alive) {
      classes[{stream.device, static_cast<int>(stream.engine)}].push_back(s);
    }
  }
  Members members(c);
  std::vector<int32_t> merged;
  for (auto& [key, streams] : classes) {
    if (streams.size() < 2) continue;
    std::vector<int> kept;
    for (int s : streams) {
      if (!members.Has(s, 0)) continue;  // no nodes
      int into = -1;
      for (int k : kept) {
        if (CannotOverlap(c, members, k, s, c.query())) {
          into = k;
          break;
        }
      }
      if (into < 0) {
        kept.push_back(s);
        continue;
      }
      // Both streams were read to their ends: their lists are whole.
      std::vector<int32_t>& nodes_into = members.list(into);
      std::vector<int32_t>& nodes_s = members.list(s);
      const NodeId first =
          c.dag.order[std::min(nodes_into.front(), nodes_s.front())];
      for (int32_t pos : nodes_s) {
        const NodeId v = c.dag.order[pos];
        if (c.stream_of[v] == s) {
          c.stream_of[v] = into;
          c.SetChoice(v, {StreamChoice::Why::kMerged, first});
        } else {
          c.peer_stream[v] = into;  // streams of one device: never `into`
        }
      }
      merged.clear();
      std::merge(nodes_into.begin(), nodes_into.end(), nodes_s.begin(),
                 nodes_s.end(), std::back_inserter(merged));
      nodes_into.swap(merged);
      nodes_s.clear();
      c.streams[s].alive = false;
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
