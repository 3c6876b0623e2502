#include "runtime/host_buffer.h"

#include <string>

#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

TEST(HostBufferTest, ADenseBufferHoldsEveryByte) {
  const HostBuffer b(std::string("abcdef"));
  EXPECT_EQ(b.size(), 6u);
  EXPECT_EQ(b.stored_bytes(), 6u);
  EXPECT_EQ(b.ToString(), "abcdef");
  EXPECT_EQ(b.Read(2, 3), "cde");
  EXPECT_EQ(b.Read(4, 100), "ef");
  EXPECT_EQ(b.Read(6, 1), "");
}

TEST(HostBufferTest, TheZeroTailTakesNoMemoryAndReadsAsZeros) {
  const HostBuffer b(std::string("ab"), uint64_t{1} << 40);
  EXPECT_EQ(b.size(), uint64_t{1} << 40);
  EXPECT_EQ(b.stored_bytes(), 2u);
  EXPECT_EQ(b.Read(0, 4), std::string("ab\0\0", 4));
  EXPECT_EQ(b.Read(uint64_t{1} << 39, 3), std::string(3, '\0'));
  const HostBuffer small(std::string("xyz"), 5);
  EXPECT_EQ(small.ToString(), std::string("xyz\0\0", 5));
  // Stored bytes beyond the size are cut.
  EXPECT_EQ(HostBuffer(std::string("abcdef"), 3).ToString(), "abc");
}

TEST(HostBufferTest, EqualityIsOverTheBytes) {
  EXPECT_EQ(HostBuffer(std::string("ab\0\0", 4)), HostBuffer("ab", 4));
  EXPECT_EQ(HostBuffer("", 4), HostBuffer(std::string(4, '\0')));
  EXPECT_NE(HostBuffer("ab", 4), HostBuffer("ab", 5));
  EXPECT_NE(HostBuffer("ab", 4), HostBuffer("ac", 4));
  EXPECT_NE(HostBuffer(std::string("ab\0x", 4)), HostBuffer("ab", 4));
}

TEST(HostBufferTest, ResetGivesRoomForTheStoredBytes) {
  HostBuffer b(std::string("old"));
  char* room = b.Reset(2, 10);
  room[0] = 'h';
  room[1] = 'i';
  EXPECT_EQ(b.size(), 10u);
  EXPECT_EQ(b.stored_bytes(), 2u);
  EXPECT_EQ(b.ToString(), std::string("hi\0\0\0\0\0\0\0\0", 10));
}

}  // namespace
}  // namespace weft::runtime
