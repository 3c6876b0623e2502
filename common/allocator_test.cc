#include "common/allocator.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace weft {
namespace {

// Resident set size in KiB, from /proc.
long ResidentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// This test links tcmalloc, as weftd does (BUILD: `malloc`).
TEST(AllocatorTest, WeftdsAllocatorIsTcmalloc) {
  EXPECT_EQ(AllocatorName(), "tcmalloc");
}

TEST(AllocatorTest, FreedPagesGoBackToTheSystemWhenReleased) {
  const long before = ResidentKiB();
  ASSERT_GT(before, 0);
  // 256 MiB in 1 MiB blocks, touched, then freed.
  constexpr int kBlocks = 256;
  void* blocks[kBlocks];
  for (void*& b : blocks) {
    b = std::malloc(1 << 20);
    ASSERT_NE(b, nullptr);
    std::memset(b, 1, 1 << 20);
  }
  EXPECT_GT(ResidentKiB(), before + 200 * 1024);
  for (void* b : blocks) std::free(b);
  ReleaseFreeMemory();
  EXPECT_LT(ResidentKiB(), before + 32 * 1024);
}

}  // namespace
}  // namespace weft
