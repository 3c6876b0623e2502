#include "server/memory_trimmer.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace weft::server {
namespace {

TEST(MemoryTrimmerTest, TrimsOnceForRequestsCloseTogether) {
  MemoryTrimmer trimmer(absl::Milliseconds(50));
  EXPECT_EQ(trimmer.trims(), 0);
  trimmer.Request();
  trimmer.Request();
  trimmer.Request();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (trimmer.trims() == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(trimmer.trims(), 1);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(trimmer.trims(), 1);  // nothing more was asked
}

TEST(MemoryTrimmerTest, DestructionDoesNotWaitForAPendingTrim) {
  const absl::Time start = absl::Now();
  {
    MemoryTrimmer trimmer(absl::Hours(1));
    trimmer.Request();
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace weft::server
