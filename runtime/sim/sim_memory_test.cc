#include "runtime/sim/sim_memory.h"

#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::StatusIs;
using Need = SimMemory::Need;

SimMemory TwoDevices(uint64_t capacity = 4096) {
  return SimMemory({"gpu0", "gpu1"}, capacity);
}

TEST(SimMemoryTest, AllocationsAreAlignedDistinctAndCounted) {
  SimMemory memory = TwoDevices();
  absl::StatusOr<DevicePtr> a = memory.Allocate(0, 100);
  absl::StatusOr<DevicePtr> b = memory.Allocate(0, 0);
  absl::StatusOr<DevicePtr> c = memory.Allocate(0, 1);
  ASSERT_OK(a);
  ASSERT_OK(b);
  ASSERT_OK(c);
  EXPECT_NE(a->address, 0u);
  EXPECT_EQ(a->address % 256, 0u);
  EXPECT_EQ(b->address, a->address + 256);
  EXPECT_EQ(c->address, b->address + 256);  // zero bytes still take a slot
  EXPECT_EQ(memory.used_bytes(0), 101u);
  EXPECT_EQ(memory.used_bytes(1), 0u);
  ASSERT_OK(memory.Free(*a));
  EXPECT_EQ(memory.used_bytes(0), 1u);
}

TEST(SimMemoryTest, RunningOutNamesTheDeviceAndTheFreeBytes) {
  SimMemory memory = TwoDevices(/*capacity=*/1000);
  ASSERT_OK(memory.Allocate(1, 600));
  EXPECT_THAT(memory.Allocate(1, 500),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("device 1 (gpu1) is out of memory: requested "
                                 "500 bytes, 400 bytes free of 1000")));
  EXPECT_OK(memory.Allocate(0, 1000));
}

TEST(SimMemoryTest, RejectsBadDevicesAndAddresses) {
  SimMemory memory = TwoDevices();
  EXPECT_THAT(memory.Allocate(2, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("device 2 does not exist (2 devices)")));
  const DevicePtr p = memory.Allocate(0, 64).value();
  EXPECT_THAT(memory.Free(DevicePtr{0, p.address + 8}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not the start of an allocation")));
  EXPECT_THAT(memory.Resolve(DevicePtr{0, p.address + 8}, 64),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not inside an allocation")));
  EXPECT_OK(memory.Resolve(DevicePtr{0, p.address + 8}, 56));
}

TEST(SimMemoryTest, ContentsAreMadeOnlyWhenNeededAndReadAsZeros) {
  SimMemory memory = TwoDevices();
  const DevicePtr p = memory.Allocate(0, 64).value();
  absl::StatusOr<SimMemory::Resolved> address = memory.Resolve(p, 64);
  ASSERT_OK(address);
  EXPECT_EQ(address->data, nullptr);
  EXPECT_EQ(memory.materialized_bytes(0), 0u);
  absl::StatusOr<SimMemory::Resolved> contents =
      memory.Resolve(DevicePtr{0, p.address + 16}, 8, Need::kContents);
  ASSERT_OK(contents);
  ASSERT_NE(contents->data, nullptr);
  EXPECT_EQ(contents->data[0], 0);
  EXPECT_EQ(memory.materialized_bytes(0), 64u);
  // The same bytes from then on, at their offset.
  std::memcpy(contents->data, "x", 1);
  EXPECT_EQ(memory.Resolve(p, 64).value().data[16], 'x');
}

TEST(SimMemoryTest, ResolvedMemoryOutlivesItsFree) {
  SimMemory memory = TwoDevices();
  const DevicePtr p = memory.Allocate(0, 32).value();
  SimMemory::Resolved held = memory.Resolve(p, 32, Need::kContents).value();
  ASSERT_OK(memory.Free(p));
  EXPECT_EQ(memory.used_bytes(0), 0u);
  EXPECT_EQ(memory.materialized_bytes(0), 32u);  // still held
  held.data[31] = 1;                             // still writable
  held = SimMemory::Resolved{};
  EXPECT_EQ(memory.materialized_bytes(0), 0u);
}

TEST(SimMemoryTest, ResolveArgsVisitsEveryArgumentInOrder) {
  SimMemory memory = TwoDevices();
  const DevicePtr p = memory.Allocate(0, 16).value();
  const std::vector<KernelArg> args = {DeviceBufferArg{p, 16}, 2.0f, int64_t{3},
                                       DeviceBufferArg{p, 8}};
  std::vector<bool> buffers;
  ASSERT_OK(memory.ResolveArgs(
      args, Need::kContents, [&](const KernelArg&, SimMemory::Resolved* r) {
        buffers.push_back(r != nullptr && r->data != nullptr);
      }));
  EXPECT_EQ(buffers, (std::vector<bool>{true, false, false, true}));
  const std::vector<KernelArg> bad = {DeviceBufferArg{p, 17}};
  EXPECT_THAT(memory.ResolveArgs(bad, Need::kAddress,
                                 [](const KernelArg&, SimMemory::Resolved*) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace weft::runtime
