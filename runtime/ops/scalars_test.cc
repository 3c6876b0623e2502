#include "runtime/ops/scalars.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <variant>

#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

// Stands for any argument variant: a non-scalar first, then the scalars.
using Arg = std::variant<std::string, float, double, int32_t, int64_t>;
using Other = std::variant<char, float, double, int32_t, int64_t>;

TEST(ScalarsTest, AsDoubleConvertsEveryScalar) {
  EXPECT_EQ(ScalarAsDouble(Arg(1.5f)), 1.5);
  EXPECT_EQ(ScalarAsDouble(Arg(-2.25)), -2.25);
  EXPECT_EQ(ScalarAsDouble(Arg(int32_t{-7})), -7);
  EXPECT_EQ(ScalarAsDouble(Arg(int64_t{1} << 40)), 1099511627776.0);
  EXPECT_EQ(ScalarAsDouble(Arg(std::string("x"))), 0);
}

TEST(ScalarsTest, AsInt64IsExactForIntegersAndTruncatesFloats) {
  EXPECT_EQ(ScalarAsInt64(Arg(int64_t{9007199254740993})),
            9007199254740993);  // not a double
  EXPECT_EQ(ScalarAsInt64(Arg(int32_t{-3})), -3);
  EXPECT_EQ(ScalarAsInt64(Arg(2.9)), 2);
  EXPECT_EQ(ScalarAsInt64(Arg(-2.9f)), -2);
}

TEST(ScalarsTest, AsInt64SaturatesAndMapsNanToZero) {
  EXPECT_EQ(ScalarAsInt64(Arg(1e300)), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ScalarAsInt64(Arg(-1e300)), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ScalarAsInt64(Arg(std::nan(""))), 0);
}

TEST(ScalarsTest, SaturateInt32ClampsToTheRange) {
  EXPECT_EQ(SaturateInt32(int64_t{1} << 40),
            std::numeric_limits<int32_t>::max());
  EXPECT_EQ(SaturateInt32(-(int64_t{1} << 40)),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(SaturateInt32(-5), -5);
}

TEST(ScalarsTest, ConvertScalarKeepsTheAlternative) {
  EXPECT_EQ(std::get<int32_t>(ConvertScalar<Other>(Arg(int32_t{4}))), 4);
  EXPECT_EQ(std::get<int64_t>(ConvertScalar<Other>(Arg(int64_t{4}))), 4);
  EXPECT_EQ(std::get<float>(ConvertScalar<Other>(Arg(0.5f))), 0.5f);
  EXPECT_EQ(std::get<double>(ConvertScalar<Other>(Arg(0.5))), 0.5);
  EXPECT_TRUE(
      std::holds_alternative<char>(ConvertScalar<Other>(Arg(std::string()))));
}

template <typename T>
T ElementOf(const FillPattern& p) {
  EXPECT_EQ(p.bytes, static_cast<int>(sizeof(T)));
  T v;
  std::memcpy(&v, &p.bits, sizeof(T));
  return v;
}

TEST(ScalarsTest, FillPatternIsOneElementOfTheDtype) {
  using scheduler::DType;
  EXPECT_EQ(ElementOf<unsigned char>(*FillPatternOf(DType::kBytes, Arg(257))),
            1);
  EXPECT_EQ(ElementOf<unsigned char>(*FillPatternOf(DType::kBytes, Arg(-1.5))),
            255);
  EXPECT_EQ(ElementOf<float>(*FillPatternOf(DType::kFloat32, Arg(0.1))), 0.1f);
  EXPECT_EQ(ElementOf<double>(*FillPatternOf(DType::kFloat64, Arg(0.1f))),
            static_cast<double>(0.1f));
  EXPECT_EQ(
      ElementOf<int32_t>(*FillPatternOf(DType::kInt32, Arg(int64_t{1} << 40))),
      std::numeric_limits<int32_t>::max());
  EXPECT_EQ(ElementOf<int32_t>(*FillPatternOf(DType::kInt32, Arg(-2.7f))), -2);
  EXPECT_EQ(ElementOf<int64_t>(
                *FillPatternOf(DType::kInt64, Arg(int64_t{9007199254740993}))),
            9007199254740993);
  EXPECT_EQ(FillPatternOf(static_cast<DType>(99), Arg(1.0)), std::nullopt);
}

}  // namespace
}  // namespace weft::runtime
