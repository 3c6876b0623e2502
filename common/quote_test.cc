#include "common/quote.h"

#include <string>

#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(QuoteTest, ShortPrintableTextIsQuotedAsIs) {
  EXPECT_EQ(Quote("buffer_1"), "'buffer_1'");
  EXPECT_EQ(Quote(""), "''");
}

TEST(QuoteTest, EscapesQuotesBackslashesAndUnprintableBytes) {
  EXPECT_EQ(Quote("it's"), "'it\\'s'");
  EXPECT_EQ(Quote("a\\b"), "'a\\\\b'");
  EXPECT_EQ(Quote(std::string("a\n\0\xff", 4)), "'a\\x0a\\x00\\xff'");
}

TEST(QuoteTest, LongInputIsCutAndItsLengthGiven) {
  const std::string big(4 << 20, 'a');
  const std::string quoted = Quote(big);
  EXPECT_LT(quoted.size(), 100u);
  EXPECT_EQ(quoted,
            "'" + std::string(kQuoteMaxBytes, 'a') + "'... (4194304 bytes)");
  EXPECT_EQ(Quote("abcdef", 3), "'abc'... (6 bytes)");
  EXPECT_EQ(Quote("abc", 3), "'abc'");
}

}  // namespace
}  // namespace weft
