// Every node's ancestors and descendants in a small DAG, each a bitset
// with a bit per node (at its index: its issue position, or an order the
// caller gives), for the lower bound's terms that weigh the work between
// nodes (lower_bound.h). Memory and time grow as V^2 / 64, so graphs
// beyond kMaxNodes go without them.
//
// Immutable after construction; thread-safe to read.
#ifndef WEFT_SCHEDULER_REACH_SETS_H_
#define WEFT_SCHEDULER_REACH_SETS_H_

#include <cstdint>
#include <vector>

#include "scheduler/dependency_inference.h"

namespace weft::scheduler::bounds {

class ReachSets {
 public:
  static constexpr int kMaxNodes = 4096;

  // Each node's bit at its issue position, or at index[v] (a permutation
  // of 0..n-1 by NodeId) if given. REQUIRES: dag.num_nodes() <= kMaxNodes.
  explicit ReachSets(const Dag& dag,
                     const std::vector<int32_t>* index = nullptr);

  int num_nodes() const { return n_; }
  // The index of v's bit.
  int pos(NodeId v) const { return pos_[v]; }
  // `v` and every node after it / before it.
  const uint64_t* Descendants(NodeId v) const { return Row(desc_, v); }
  const uint64_t* Ancestors(NodeId v) const { return Row(anc_, v); }
  bool Has(const uint64_t* set, NodeId v) const {
    const int i = pos_[v];
    return (set[i / 64] >> (i % 64)) & 1;
  }
  // Calls f(index) for every index in `set` below `end`, descending if
  // `backward`.
  template <typename F>
  void ForEachBelow(const uint64_t* set, int end, bool backward, F f) const {
    const int words = (end + 63) / 64;
    for (int k = 0; k < words; ++k) {
      const int w = backward ? words - 1 - k : k;
      uint64_t bits = set[w];
      if (w == end / 64) bits &= (uint64_t{1} << (end % 64)) - 1;
      while (bits != 0) {
        const int b =
            backward ? 63 - __builtin_clzll(bits) : __builtin_ctzll(bits);
        f(w * 64 + b);
        bits &= ~(uint64_t{1} << b);
      }
    }
  }
  // Calls f(index) for every index in a and (if not null) b.
  template <typename F>
  void ForEach(const uint64_t* a, const uint64_t* b, F f) const {
    for (int w = 0; w < words_; ++w) {
      uint64_t bits = b == nullptr ? a[w] : a[w] & b[w];
      while (bits != 0) {
        f(w * 64 + __builtin_ctzll(bits));
        bits &= bits - 1;
      }
    }
  }

 private:
  uint64_t* Row(std::vector<uint64_t>& sets, NodeId v) {
    return sets.data() + static_cast<size_t>(v) * words_;
  }
  const uint64_t* Row(const std::vector<uint64_t>& sets, NodeId v) const {
    return sets.data() + static_cast<size_t>(v) * words_;
  }

  const int n_;
  const int words_;
  std::vector<int32_t> pos_;          // by NodeId
  std::vector<uint64_t> desc_, anc_;  // by NodeId, words_ each
};

}  // namespace weft::scheduler::bounds

#endif  // WEFT_SCHEDULER_REACH_SETS_H_
