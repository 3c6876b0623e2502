#include "runtime/cuda/gpu_uuid.h"

#include <string>

namespace weft::runtime {

std::string FormatGpuUuid(const char (&bytes)[16]) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "GPU-";
  out.reserve(4 + 32 + 4);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    const auto byte = static_cast<unsigned char>(bytes[i]);
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 0xf]);
  }
  return out;
}

}  // namespace weft::runtime
