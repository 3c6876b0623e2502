#include "scheduler/data_location.h"

namespace weft::scheduler {

void DataLocations::Apply(absl::Span<const BufferUse> uses, int device) {
  const Mask bit = Mask{1} << device;
  // Reads first, then writes: a buffer both read and written ends on
  // `device` alone whatever the argument order.
  for (const BufferUse& use : uses) {
    if (!Writes(use.access)) mask_[use.buffer] |= bit;
  }
  for (const BufferUse& use : uses) {
    if (Writes(use.access)) mask_[use.buffer] = bit;
  }
}

}  // namespace weft::scheduler
