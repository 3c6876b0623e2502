#include "scheduler/csr.h"

#include "scheduler/huge_pages.h"

namespace weft::scheduler {

bool Csr::WellFormed() const {
  if (offsets.empty() || offsets[0] != 0 ||
      static_cast<size_t>(offsets.back()) != items.size()) {
    return false;
  }
  bool monotone = true;
  for (size_t i = 1; i < offsets.size(); ++i) {
    monotone &= offsets[i - 1] <= offsets[i];
  }
  return monotone;
}

Csr Csr::Transpose(int num_cols) const {
  Csr t;
  ReserveHuge(t.offsets, num_cols + 1);
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

}  // namespace weft::scheduler
