#include "common/thread_time.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(ThreadSecondsTest, CountsWorkNotSleep) {
  const double start = ThreadSeconds();
  EXPECT_GE(start, 0.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double after_sleep = ThreadSeconds();
  EXPECT_LT(after_sleep - start, 0.04);

  volatile double sink = 0;
  double now = after_sleep;
  while (now - after_sleep < 0.01) {
    for (int i = 0; i < 10000; ++i) sink = sink + i;
    now = ThreadSeconds();
  }
  EXPECT_GE(now - after_sleep, 0.01);
}

}  // namespace
}  // namespace weft
