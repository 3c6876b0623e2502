#include "scheduler/reachability.h"

#include <algorithm>
#include <utility>

#include "scheduler/huge_pages.h"

namespace weft::scheduler {

Csr Csr::Transpose(int num_cols) const {
  Csr t;
  t.offsets.assign(num_cols + 1, 0);
  for (int32_t item : items) ++t.offsets[item + 1];
  for (int i = 0; i < num_cols; ++i) t.offsets[i + 1] += t.offsets[i];
  ReserveHuge(t.items, items.size());
  t.items.resize(items.size());
  std::vector<int32_t> fill(t.offsets.begin(), t.offsets.end() - 1);
  // Rows are visited in ascending order, so each transposed row comes out
  // sorted.
  for (int r = 0; r < rows(); ++r) {
    for (int32_t item : Row(r)) t.items[fill[item]++] = r;
  }
  return t;
}

ReachabilityIndex::ReachabilityIndex(const Csr& preds, const Csr& succs,
                                     absl::Span<const NodeId> order) {
  const int n = static_cast<int>(order.size());
  pos_.resize(n);
  for (int i = 0; i < n; ++i) pos_[order[i]] = i;
  depth_.assign(n, 0);
  window_.assign(n, 0);
  for (NodeId v : order) {
    int32_t depth = 0;
    uint64_t window = 0;
    for (NodeId p : preds.Row(v)) {
      depth = std::max(depth, depth_[p] + 1);
      const int32_t d = pos_[v] - pos_[p];
      if (d <= kWindow) {
        window |= uint64_t{1} << (d - 1);
        if (d < kWindow) window |= window_[p] << d;
      }
    }
    depth_[v] = depth;
    window_[v] = window;
  }

  // Depth-first traversals over successors from the sources, alternating
  // the child order, numbering nodes as they finish.
  for (int k = 0; k < kLabelings; ++k) {
    std::vector<int32_t>& post = post_[k];
    std::vector<int32_t>& low = low_[k];
    post.assign(n, -1);
    low.assign(n, 0);
    int32_t counter = 0;
    // Stack of (node, next successor index).
    std::vector<std::pair<NodeId, int32_t>> stack;
    for (int r = 0; r < n; ++r) {
      const NodeId root = k == 0 ? r : n - 1 - r;
      if (preds.offsets[root] != preds.offsets[root + 1]) continue;
      post[root] = -2;  // entered
      stack.emplace_back(root, 0);
      while (!stack.empty()) {
        auto& [v, next] = stack.back();
        auto row = succs.Row(v);
        if (next < static_cast<int32_t>(row.size())) {
          const int32_t i = next++;
          const NodeId s = k == 0 ? row[i] : row[row.size() - 1 - i];
          if (post[s] == -1) {
            post[s] = -2;
            stack.emplace_back(s, 0);
          }
          continue;
        }
        post[v] = counter++;
        stack.pop_back();
      }
    }
    // low: smallest post number among the node and its descendants.
    for (int i = n - 1; i >= 0; --i) {
      const NodeId v = order[i];
      int32_t l = post[v];
      for (NodeId s : succs.Row(v)) l = std::min(l, low[s]);
      low[v] = l;
    }
  }
}

bool ReachabilityIndex::MayReach(NodeId u, NodeId v) const {
  if (pos_[u] >= pos_[v] || depth_[u] >= depth_[v]) return false;
  for (int k = 0; k < kLabelings; ++k) {
    if (low_[k][u] > low_[k][v] || post_[k][v] > post_[k][u]) return false;
  }
  return true;
}

ReachabilityQuery::ReachabilityQuery(const ReachabilityIndex& index,
                                     const Csr& preds)
    : index_(index), preds_(preds), visited_(index.num_nodes(), 0) {}

bool ReachabilityQuery::Reaches(NodeId from, NodeId to) {
  return ReachesAny(from, absl::Span<const NodeId>(&to, 1));
}

bool ReachabilityQuery::ReachesAny(NodeId from,
                                   absl::Span<const NodeId> targets) {
  if (++stamp_ == 0) {  // wrapped: forget every old mark
    std::fill(visited_.begin(), visited_.end(), 0);
    stamp_ = 1;
  }
  stack_.clear();
  for (NodeId t : targets) {
    if (t == from || !index_.MayReach(from, t)) continue;
    if (index_.InWindow(from, t)) {
      if (index_.WindowBit(from, t)) return true;
      continue;
    }
    if (visited_[t] == stamp_) continue;
    visited_[t] = stamp_;
    stack_.push_back(t);
  }
  return Search(from);
}

bool ReachabilityQuery::Search(NodeId from) {
  while (!stack_.empty()) {
    const NodeId x = stack_.back();
    stack_.pop_back();
    ++nodes_searched_;
    for (NodeId y : preds_.Row(x)) {
      if (y == from) return true;
      if (visited_[y] == stamp_) continue;
      visited_[y] = stamp_;
      if (!index_.MayReach(from, y)) continue;
      if (index_.InWindow(from, y)) {
        if (index_.WindowBit(from, y)) return true;
        continue;
      }
      stack_.push_back(y);
    }
  }
  return false;
}

}  // namespace weft::scheduler
