#include "runtime/memory_pool.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/forwarding_backend.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * 1024;

// Counts the allocations and frees that reach the simulator.
class CountingAllocBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::StatusOr<DevicePtr> Allocate(int device, uint64_t bytes) override {
    ++allocate_calls;
    return wrapped()->Allocate(device, bytes);
  }
  absl::Status Free(DevicePtr ptr) override {
    ++free_calls;
    return wrapped()->Free(ptr);
  }
  std::atomic<int> allocate_calls{0};
  std::atomic<int> free_calls{0};
};

class MemoryPoolTest : public ::testing::Test {
 protected:
  void Make(uint64_t memory_bytes,
            uint64_t max_cached = MemoryPool::kUnlimited) {
    pool_.reset();
    SimBackend::Options options;
    options.num_devices = 2;
    options.memory_bytes = memory_bytes;
    sim_ = SimBackend::Create(options).value();
    counting_ = std::make_unique<CountingAllocBackend>(sim_.get());
    MemoryPool::Options pool_options;
    pool_options.max_cached_bytes = max_cached;
    pool_ = std::make_unique<MemoryPool>(counting_.get(), 1, pool_options);
  }
  void SetUp() override { Make(64 * kMiB); }
  void TearDown() override {
    pool_.reset();
    counting_.reset();
    sim_.reset();
  }

  std::unique_ptr<SimBackend> sim_;
  std::unique_ptr<CountingAllocBackend> counting_;
  std::unique_ptr<MemoryPool> pool_;
};

TEST(MemoryPoolRoundTest, SmallSizesRoundTo512Bytes) {
  EXPECT_EQ(MemoryPool::RoundSize(0), 512u);
  EXPECT_EQ(MemoryPool::RoundSize(1), 512u);
  EXPECT_EQ(MemoryPool::RoundSize(512), 512u);
  EXPECT_EQ(MemoryPool::RoundSize(513), 1024u);
  EXPECT_EQ(MemoryPool::RoundSize(1 * kMiB), 1 * kMiB);
  EXPECT_EQ(MemoryPool::RoundSize(1 * kMiB - 1), 1 * kMiB);
}

TEST(MemoryPoolRoundTest, LargeSizesUseEighthsOfAPowerOfTwo) {
  EXPECT_EQ(MemoryPool::RoundSize(1 * kMiB + 1), 1 * kMiB + 128 * kKiB);
  EXPECT_EQ(MemoryPool::RoundSize(2 * kMiB), 2 * kMiB);
  EXPECT_EQ(MemoryPool::RoundSize(3 * kMiB + 1), 3 * kMiB + 256 * kKiB);
  EXPECT_EQ(MemoryPool::RoundSize(uint64_t{5} << 30), uint64_t{5} << 30);
  // The documented bound: never more than 1/8 of a large request wasted.
  for (uint64_t bytes = kMiB + 1; bytes < (uint64_t{1} << 34);
       bytes = bytes * 3 / 2 + 7) {
    const uint64_t rounded = MemoryPool::RoundSize(bytes);
    EXPECT_GE(rounded, bytes);
    EXPECT_LE(rounded - bytes, bytes / 8) << bytes;
  }
  // No overflow near the top of the range.
  const uint64_t huge = std::numeric_limits<uint64_t>::max() - 3;
  EXPECT_GE(MemoryPool::RoundSize(huge), huge);
}

TEST_F(MemoryPoolTest, SecondAllocationOfASizeIsACacheHit) {
  DevicePtr a = pool_->Allocate(1000).value();
  EXPECT_EQ(a.device, 1);
  EXPECT_EQ(pool_->stats().in_use_bytes, 1024u);
  EXPECT_EQ(sim_->memory_used_bytes(1), 1024u);
  ASSERT_TRUE(pool_->Free(a).ok());
  MemoryPoolStats s = pool_->stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, 1024u);
  EXPECT_EQ(sim_->memory_used_bytes(1), 1024u);  // still held, for reuse
  // Same class (513..1024 bytes): served from the cache.
  DevicePtr b = pool_->Allocate(600).value();
  EXPECT_EQ(b.address, a.address);
  s = pool_->stats();
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.backend_allocations, 1u);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.in_use_bytes, 1024u);
  EXPECT_EQ(counting_->allocate_calls.load(), 1);
  ASSERT_TRUE(pool_->Free(b).ok());
}

TEST_F(MemoryPoolTest, SmallRequestsDoNotTakeLargerClasses) {
  DevicePtr a = pool_->Allocate(4096).value();
  ASSERT_TRUE(pool_->Free(a).ok());
  DevicePtr b = pool_->Allocate(512).value();
  EXPECT_NE(b.address, a.address);
  EXPECT_EQ(pool_->stats().cache_hits, 0u);
  EXPECT_EQ(counting_->allocate_calls.load(), 2);
  ASSERT_TRUE(pool_->Free(b).ok());
}

TEST_F(MemoryPoolTest, LargeRequestsTakeTheBestFitWithinAnEighth) {
  // Classes 4 MiB and 4.5 MiB cached; a 4 MiB request takes 4 MiB, a
  // 3.9 MiB request (class 4 MiB) then takes 4.5 MiB (within 1/8), and a
  // 3 MiB request takes neither.
  DevicePtr big = pool_->Allocate(4 * kMiB + 512 * kKiB).value();
  DevicePtr exact = pool_->Allocate(4 * kMiB).value();
  ASSERT_TRUE(pool_->Free(big).ok());
  ASSERT_TRUE(pool_->Free(exact).ok());
  DevicePtr first = pool_->Allocate(4 * kMiB).value();
  EXPECT_EQ(first.address, exact.address);
  DevicePtr second = pool_->Allocate(4 * kMiB - 100 * kKiB).value();
  EXPECT_EQ(second.address, big.address);
  EXPECT_EQ(pool_->stats().cache_hits, 2u);
  ASSERT_TRUE(pool_->Free(first).ok());
  DevicePtr third = pool_->Allocate(3 * kMiB).value();
  EXPECT_NE(third.address, first.address);
  EXPECT_EQ(pool_->stats().cache_hits, 2u);
  EXPECT_EQ(counting_->allocate_calls.load(), 3);
  ASSERT_TRUE(pool_->Free(second).ok());
  ASSERT_TRUE(pool_->Free(third).ok());
}

TEST_F(MemoryPoolTest, OutOfMemoryReleasesTheCacheAndRetries) {
  Make(4 * kMiB);
  DevicePtr a = pool_->Allocate(3 * kMiB).value();
  ASSERT_TRUE(pool_->Free(a).ok());
  EXPECT_EQ(pool_->stats().cached_bytes, 3 * kMiB);
  // 2 MiB does not fit beside the cached 3 MiB (nor may it take the 3 MiB
  // block): the cache goes back to the device and the retry succeeds.
  DevicePtr b = pool_->Allocate(2 * kMiB).value();
  MemoryPoolStats s = pool_->stats();
  EXPECT_EQ(s.oom_releases, 1u);
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.in_use_bytes, 2 * kMiB);
  EXPECT_EQ(s.backend_allocations, 2u);
  EXPECT_EQ(s.backend_frees, 1u);
  EXPECT_EQ(s.failures, 0u);
  EXPECT_EQ(sim_->memory_used_bytes(1), 2 * kMiB);
  EXPECT_EQ(counting_->allocate_calls.load(), 3);  // 3 MiB, 2 MiB twice
  ASSERT_TRUE(pool_->Free(b).ok());
}

TEST_F(MemoryPoolTest, FailureNamesDeviceBytesAndPoolState) {
  Make(4 * kMiB);
  DevicePtr held = pool_->Allocate(2 * kMiB).value();
  DevicePtr cached = pool_->Allocate(512 * kKiB).value();
  ASSERT_TRUE(pool_->Free(cached).ok());
  absl::StatusOr<DevicePtr> too_big = pool_->Allocate(3 * kMiB);
  ASSERT_FALSE(too_big.ok());
  EXPECT_THAT(
      too_big.status(),
      StatusIs(
          absl::StatusCode::kResourceExhausted,
          AllOf(HasSubstr("device 1 is out of memory: requested 3145728 bytes"),
                HasSubstr("2097152 bytes in use by jobs and 0 bytes cached "
                          "(524288 cached bytes released to retry)"))));
  // The backend's own reason follows.
  EXPECT_THAT(too_big.status().message(), HasSubstr("bytes free of 4194304"));
  MemoryPoolStats s = pool_->stats();
  EXPECT_EQ(s.failures, 1u);
  EXPECT_EQ(s.oom_releases, 1u);
  EXPECT_EQ(s.in_use_bytes, 2 * kMiB);
  // The pool still works.
  ASSERT_TRUE(pool_->Free(held).ok());
  EXPECT_TRUE(pool_->Allocate(3 * kMiB).ok());
}

TEST_F(MemoryPoolTest, FallsBackToTheExactSizeWhenTheClassDoesNotFit) {
  // 2.1 MiB rounds to 2.25 MiB, which a 2.2 MiB device cannot hold.
  const uint64_t capacity = 2 * kMiB + 200 * kKiB;
  Make(capacity);
  const uint64_t bytes = 2 * kMiB + 100 * kKiB;
  ASSERT_GT(MemoryPool::RoundSize(bytes), capacity);
  DevicePtr a = pool_->Allocate(bytes).value();
  EXPECT_EQ(pool_->stats().in_use_bytes, bytes);
  ASSERT_TRUE(pool_->Free(a).ok());
  // Cached under its real size, and reused for the same request.
  EXPECT_EQ(pool_->Allocate(bytes).value().address, a.address);
}

TEST_F(MemoryPoolTest, CapEvictsTheLeastRecentlyCachedBlocks) {
  Make(64 * kMiB, /*max_cached=*/2 * kKiB);
  DevicePtr a = pool_->Allocate(1024).value();
  DevicePtr b = pool_->Allocate(1024).value();
  DevicePtr c = pool_->Allocate(1024).value();
  DevicePtr huge = pool_->Allocate(4096).value();
  ASSERT_TRUE(pool_->Free(a).ok());
  ASSERT_TRUE(pool_->Free(b).ok());
  EXPECT_EQ(pool_->stats().cached_bytes, 2048u);
  ASSERT_TRUE(pool_->Free(c).ok());  // a goes back to the device
  MemoryPoolStats s = pool_->stats();
  EXPECT_EQ(s.cached_bytes, 2048u);
  EXPECT_EQ(s.backend_frees, 1u);
  ASSERT_TRUE(pool_->Free(huge).ok());  // larger than the cap: not cached
  s = pool_->stats();
  EXPECT_EQ(s.cached_bytes, 2048u);
  EXPECT_EQ(s.backend_frees, 2u);
  EXPECT_EQ(sim_->memory_used_bytes(1), 2048u);
  // What remains cached is b and c.
  const uint64_t x = pool_->Allocate(1024).value().address;
  const uint64_t y = pool_->Allocate(1024).value().address;
  EXPECT_TRUE((x == b.address && y == c.address) ||
              (x == c.address && y == b.address));
}

TEST_F(MemoryPoolTest, ZeroCapDisablesCaching) {
  Make(64 * kMiB, /*max_cached=*/0);
  DevicePtr a = pool_->Allocate(1024).value();
  ASSERT_TRUE(pool_->Free(a).ok());
  EXPECT_EQ(pool_->stats().cached_bytes, 0u);
  EXPECT_EQ(sim_->memory_used_bytes(1), 0u);
  pool_->Allocate(1024).value();
  EXPECT_EQ(pool_->stats().cache_hits, 0u);
  EXPECT_EQ(counting_->allocate_calls.load(), 2);
}

TEST_F(MemoryPoolTest, FreeUncachedAndReleaseCachedGoToTheBackend) {
  DevicePtr a = pool_->Allocate(1024).value();
  DevicePtr b = pool_->Allocate(1024).value();
  ASSERT_TRUE(pool_->FreeUncached(a).ok());
  ASSERT_TRUE(pool_->Free(b).ok());
  EXPECT_EQ(pool_->stats().cached_bytes, 1024u);
  EXPECT_EQ(pool_->ReleaseCached(), 1024u);
  MemoryPoolStats s = pool_->stats();
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.backend_frees, 2u);
  EXPECT_EQ(sim_->memory_used_bytes(1), 0u);
}

TEST_F(MemoryPoolTest, ArenasAreCountedUntilGivenBack) {
  const DevicePtr arena = pool_->AllocateArena(3 * kMiB + 5).value();
  const DevicePtr block = pool_->Allocate(kKiB).value();
  MemoryPoolStats stats = pool_->stats();
  EXPECT_EQ(stats.arenas_in_use, 1u);
  EXPECT_EQ(stats.arena_bytes, 3 * kMiB + 5);
  EXPECT_EQ(stats.arena_allocations, 1u);
  EXPECT_EQ(stats.peak_in_use_bytes, stats.in_use_bytes);
  ASSERT_TRUE(pool_->Free(arena).ok());
  ASSERT_TRUE(pool_->Free(block).ok());
  stats = pool_->stats();
  EXPECT_EQ(stats.arenas_in_use, 0u);
  EXPECT_EQ(stats.arena_bytes, 0u);
  EXPECT_EQ(stats.in_use_bytes, 0u);
  EXPECT_GE(stats.peak_in_use_bytes, 3 * kMiB + 5 + kKiB);
  // The cached block serves the next arena of that size.
  const DevicePtr again = pool_->AllocateArena(3 * kMiB + 5).value();
  EXPECT_EQ(again.address, arena.address);
  EXPECT_EQ(pool_->stats().arena_allocations, 2u);
  ASSERT_TRUE(pool_->FreeUncached(again).ok());
  EXPECT_EQ(pool_->stats().arenas_in_use, 0u);
}

TEST_F(MemoryPoolTest, FreeOfAForeignPointerIsRejected) {
  DevicePtr own = pool_->Allocate(1024).value();
  DevicePtr foreign = sim_->Allocate(1, 1024).value();
  absl::Status s = pool_->Free(foreign);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("was not allocated by the pool")));
  EXPECT_THAT(pool_->Free(DevicePtr{0, own.address}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_TRUE(pool_->Free(own).ok());
  EXPECT_THAT(pool_->Free(own), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_TRUE(sim_->Free(foreign).ok());
}

TEST_F(MemoryPoolTest, DestructionReturnsTheCacheToTheDevice) {
  ASSERT_TRUE(pool_->Free(pool_->Allocate(1 * kMiB).value()).ok());
  EXPECT_EQ(sim_->memory_used_bytes(1), 1 * kMiB);
  pool_.reset();
  EXPECT_EQ(sim_->memory_used_bytes(1), 0u);
}

TEST_F(MemoryPoolTest, StatsCanBeReadWhileAllocating) {
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      const MemoryPoolStats s = pool_->stats();
      // Never more in use than the pool's single user ever holds.
      EXPECT_LE(s.in_use_bytes, 2048u);
    }
  });
  for (int i = 0; i < 2000; ++i) {
    DevicePtr a = pool_->Allocate(1024).value();
    DevicePtr b = pool_->Allocate(1024).value();
    ASSERT_TRUE(pool_->Free(a).ok());
    ASSERT_TRUE(pool_->Free(b).ok());
  }
  stop.store(true);
  reader.join();
  const MemoryPoolStats s = pool_->stats();
  EXPECT_EQ(s.backend_allocations, 2u);
  EXPECT_EQ(s.cache_hits, 3998u);
}

}  // namespace
}  // namespace weft::runtime
