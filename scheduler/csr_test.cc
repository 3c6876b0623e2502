#include "scheduler/csr.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

Csr FromRows(const std::vector<std::vector<int32_t>>& rows) {
  Csr csr;
  for (const auto& row : rows) csr.AppendRow(row);
  return csr;
}

TEST(CsrTest, EmptyHasNoRows) {
  Csr csr;
  EXPECT_EQ(csr.rows(), 0);
  EXPECT_THAT(csr.Transpose(3).Row(2), IsEmpty());
}

TEST(CsrTest, AppendedRowsReadBack) {
  Csr csr = FromRows({{3, 1}, {}, {7}});
  ASSERT_EQ(csr.rows(), 3);
  EXPECT_THAT(csr.Row(0), ElementsAre(3, 1));
  EXPECT_THAT(csr.Row(1), IsEmpty());
  EXPECT_THAT(csr.Row(2), ElementsAre(7));
  EXPECT_THAT(csr.items, ElementsAre(3, 1, 7));
}

TEST(CsrTest, Transpose) {
  Csr preds = FromRows({{}, {0}, {0, 1}, {1}});
  Csr succs = preds.Transpose(4);
  ASSERT_EQ(succs.rows(), 4);
  EXPECT_THAT(succs.Row(0), ElementsAre(1, 2));
  EXPECT_THAT(succs.Row(1), ElementsAre(2, 3));
  EXPECT_TRUE(succs.Row(2).empty());
  EXPECT_TRUE(succs.Row(3).empty());
}

TEST(CsrTest, WellFormed) {
  EXPECT_TRUE(Csr().WellFormed());
  EXPECT_TRUE(FromRows({{1, 2}, {}, {3}}).WellFormed());
  Csr bad = FromRows({{1, 2}, {}, {3}});
  bad.offsets[0] = 1;  // does not start at 0
  EXPECT_FALSE(bad.WellFormed());
  bad = FromRows({{1, 2}, {}, {3}});
  bad.offsets[2] = 1;  // goes down
  EXPECT_FALSE(bad.WellFormed());
  bad = FromRows({{1, 2}, {}, {3}});
  bad.items.pop_back();  // ends past the items
  EXPECT_FALSE(bad.WellFormed());
  bad.offsets.clear();  // no rows, not even the leading 0
  EXPECT_FALSE(bad.WellFormed());
}

TEST(CsrTest, EqualityComparesRowsAndItems) {
  EXPECT_EQ(FromRows({{1}, {}}), FromRows({{1}, {}}));
  EXPECT_NE(FromRows({{1}, {}}), FromRows({{}, {1}}));
  EXPECT_NE(FromRows({{1}}), FromRows({{2}}));
}

}  // namespace
}  // namespace weft::scheduler
