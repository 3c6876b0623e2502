// Huge pages for the planner's large arrays.
//
// Planning a graph of a million nodes fills arrays of tens to hundreds of
// megabytes that nothing has touched before; with 4 KiB pages, a
// noticeable share of the planning time goes to page faults. Where the
// kernel backs anonymous memory with transparent huge pages on request
// (Linux, "madvise" mode), advising a fresh array before filling it takes
// one fault per 2 MiB instead of one per 4 KiB. Elsewhere these calls do
// nothing. Advice never changes what memory holds, only how it is mapped.
//
// Thread-safe (stateless).
#ifndef WEFT_SCHEDULER_HUGE_PAGES_H_
#define WEFT_SCHEDULER_HUGE_PAGES_H_

#include <cstddef>
#include <vector>

namespace weft::scheduler {

// Advises the whole 2 MiB-aligned pages inside [data, data + bytes) to be
// backed by huge pages; returns true if the advice was given. Ranges that
// hold no whole huge page are left alone (false).
bool AdviseHugePages(void* data, size_t bytes);

// Reserves room for `n` elements in `v` and, for a large enough
// reservation, advises the new storage before anything is written to it.
template <typename T>
void ReserveHuge(std::vector<T>& v, size_t n) {
  if (n <= v.capacity()) return;
  v.reserve(n);
  AdviseHugePages(v.data(), v.capacity() * sizeof(T));
}

// `v` set to `n` copies of `value`, its storage advised as ReserveHuge
// does when it has to grow.
template <typename T>
void AssignHuge(std::vector<T>& v, size_t n, const T& value) {
  ReserveHuge(v, n);
  v.assign(n, value);
}

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_HUGE_PAGES_H_
