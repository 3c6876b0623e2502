// A binary min-heap of small keys for the simulation's hot loops.
//
// MinHeap<Key> keeps keys ordered by `operator<` (which must be a strict
// weak order) and pops the least. Unlike std::priority_queue it moves a
// hole down (or up) instead of swapping, and picks the lesser child with
// arithmetic rather than a branch, which matters when the comparisons are
// unpredictable (most of them are in an event queue). Among equal keys the
// popping order is unspecified, so callers that need a deterministic order
// use keys that never compare equal.
//
// Not thread-safe.
#ifndef WEFT_SCHEDULER_MIN_HEAP_H_
#define WEFT_SCHEDULER_MIN_HEAP_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace weft::scheduler {

template <typename Key>
class MinHeap {
 public:
  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }
  // The least key. Requires !empty().
  const Key& top() const { return keys_.front(); }

  void push(Key key) {
    size_t i = keys_.size();
    // Room at the end, without storing `key` there first: a key built in
    // registers is then stored once, in place, instead of being read back
    // whole from the smaller stores that built it (which stalls).
    keys_.emplace_back();
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!(key < keys_[parent])) break;
      keys_[i] = keys_[parent];
      i = parent;
    }
    keys_[i] = std::move(key);
  }

  // Removes the least key. Requires !empty().
  void pop() {
    Key last = std::move(keys_.back());
    keys_.pop_back();
    const size_t n = keys_.size();
    if (n == 0) return;
    size_t i = 0;
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n) {
        child += static_cast<size_t>(keys_[child + 1] < keys_[child]);
      }
      if (!(keys_[child] < last)) break;
      keys_[i] = keys_[child];
      i = child;
    }
    keys_[i] = std::move(last);
  }

  void clear() { keys_.clear(); }

 private:
  std::vector<Key> keys_;
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_MIN_HEAP_H_
