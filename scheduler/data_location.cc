#include "scheduler/data_location.h"

#include <variant>

namespace weft::scheduler {

void DataLocations::Apply(const NodeSpec& node, int device) {
  const Mask bit = Mask{1} << device;
  // Reads first, then writes: a buffer both read and written ends on
  // `device` alone whatever the argument order.
  for (const Arg& arg : node.args) {
    const auto* use = std::get_if<BufferUse>(&arg);
    if (use != nullptr && !Writes(use->access)) mask_[use->buffer] |= bit;
  }
  for (const Arg& arg : node.args) {
    const auto* use = std::get_if<BufferUse>(&arg);
    if (use != nullptr && Writes(use->access)) mask_[use->buffer] = bit;
  }
}

}  // namespace weft::scheduler
