#include "common/json_string.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace weft {
namespace {

TEST(JsonStringTest, QuotesPlainText) {
  EXPECT_EQ(JsonString("plain"), "\"plain\"");
  EXPECT_EQ(JsonString(""), "\"\"");
}

TEST(JsonStringTest, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(JsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonString("x\ny\tz\x01"), "\"x\\ny\\tz\\u0001\"");
  EXPECT_EQ(JsonString("a\rb"), "\"a\\rb\"");
  EXPECT_EQ(JsonString(std::string("\0\x1f", 2)), "\"\\u0000\\u001f\"");
}

TEST(JsonStringTest, PassesUtf8Through) {
  EXPECT_EQ(JsonString("\xc3\xa9"), "\"\xc3\xa9\"");
  EXPECT_EQ(JsonString("\x7f"), "\"\x7f\"");
}

TEST(JsonEscapeTest, IsJsonStringWithoutQuotes) {
  for (const char* s : {"", "plain", "a\"b\\c", "x\ny\r\t\x02", "\xc3\xa9"}) {
    EXPECT_EQ(absl::StrCat("\"", JsonEscape(s), "\""), JsonString(s)) << s;
  }
}

}  // namespace
}  // namespace weft
