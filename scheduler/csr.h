// Compressed sparse rows: a list of integer rows in two flat arrays.
//
// The planner keeps its per-node lists this way (a graph's dependencies,
// the events each node waits on): one allocation per list of lists, rows
// read as spans, and a list built in order by appending rows. A plain
// value; thread-compatible.
#ifndef WEFT_SCHEDULER_CSR_H_
#define WEFT_SCHEDULER_CSR_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace weft::scheduler {

// Row i is items[offsets[i], offsets[i + 1]).
struct Csr {
  std::vector<int32_t> offsets{0};
  std::vector<int32_t> items;

  int rows() const { return static_cast<int>(offsets.size()) - 1; }
  absl::Span<const int32_t> Row(int i) const {
    return absl::Span<const int32_t>(items.data() + offsets[i],
                                     offsets[i + 1] - offsets[i]);
  }
  // Whether the offsets start at 0, never go down and end at the item
  // count: what Row needs. O(rows).
  bool WellFormed() const;
  // Appends `row` as the next row. REQUIRES: `row` is not in this list's
  // own storage.
  void AppendRow(absl::Span<const int32_t> row) {
    items.insert(items.end(), row.begin(), row.end());
    offsets.push_back(static_cast<int32_t>(items.size()));
  }
  // The transpose, with `num_cols` rows; each row sorted ascending.
  Csr Transpose(int num_cols) const;

  friend bool operator==(const Csr& a, const Csr& b) {
    return a.offsets == b.offsets && a.items == b.items;
  }
  friend bool operator!=(const Csr& a, const Csr& b) { return !(a == b); }
};

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_CSR_H_
