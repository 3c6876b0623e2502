#include "runtime/cuda/allocation_table.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::runtime::cuda {
namespace {

using ::testing::HasSubstr;

TEST(AllocationTableTest, RangesInsideOneAllocationPass) {
  AllocationTable table;
  table.Add(DevicePtr{0, 0x1000}, 256);
  table.Add(DevicePtr{0, 0x1100}, 16);
  EXPECT_TRUE(table.CheckRange(DevicePtr{0, 0x1000}, 256, "x").ok());
  EXPECT_TRUE(table.CheckRange(DevicePtr{0, 0x1080}, 128, "x").ok());
  EXPECT_TRUE(table.CheckRange(DevicePtr{0, 0x1100}, 0, "x").ok());
  EXPECT_TRUE(table.CheckRange(DevicePtr{0, 0x1110}, 0, "x").ok());
}

TEST(AllocationTableTest, RangesOutsideFail) {
  AllocationTable table;
  table.Add(DevicePtr{0, 0x1000}, 256);
  table.Add(DevicePtr{0, 0x1100}, 16);
  // Across two allocations, past the end, before the first, other device.
  const absl::Status across = table.CheckRange(DevicePtr{0, 0x10f0}, 32, "src");
  EXPECT_EQ(across.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(across.message(),
              HasSubstr("src [0x10f0, +32) is not inside an allocation on "
                        "device 0"));
  EXPECT_FALSE(table.CheckRange(DevicePtr{0, 0x1100}, 17, "x").ok());
  EXPECT_FALSE(table.CheckRange(DevicePtr{0, 0xfff}, 1, "x").ok());
  EXPECT_FALSE(table.CheckRange(DevicePtr{1, 0x1000}, 1, "x").ok());
}

TEST(AllocationTableTest, RemoveNeedsTheStartOnItsDevice) {
  AllocationTable table;
  table.Add(DevicePtr{1, 0x2000}, 64);
  const absl::Status inside = table.Remove(DevicePtr{1, 0x2010});
  EXPECT_EQ(inside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(inside.message(),
              HasSubstr("device 1: 0x2010 is not the start of an allocation"));
  EXPECT_FALSE(table.Remove(DevicePtr{0, 0x2000}).ok());
  EXPECT_TRUE(table.Remove(DevicePtr{1, 0x2000}).ok());
  EXPECT_FALSE(table.CheckRange(DevicePtr{1, 0x2000}, 1, "x").ok());
  EXPECT_FALSE(table.Remove(DevicePtr{1, 0x2000}).ok());
}

TEST(AllocationTableTest, TakeAllEmptiesTheTableInAddressOrder) {
  AllocationTable table;
  table.Add(DevicePtr{1, 0x3000}, 8);
  table.Add(DevicePtr{0, 0x1000}, 8);
  const std::vector<DevicePtr> all = table.TakeAll();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].device, 0);
  EXPECT_EQ(all[0].address, 0x1000u);
  EXPECT_EQ(all[1].device, 1);
  EXPECT_EQ(all[1].address, 0x3000u);
  EXPECT_TRUE(table.TakeAll().empty());
}

}  // namespace
}  // namespace weft::runtime::cuda
