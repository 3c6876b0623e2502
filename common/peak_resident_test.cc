#include "common/peak_resident.h"

#include <cstring>
#include <memory>

#include "gtest/gtest.h"

namespace weft {
namespace {

// Touching 64 MiB raises the peak by about that much (Linux).
TEST(PeakResidentTest, GrowsWithMemoryTouched) {
  ResetPeakResident();
  const uint64_t before = PeakResidentBytes();
  if (before == 0) GTEST_SKIP() << "no VmHWM on this system";
  constexpr size_t kBytes = size_t{64} << 20;
  auto block = std::make_unique<char[]>(kBytes);
  std::memset(block.get(), 1, kBytes);
  const uint64_t after = PeakResidentBytes();
  EXPECT_GE(after, before + kBytes / 2) << block[kBytes - 1];
}

}  // namespace
}  // namespace weft
