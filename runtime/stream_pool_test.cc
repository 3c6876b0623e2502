#include "runtime/stream_pool.h"

#include <limits>
#include <memory>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

std::unique_ptr<SimBackend> MakeBackend() {
  SimBackend::Options options;
  options.num_devices = 2;
  return SimBackend::Create(options).value();
}

TEST(StreamPoolTest, ReusesFreeStreamsFirstInFirstOut) {
  auto backend = MakeBackend();
  StreamPool pool(backend.get(), 1, 8);
  StreamHandle a = pool.Acquire().value();
  StreamHandle b = pool.Acquire().value();
  StreamHandle c = pool.Acquire().value();
  EXPECT_EQ(pool.total(), 3);
  EXPECT_EQ(pool.busy(), 3);
  pool.Release(b);
  pool.Release(a);
  EXPECT_EQ(pool.busy(), 1);
  EXPECT_EQ(pool.Acquire().value(), b);
  EXPECT_EQ(pool.Acquire().value(), a);
  EXPECT_EQ(pool.total(), 3);
  EXPECT_EQ(backend->stream_count(), 3);
  pool.Release(c);
  EXPECT_EQ(pool.busy(), 2);
}

TEST(StreamPoolTest, SharesLeastHeldStreamAtTheCap) {
  auto backend = MakeBackend();
  StreamPool pool(backend.get(), 0, 2);
  StreamHandle a = pool.Acquire().value();
  StreamHandle b = pool.Acquire().value();
  EXPECT_EQ(pool.Acquire().value(), a);  // tie: oldest
  EXPECT_EQ(pool.Acquire().value(), b);  // a now has two holders
  EXPECT_EQ(pool.total(), 2);
  EXPECT_EQ(pool.busy(), 2);
  pool.Release(a);
  EXPECT_EQ(pool.busy(), 2);  // still one holder
  pool.Release(a);
  EXPECT_EQ(pool.busy(), 1);
  EXPECT_EQ(pool.Acquire().value(), a);  // free again, preferred to sharing
  EXPECT_EQ(backend->stream_count(), 2);
}

TEST(StreamPoolTest, AcquireUnsharedNeverShares) {
  auto backend = MakeBackend();
  StreamPool pool(backend.get(), 0, 2);
  std::optional<StreamHandle> a = pool.AcquireUnshared().value();
  std::optional<StreamHandle> b = pool.AcquireUnshared().value();
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());
  EXPECT_FALSE(*a == *b);
  // At the cap with nothing free: no stream rather than a shared one.
  EXPECT_FALSE(pool.AcquireUnshared().value().has_value());
  EXPECT_EQ(pool.total(), 2);
  pool.Release(*a);
  std::optional<StreamHandle> again = pool.AcquireUnshared().value();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *a);
  EXPECT_EQ(pool.busy(), 2);
}

TEST(StreamPoolTest, RetiresUnhealthyStreamsAfterLastHolder) {
  auto backend = MakeBackend();
  StreamPool pool(backend.get(), 0, 1);
  StreamHandle a = pool.Acquire().value();
  EXPECT_EQ(pool.Acquire().value(), a);  // shared at the cap of one
  pool.Release(a, /*healthy=*/false);
  EXPECT_EQ(backend->stream_count(), 1);  // other holder still uses it
  StreamHandle b = pool.Acquire().value();
  EXPECT_NE(b.value, a.value);  // never handed out again
  EXPECT_EQ(pool.total(), 2);
  pool.Release(a);
  EXPECT_EQ(pool.total(), 1);
  EXPECT_EQ(backend->stream_count(), 1);
  pool.Release(a);  // already gone: ignored
  EXPECT_EQ(pool.busy(), 1);
}

TEST(StreamPoolTest, ReportsBackendFailure) {
  auto backend = MakeBackend();
  StreamPool pool(backend.get(), 7, 4);
  auto s = pool.Acquire();
  EXPECT_THAT(s.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("device 7 does not exist")));
  EXPECT_EQ(pool.total(), 0);
}

TEST(StreamPoolTest, DestroysItsStreams) {
  auto backend = MakeBackend();
  {
    StreamPool pool(backend.get(), 0, 4);
    StreamHandle a = pool.Acquire().value();
    pool.Acquire().value();
    pool.Release(a);
    EXPECT_EQ(backend->stream_count(), 2);
  }
  EXPECT_EQ(backend->stream_count(), 0);
}

TEST(StreamPoolTest, FencedStreamsAreNotSharedUntilUnfenced) {
  auto backend = MakeBackend();
  StreamPool pool(backend.get(), 0, 2);
  StreamHandle a = pool.Acquire().value();
  StreamHandle b = pool.Acquire().value();
  pool.Fence(a);
  EXPECT_EQ(pool.fenced(), 1);
  // At the cap: only the unfenced stream is shared.
  EXPECT_EQ(pool.Acquire().value(), b);
  EXPECT_EQ(pool.Acquire().value(), b);
  pool.Fence(b);
  absl::StatusOr<StreamHandle> none = pool.Acquire();
  EXPECT_THAT(none.status(), StatusIs(absl::StatusCode::kUnavailable,
                                      HasSubstr("device 0: all 2 streams")));
  pool.Unfence(a);
  EXPECT_EQ(pool.fenced(), 1);
  EXPECT_EQ(pool.Acquire().value(), a);
  // Released, a fenced stream's fence goes with its last holder.
  pool.Release(b);
  pool.Release(b);
  pool.Release(b);
  EXPECT_EQ(pool.fenced(), 0);
  EXPECT_EQ(pool.Acquire().value(), b);
}

}  // namespace
}  // namespace weft::runtime
