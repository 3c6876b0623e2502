#include "runtime/cuda/gpu_uuid.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

TEST(GpuUuidTest, FormatsGroupsInLowercaseHex) {
  const char bytes[16] = {0x5b,
                          static_cast<char>(0xa0),
                          static_cast<char>(0xd8),
                          static_cast<char>(0xa5),
                          0x39,
                          static_cast<char>(0xa5),
                          static_cast<char>(0x9f),
                          0x4a,
                          0x6e,
                          0x2c,
                          0x00,
                          0x00,
                          0x00,
                          0x00,
                          0x00,
                          0x01};
  EXPECT_EQ(FormatGpuUuid(bytes), "GPU-5ba0d8a5-39a5-9f4a-6e2c-000000000001");
}

TEST(GpuUuidTest, DistinctBytesGiveDistinctStrings) {
  char a[16] = {};
  char b[16] = {};
  b[15] = static_cast<char>(0xff);
  EXPECT_EQ(FormatGpuUuid(a), "GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(FormatGpuUuid(b), "GPU-00000000-0000-0000-0000-0000000000ff");
  EXPECT_THAT(FormatGpuUuid(b), ::testing::SizeIs(40));
}

}  // namespace
}  // namespace weft::runtime
