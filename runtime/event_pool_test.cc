#include "runtime/event_pool.h"

#include <memory>

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
  options.num_devices = 1;
  return SimBackend::Create(options).value();
}

TEST(EventPoolTest, RecyclesLastInFirstOut) {
  auto backend = MakeBackend();
  EventPool pool(backend.get(), 0);
  EventHandle a = pool.Acquire().value();
  EventHandle b = pool.Acquire().value();
  EXPECT_NE(a.value, b.value);
  EXPECT_EQ(pool.in_use(), 2);
  pool.Release(b);
  pool.Release(a);
  EXPECT_EQ(pool.in_use(), 0);
  EXPECT_EQ(pool.total(), 2);
  EXPECT_EQ(pool.Acquire().value(), a);
  EXPECT_EQ(pool.Acquire().value(), b);
  EXPECT_EQ(backend->event_count(), 2);
}

// A batch goes back as if released one by one in its order.
TEST(EventPoolTest, ReleasesABatchInItsOrder) {
  auto backend = MakeBackend();
  EventPool pool(backend.get(), 0);
  const EventHandle a = pool.Acquire().value();
  const EventHandle b = pool.Acquire().value();
  const EventHandle c = pool.Acquire().value();
  const EventHandle batch[] = {c, EventHandle{}, b, a};
  pool.Release(batch);
  EXPECT_EQ(pool.in_use(), 0);
  EXPECT_EQ(pool.total(), 3);
  EXPECT_EQ(pool.Acquire().value(), a);
  EXPECT_EQ(pool.Acquire().value(), b);
  EXPECT_EQ(pool.Acquire().value(), c);
}

TEST(EventPoolTest, RecycledEventWorks) {
  auto backend = MakeBackend();
  EventPool pool(backend.get(), 0);
  StreamHandle s = backend->CreateStream(0).value();
  EventHandle e = pool.Acquire().value();
  KernelLaunch spin;
  spin.op = "spin";
  ASSERT_TRUE(backend->Launch(spin, s).ok());
  ASSERT_TRUE(backend->RecordEvent(e, s).ok());
  ASSERT_TRUE(backend->SynchronizeStream(s).ok());
  pool.Release(e);
  EventHandle again = pool.Acquire().value();
  ASSERT_EQ(again, e);
  EXPECT_TRUE(backend->QueryEvent(again).value());
  pool.Release(again);
}

TEST(EventPoolTest, DestroysFreeEvents) {
  auto backend = MakeBackend();
  {
    EventPool pool(backend.get(), 0);
    pool.Release(pool.Acquire().value());
    EXPECT_EQ(backend->event_count(), 1);
  }
  EXPECT_EQ(backend->event_count(), 0);
}

TEST(EventPoolTest, ReportsBackendFailure) {
  auto backend = MakeBackend();
  EventPool pool(backend.get(), 3);
  auto e = pool.Acquire();
  EXPECT_THAT(e.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("device 3")));
  EXPECT_EQ(pool.in_use(), 0);
}

}  // namespace
}  // namespace weft::runtime
