#include "scheduler/reachability.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "scheduler/huge_pages.h"

namespace weft::scheduler {

IntervalLabels::IntervalLabels(const Csr& preds, const Csr& succs) {
  const int n = preds.rows();
  post_.assign(n, -1);  // -1: not entered yet; -2: entered
  low_.assign(n, 0);
  int32_t counter = 0;
  // The traversal's path: node, next successor index, and the smallest
  // post-order number among the descendants finished so far.
  struct Frame {
    NodeId v;
    int32_t next;
    int32_t low;
  };
  std::vector<Frame> stack;
  for (NodeId root = 0; root < n; ++root) {
    if (preds.offsets[root] != preds.offsets[root + 1]) continue;
    post_[root] = -2;
    stack.push_back({root, 0, std::numeric_limits<int32_t>::max()});
    while (!stack.empty()) {
      Frame& f = stack.back();
      auto row = succs.Row(f.v);
      if (f.next < static_cast<int32_t>(row.size())) {
        const NodeId s = row[f.next++];
        if (post_[s] == -1) {
          post_[s] = -2;
          stack.push_back({s, 0, std::numeric_limits<int32_t>::max()});
        } else {
          // Finished already (in a DAG no successor is still on the path).
          f.low = std::min(f.low, low_[s]);
        }
        continue;
      }
      // Every descendant has finished: number the node.
      const NodeId v = f.v;
      post_[v] = counter++;
      low_[v] = std::min(f.low, post_[v]);
      stack.pop_back();
      if (!stack.empty()) {
        stack.back().low = std::min(stack.back().low, low_[v]);
      }
    }
  }
}

ReachabilityIndex::ReachabilityIndex(int num_nodes) {
  ReserveHuge(pos_, num_nodes);
  ReserveHuge(depth_, num_nodes);
  ReserveHuge(window_, num_nodes);
  pos_.resize(num_nodes);
  depth_.resize(num_nodes);
  window_.resize(num_nodes);
}

ReachabilityIndex::ReachabilityIndex(const Csr& preds, const Csr& succs,
                                     absl::Span<const NodeId> order)
    : ReachabilityIndex(static_cast<int>(order.size())) {
  for (size_t i = 0; i < order.size(); ++i) {
    Label(order[i], static_cast<int32_t>(i), preds.Row(order[i]));
  }
  intervals_ = IntervalLabels(preds, succs);
}

ReachabilityQuery::ReachabilityQuery(const ReachabilityIndex& index,
                                     const Csr& preds, int64_t interval_budget)
    : index_(index), preds_(preds), interval_budget_(interval_budget) {}

bool ReachabilityQuery::Reaches(NodeId from, NodeId to) {
  return ReachesAny(from, absl::Span<const NodeId>(&to, 1));
}

bool ReachabilityQuery::ReachesAny(NodeId from,
                                   absl::Span<const NodeId> targets) {
  if (Start(from, targets)) return true;
  for (;;) {
    const bool labelled =
        !index_.intervals().empty() || !own_intervals_.empty();
    const int64_t budget = interval_budget_ >= 0
                               ? interval_budget_
                               : index_.num_nodes() / 4 + 4096;
    const int64_t stop_at =
        labelled ? std::numeric_limits<int64_t>::max() : budget;
    const Outcome outcome = Search(from, stop_at);
    if (outcome != Outcome::kGaveUp) return outcome == Outcome::kYes;
    // The searches have cost as much as labels would: build them, then go
    // on with the same search.
    BuildIntervals();
  }
}

std::optional<bool> ReachabilityQuery::TryReachesAny(
    NodeId from, absl::Span<const NodeId> targets, int64_t max_nodes) {
  if (Start(from, targets)) return true;
  const Outcome outcome = Search(from, nodes_searched_ + max_nodes);
  if (outcome == Outcome::kGaveUp) return std::nullopt;
  return outcome == Outcome::kYes;
}

void ReachabilityQuery::BuildIntervals() {
  own_intervals_ = IntervalLabels(preds_, preds_.Transpose(preds_.rows()));
}

bool ReachabilityQuery::Start(NodeId from, absl::Span<const NodeId> targets) {
  const size_t n = index_.num_nodes();
  if (visited_.size() < n) {  // first use, or the index has grown since
    const size_t size = std::max(n, 2 * visited_.size());
    ReserveHuge(visited_, size);
    visited_.resize(size, 0);
  }
  if (++stamp_ == 0) {  // wrapped: forget every old mark
    std::fill(visited_.begin(), visited_.end(), 0);
    stamp_ = 1;
  }
  stack_.clear();
  for (NodeId t : targets) {
    if (t == from || !MayReach(from, t)) continue;
    if (index_.InWindow(from, t)) {
      if (index_.WindowBit(from, t)) return true;
      continue;
    }
    if (visited_[t] == stamp_) continue;
    visited_[t] = stamp_;
    stack_.push_back(t);
  }
  return false;
}

ReachabilityQuery::Outcome ReachabilityQuery::Search(NodeId from,
                                                     int64_t stop_at) {
  while (!stack_.empty()) {
    if (nodes_searched_ >= stop_at) return Outcome::kGaveUp;
    const NodeId x = stack_.back();
    stack_.pop_back();
    ++nodes_searched_;
    for (NodeId y : preds_.Row(x)) {
      if (y == from) return Outcome::kYes;
      if (visited_[y] == stamp_) continue;
      visited_[y] = stamp_;
      if (!MayReach(from, y)) continue;
      if (index_.InWindow(from, y)) {
        if (index_.WindowBit(from, y)) return Outcome::kYes;
        continue;
      }
      stack_.push_back(y);
    }
  }
  return Outcome::kNo;
}

}  // namespace weft::scheduler
