#include "scheduler/reach_sets.h"

namespace weft::scheduler::bounds {

ReachSets::ReachSets(const Dag& dag, const std::vector<int32_t>* index)
    : n_(dag.num_nodes()),
      words_((n_ + 63) / 64),
      pos_(n_),
      desc_(static_cast<size_t>(n_) * words_, 0),
      anc_(static_cast<size_t>(n_) * words_, 0) {
  for (int i = 0; i < n_; ++i) {
    const NodeId v = dag.order[i];
    pos_[v] = index != nullptr ? (*index)[v] : i;
  }
  // Descendants from the end of the issue order, ancestors from its start.
  for (int i = n_ - 1; i >= 0; --i) {
    const NodeId v = dag.order[i];
    uint64_t* row = Row(desc_, v);
    row[pos_[v] / 64] |= uint64_t{1} << (pos_[v] % 64);
    for (const NodeId s : dag.Succs(v)) {
      const uint64_t* other = Row(desc_, s);
      for (int w = 0; w < words_; ++w) row[w] |= other[w];
    }
  }
  for (int i = 0; i < n_; ++i) {
    const NodeId v = dag.order[i];
    uint64_t* row = Row(anc_, v);
    row[pos_[v] / 64] |= uint64_t{1} << (pos_[v] % 64);
    for (const NodeId p : dag.Preds(v)) {
      const uint64_t* other = Row(anc_, p);
      for (int w = 0; w < words_; ++w) row[w] |= other[w];
    }
  }
}

}  // namespace weft::scheduler::bounds
