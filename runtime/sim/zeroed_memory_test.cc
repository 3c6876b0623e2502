#include "runtime/sim/zeroed_memory.h"

#include <cstdint>
#include <cstring>

#include "common/peak_resident.h"
#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

TEST(ZeroedMemoryTest, SmallAndLargeBlocksReadAsZerosAndTakeWrites) {
  for (uint64_t bytes :
       {uint64_t{0}, uint64_t{1}, uint64_t{4096}, kZeroedMappedFrom - 1,
        kZeroedMappedFrom, uint64_t{3} << 20}) {
    ZeroedBytes block = AllocateZeroed(bytes);
    ASSERT_NE(block, nullptr) << bytes;
    const uint64_t n = bytes == 0 ? 1 : bytes;
    EXPECT_EQ(block.get()[0], 0);
    EXPECT_EQ(block.get()[n - 1], 0);
    EXPECT_EQ(block.get_deleter().mapped, bytes >= kZeroedMappedFrom ? n : 0);
    std::memset(block.get(), 7, n);
    EXPECT_EQ(block.get()[n / 2], 7);
  }
}

TEST(ZeroedMemoryTest, ALargeBlockTakesNoMemoryUntilWritten) {
  ResetPeakResident();
  const uint64_t before = PeakResidentBytes();
  if (before == 0) GTEST_SKIP() << "the peak resident memory is unknown";
  constexpr uint64_t kBytes = uint64_t{1} << 30;
  ZeroedBytes block = AllocateZeroed(kBytes);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(block.get()[kBytes / 2], 0);  // reading maps the zero page
  EXPECT_LT(PeakResidentBytes(), before + (uint64_t{64} << 20));
  block.get()[0] = 1;
  block.get()[kBytes - 1] = 1;
  EXPECT_LT(PeakResidentBytes(), before + (uint64_t{64} << 20));
}

}  // namespace
}  // namespace weft::runtime
