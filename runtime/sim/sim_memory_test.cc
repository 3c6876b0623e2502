#include "runtime/sim/sim_memory.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/peak_resident.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::StatusIs;
using Need = SimMemory::Need;
using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

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

TEST(SimMemoryTest, ChecksRemembersAllocationsOnlyUntilOneIsFreed) {
  SimMemory memory = TwoDevices();
  const DevicePtr p = memory.Allocate(0, 64).value();
  const DevicePtr q = memory.Allocate(0, 64).value();
  EXPECT_OK(memory.CheckRange(DevicePtr{0, p.address + 8}, 56));
  // Remembered, the allocation still bounds what passes.
  EXPECT_OK(memory.CheckRange(p, 64));
  EXPECT_THAT(memory.CheckRange(DevicePtr{0, p.address + 8}, 64),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not inside an allocation")));
  EXPECT_THAT(memory.CheckRange(DevicePtr{1, p.address}, 8),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const KernelArg in_q = DeviceBufferArg{q, 64, scheduler::DType::kFloat32,
                                         scheduler::Access::kRead};
  const std::vector<KernelArg> args = {1.0f, in_q};
  EXPECT_OK(memory.CheckArgs(args));
  // Freeing forgets what was remembered: the freed range fails at once,
  // the other still passes.
  ASSERT_OK(memory.Free(p));
  EXPECT_THAT(memory.CheckRange(p, 64),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not inside an allocation")));
  EXPECT_OK(memory.CheckArgs(args));
  ASSERT_OK(memory.Free(q));
  EXPECT_THAT(memory.CheckArgs(args),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not inside an allocation")));
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
  EXPECT_EQ(memory.materialized_bytes(0), 8u);  // the range made real
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

TEST(SimRangesTest, AddAndRemoveMergeSplitAndCount) {
  SimRanges ranges;
  EXPECT_EQ(ranges.Add(10, 20), 10u);
  EXPECT_EQ(ranges.Add(30, 40), 10u);
  EXPECT_EQ(ranges.Add(20, 30), 10u);  // touching: one range
  EXPECT_EQ(ranges.ranges().size(), 1u);
  EXPECT_EQ(ranges.Add(5, 45), 10u);  // only the new bytes count
  EXPECT_EQ(ranges.bytes(), 40u);
  EXPECT_EQ(ranges.Remove(15, 25), 10u);  // splits
  EXPECT_EQ(ranges.Remove(0, 6), 1u);
  EXPECT_EQ(ranges.Remove(100, 200), 0u);
  EXPECT_EQ(ranges.bytes(), 29u);
  Ranges in, gaps;
  ranges.ForEach(0, 50, [&](uint64_t b, uint64_t e) { in.push_back({b, e}); });
  ranges.ForEachGap(8, 30, [&](uint64_t b, uint64_t e) {
    gaps.push_back({b, e});
  });
  EXPECT_EQ(in, (Ranges{{6, 15}, {25, 45}}));
  EXPECT_EQ(gaps, (Ranges{{15, 25}}));
  EXPECT_EQ(ranges.Remove(0, 100), 29u);
  EXPECT_TRUE(ranges.empty());
}

// Reads [ptr, ptr + bytes) as a string.
std::string ReadAll(const SimMemory& memory, DevicePtr ptr, uint64_t bytes) {
  std::string out(bytes, '?');
  EXPECT_OK(memory.Read(ptr, bytes, out.data()));
  return out;
}

DevicePtr At(DevicePtr base, uint64_t offset) {
  return DevicePtr{base.device, base.address + offset};
}

TEST(SimMemoryContentsTest, PaddedWriteKeepsOnlyTheDataAndReadsZerosAfter) {
  SimMemory memory = TwoDevices(/*capacity=*/uint64_t{1} << 20);
  const DevicePtr p = memory.Allocate(0, 8192).value();
  // Stale bytes first: the tail of the padded write must read as zeros.
  ASSERT_OK(memory.Write(p, std::string(8192, 'q').data(), 8192, 8192));
  ASSERT_OK(memory.Write(p, "abc", 3, 8192));
  EXPECT_EQ(ReadAll(memory, p, 8192), "abc" + std::string(8189, '\0'));
  // Trailing zeros of the data are no data either.
  const DevicePtr q = memory.Allocate(1, 8192).value();
  const std::string data = std::string("xy") + std::string(4000, '\0');
  ASSERT_OK(memory.Write(q, data.data(), data.size(), 8192));
  EXPECT_EQ(memory.materialized_bytes(1), 2u);
  EXPECT_EQ(ReadAll(memory, q, 8192), "xy" + std::string(8190, '\0'));
  EXPECT_THAT(memory.Write(q, "abc", 3, 2),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(SimMemoryContentsTest, OneByteIntoAGibibyteMaterializesOneByte) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  ResetPeakResident();
  const uint64_t peak_before = PeakResidentBytes();
  SimMemory memory = TwoDevices(/*capacity=*/2 * kGiB);
  const DevicePtr p = memory.Allocate(0, kGiB).value();
  ASSERT_OK(memory.Write(p, "x", 1, kGiB));
  EXPECT_EQ(memory.materialized_bytes(0), 1u);
  const DevicePtr q = memory.Allocate(1, kGiB).value();
  ASSERT_OK(memory.Copy(q, p, kGiB));  // moves the one byte
  EXPECT_EQ(memory.materialized_bytes(1), 1u);
  EXPECT_EQ(ReadAll(memory, q, 4), std::string("x\0\0\0", 4));
  EXPECT_EQ(ReadAll(memory, At(q, kGiB - 4), 4), std::string(4, '\0'));
  // Nor does the host hold the rest: no allocator cleared the two blocks.
  if (peak_before > 0) {
    EXPECT_LT(PeakResidentBytes(), peak_before + (uint64_t{64} << 20));
  }
}

TEST(SimMemoryContentsTest, CopyMovesDataRangesAndClearsTheRest) {
  SimMemory memory = TwoDevices();
  const DevicePtr src = memory.Allocate(0, 1024).value();
  const DevicePtr dst = memory.Allocate(1, 1024).value();
  ASSERT_OK(memory.Write(At(src, 100), "xy", 2, 2));
  ASSERT_OK(memory.Write(At(src, 600), "z", 1, 1));
  ASSERT_OK(memory.Write(dst, std::string(1024, 'd').data(), 1024, 1024));
  ASSERT_OK(memory.Copy(dst, src, 1024));
  std::string want(1024, '\0');
  want[100] = 'x';
  want[101] = 'y';
  want[600] = 'z';
  EXPECT_EQ(ReadAll(memory, dst, 1024), want);
  // Part of a range, to another offset.
  ASSERT_OK(memory.Copy(At(dst, 10), At(src, 101), 10));
  EXPECT_EQ(ReadAll(memory, At(dst, 9), 3), std::string("\0y\0", 3));
  // A copy of zeros only clears the destination.
  const DevicePtr zeros = memory.Allocate(0, 1024).value();
  ASSERT_OK(memory.Copy(dst, zeros, 1024));
  EXPECT_EQ(ReadAll(memory, dst, 1024), std::string(1024, '\0'));
  EXPECT_EQ(memory.materialized_bytes(0), 3u);
  EXPECT_EQ(memory.materialized_bytes(1), 1024u);  // its pages stay
}

TEST(SimMemoryContentsTest, OverlappingCopyMovesAsOneBlock) {
  SimMemory memory = TwoDevices();
  const DevicePtr p = memory.Allocate(0, 64).value();
  ASSERT_OK(memory.Write(p, "abcdefgh", 8, 8));
  ASSERT_OK(memory.Write(At(p, 8), std::string(8, 'Q').data(), 8, 8));
  ASSERT_OK(memory.Write(At(p, 8), "", 0, 8));  // stale, reads as zeros
  ASSERT_OK(memory.Copy(At(p, 4), p, 16));
  EXPECT_EQ(ReadAll(memory, p, 24),
            std::string("abcdabcdefgh", 12) + std::string(12, '\0'));
}

TEST(SimMemoryContentsTest, ClearIsAZeroFillWithoutHostWork) {
  SimMemory memory = TwoDevices();
  const DevicePtr p = memory.Allocate(0, 256).value();
  ASSERT_OK(memory.Write(p, std::string(256, 'a').data(), 256, 256));
  SimMemory::Resolved r = memory.Resolve(At(p, 64), 128).value();
  memory.Clear(r, 128);
  EXPECT_EQ(
      ReadAll(memory, p, 256),
      std::string(64, 'a') + std::string(128, '\0') + std::string(64, 'a'));
  EXPECT_EQ(r.data[0], 'a');  // the host bytes are untouched (stale)
  EXPECT_EQ(memory.materialized_bytes(0), 256u);
}

TEST(SimMemoryContentsTest, ContentsOfAStaleRangeAreZeros) {
  SimMemory memory = TwoDevices();
  const DevicePtr p = memory.Allocate(0, 256).value();
  ASSERT_OK(memory.Write(p, std::string(256, 's').data(), 256, 256));
  memory.Clear(memory.Resolve(p, 256).value(), 256);
  ASSERT_OK(memory.Write(At(p, 200), "k", 1, 1));
  // A kernel computing on [0, 256) sees zeros where the range was cleared
  // and the data where it holds some.
  SimMemory::Resolved r = memory.Resolve(p, 256, Need::kContents).value();
  std::string want(256, '\0');
  want[200] = 'k';
  EXPECT_EQ(std::string(r.data, 256), want);
  // What it writes there is data from then on.
  r.data[5] = 'w';
  want[5] = 'w';
  EXPECT_EQ(ReadAll(memory, p, 256), want);
}

TEST(SimMemoryContentsTest, BuffersSharingAnArenaKeepTheirOwnRanges) {
  SimMemory memory = TwoDevices(/*capacity=*/uint64_t{1} << 20);
  // One allocation holds buffers a = [0, 4096) and b = [4096, 8192).
  const DevicePtr arena = memory.Allocate(0, 8192).value();
  const DevicePtr a = arena;
  const DevicePtr b = At(arena, 4096);
  ASSERT_OK(memory.Write(a, "aa", 2, 4096));
  ASSERT_OK(memory.Write(b, std::string(4096, 'b').data(), 4096, 4096));
  // Clearing a and computing on it leave b alone.
  memory.Clear(memory.Resolve(a, 4096).value(), 4096);
  SimMemory::Resolved ra = memory.Resolve(a, 4096, Need::kContents).value();
  EXPECT_EQ(std::string(ra.data, 4096), std::string(4096, '\0'));
  EXPECT_EQ(ReadAll(memory, b, 4096), std::string(4096, 'b'));
  // A padded write into a clears only a's tail.
  ASSERT_OK(memory.Write(a, "A", 1, 4096));
  EXPECT_EQ(ReadAll(memory, arena, 8192),
            "A" + std::string(4095, '\0') + std::string(4096, 'b'));
  // Copies between them move only data.
  ASSERT_OK(memory.Copy(b, a, 4096));
  EXPECT_EQ(ReadAll(memory, b, 4096), "A" + std::string(4095, '\0'));
  EXPECT_EQ(memory.materialized_bytes(0), 8192u);
}

}  // namespace
}  // namespace weft::runtime
