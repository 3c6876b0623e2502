#include "scheduler/transitive_reducer.h"

#include <algorithm>

namespace weft::scheduler {

TransitiveReducer::TransitiveReducer(const ReachabilityIndex& reach,
                                     const Csr& raw, int num_nodes)
    : reach_(reach),
      query_(reach, raw),
      budget_(num_nodes / 4 + kSearchSlack) {}

std::optional<uint32_t> TransitiveReducer::Reduce(NodeId v,
                                                  absl::Span<const NodeId> row,
                                                  uint64_t inherited) {
  if (row.size() <= 1) return 0;
  if (row.size() > kFewPreds) return std::nullopt;
  constexpr int kWindow = ReachabilityIndex::kWindow;
  const int32_t pv = reach_.pos(v);
  uint32_t redundant = 0;
  bool any_far = false;
  for (size_t i = 0; i < row.size(); ++i) {
    const int32_t d = pv - reach_.pos(row[i]);
    if (d <= kWindow) {
      redundant |= static_cast<uint32_t>((inherited >> (d - 1)) & 1) << i;
    } else {
      any_far = true;
    }
  }
  if (!any_far) return redundant;
  if (query_.nodes_searched() >= budget_) return std::nullopt;
  // A far predecessor u is redundant if it reaches another predecessor w.
  for (size_t i = 0; i < row.size(); ++i) {
    const NodeId u = row[i];
    if (pv - reach_.pos(u) <= kWindow) continue;
    // Candidates within u's window are settled by one bit; only the
    // others need a search.
    candidates_.clear();
    bool hit = false;
    for (NodeId w : row) {
      if (w == u || !reach_.MayReach(u, w)) continue;
      if (reach_.InWindow(u, w)) {
        hit = reach_.WindowBit(u, w);
        if (hit) break;
      } else {
        candidates_.push_back(w);
      }
    }
    if (!hit && !candidates_.empty()) {
      const int64_t limit =
          std::min(kSearchLimit, budget_ - query_.nodes_searched());
      const std::optional<bool> reaches =
          query_.TryReachesAny(u, candidates_, limit);
      if (!reaches.has_value()) return std::nullopt;
      hit = *reaches;
    }
    if (hit) redundant |= uint32_t{1} << i;
  }
  return redundant;
}

void TransitiveReducer::ReduceExact(NodeId v, absl::Span<const NodeId> row,
                                    ReachabilityQuery& query,
                                    std::vector<uint8_t>& keep) {
  keep.assign(row.size(), 1);
  if (row.size() <= 1) return;
  const int32_t pv = reach_.pos(v);
  if (!ReduceInWindow(pv, row, keep)) return;
  const IntervalLabels& intervals = reach_.intervals();
  far_.clear();
  for (size_t i = 0; i < row.size(); ++i) {
    if (pv - reach_.pos(row[i]) > ReachabilityIndex::kWindow) {
      far_.push_back(i);
    }
  }
  if (row.size() <= kFewPreds) {
    for (size_t i : far_) {
      const NodeId u = row[i];
      candidates_.clear();
      for (NodeId w : row) {
        if (w != u && reach_.MayReach(u, w)) candidates_.push_back(w);
      }
      if (!candidates_.empty() && query.ReachesAny(u, candidates_)) {
        keep[i] = 0;
      }
    }
    return;
  }
  // Many predecessors: such a w has post(w) in [low(u), post(u)), a
  // range of the predecessors sorted by that label. The query applies
  // the other cuts per candidate and searches only what they leave.
  by_post_.clear();
  for (NodeId p : row) by_post_.emplace_back(intervals.post(p), p);
  std::sort(by_post_.begin(), by_post_.end());
  for (size_t i : far_) {
    const NodeId u = row[i];
    candidates_.clear();
    auto it = std::lower_bound(by_post_.begin(), by_post_.end(),
                               std::make_pair(intervals.low(u), NodeId{-1}));
    for (; it != by_post_.end() && it->first < intervals.post(u); ++it) {
      if (reach_.MayReach(u, it->second)) candidates_.push_back(it->second);
    }
    if (!candidates_.empty() && query.ReachesAny(u, candidates_)) {
      keep[i] = 0;
    }
  }
}

bool TransitiveReducer::ReduceInWindow(int32_t pv, absl::Span<const NodeId> row,
                                       std::vector<uint8_t>& keep) const {
  constexpr int kWindow = ReachabilityIndex::kWindow;
  // Ancestors of v's predecessors within the window, in v's frame: bit
  // d - 1 stands for the node at position pv - d.
  uint64_t ancestors_of_preds = 0;
  bool any_far = false;
  for (NodeId p : row) {
    const int32_t d = pv - reach_.pos(p);
    if (d < kWindow) ancestors_of_preds |= reach_.window(p) << d;
    any_far |= d > kWindow;
  }
  for (size_t i = 0; i < row.size(); ++i) {
    const int32_t d = pv - reach_.pos(row[i]);
    if (d <= kWindow) keep[i] = !((ancestors_of_preds >> (d - 1)) & 1);
  }
  return any_far;
}

}  // namespace weft::scheduler
