#include "runtime/ops/cpu_kernels.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::weft::testing::StatusIs;

using scheduler::Access;
using scheduler::DType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
HostBufferArg View(std::vector<T>& v, DType dtype,
                   Access access = Access::kReadWrite) {
  return HostBufferArg{v.data(), v.size() * sizeof(T), dtype, access};
}

TEST(CpuKernelsTest, FillFloat32) {
  std::vector<float> out(5, -1.0f);
  CpuKernelTable table = CpuKernelTable::WithBuiltins();
  ASSERT_TRUE(table.Run("fill", {View(out, DType::kFloat32), 2.5}).ok());
  EXPECT_THAT(out, ElementsAre(2.5f, 2.5f, 2.5f, 2.5f, 2.5f));
}

TEST(CpuKernelsTest, FillEveryDtype) {
  std::vector<double> f64(3);
  ASSERT_TRUE(FillKernel({View(f64, DType::kFloat64), int32_t{7}}).ok());
  EXPECT_THAT(f64, ElementsAre(7.0, 7.0, 7.0));

  std::vector<int32_t> i32(2);
  ASSERT_TRUE(FillKernel({View(i32, DType::kInt32), -3.9f}).ok());
  EXPECT_THAT(i32, ElementsAre(-3, -3));

  std::vector<int64_t> i64(2);
  const int64_t big = (int64_t{1} << 60) + 3;  // not exact in double
  ASSERT_TRUE(FillKernel({View(i64, DType::kInt64), big}).ok());
  EXPECT_THAT(i64, ElementsAre(big, big));

  std::vector<uint8_t> bytes(4);
  ASSERT_TRUE(FillKernel({View(bytes, DType::kBytes), int64_t{0xAB}}).ok());
  EXPECT_THAT(bytes, ElementsAre(0xAB, 0xAB, 0xAB, 0xAB));
}

TEST(CpuKernelsTest, FillSaturatesInt32) {
  std::vector<int32_t> i32(1);
  ASSERT_TRUE(FillKernel({View(i32, DType::kInt32), 1e20}).ok());
  EXPECT_EQ(i32[0], INT32_MAX);
}

TEST(CpuKernelsTest, FillRejectsBufferValue) {
  std::vector<float> a(1), b(1);
  absl::Status s =
      FillKernel({View(a, DType::kFloat32), View(b, DType::kFloat32)});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("fill: argument 1 must be a scalar"));
}

TEST(CpuKernelsTest, CopyCopiesSourcePrefix) {
  std::vector<uint8_t> src = {1, 2, 3};
  std::vector<uint8_t> dst = {9, 9, 9, 9, 9};
  ASSERT_TRUE(
      CopyKernel({View(src, DType::kBytes), View(dst, DType::kBytes)}).ok());
  EXPECT_THAT(dst, ElementsAre(1, 2, 3, 9, 9));
}

TEST(CpuKernelsTest, CopyRejectsSmallDestination) {
  std::vector<uint8_t> src(8), dst(4);
  absl::Status s =
      CopyKernel({View(src, DType::kBytes), View(dst, DType::kBytes)});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("smaller than source"));
}

TEST(CpuKernelsTest, AxpyOverShorterLength) {
  std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> y = {10, 20, 30};
  ASSERT_TRUE(AxpyKernel({2.0f, View(x, DType::kFloat32, Access::kRead),
                          View(y, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(y, ElementsAre(12, 24, 36));
}

TEST(CpuKernelsTest, AxpyAcceptsIntegerScalar) {
  std::vector<float> x = {1, 1};
  std::vector<float> y = {0, 1};
  ASSERT_TRUE(AxpyKernel({int64_t{-3}, View(x, DType::kFloat32),
                          View(y, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(y, ElementsAre(-3, -2));
}

TEST(CpuKernelsTest, AxpyRejectsWrongDtype) {
  std::vector<double> x = {1};
  std::vector<float> y = {1};
  absl::Status s =
      AxpyKernel({1.0f, View(x, DType::kFloat64), View(y, DType::kFloat32)});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(),
              HasSubstr("axpy: argument 1 must be float32, got FLOAT64"));
}

TEST(CpuKernelsTest, Scale) {
  std::vector<float> x = {1, -2, 0.5};
  ASSERT_TRUE(ScaleKernel({4.0, View(x, DType::kFloat32)}).ok());
  EXPECT_THAT(x, ElementsAre(4, -8, 2));
}

TEST(CpuKernelsTest, AddOverShortest) {
  std::vector<float> a = {1, 2, 3};
  std::vector<float> b = {10, 20};
  std::vector<float> out = {0, 0, 7};
  ASSERT_TRUE(AddKernel({View(a, DType::kFloat32), View(b, DType::kFloat32),
                         View(out, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(out, ElementsAre(11, 22, 7));
}

TEST(CpuKernelsTest, ReduceSumIntoElementZero) {
  std::vector<float> x(1000);
  for (int i = 0; i < 1000; ++i) x[i] = static_cast<float>(i);
  std::vector<float> out = {-1, 5};
  ASSERT_TRUE(
      ReduceSumKernel({View(x, DType::kFloat32), View(out, DType::kFloat32)})
          .ok());
  EXPECT_THAT(out, ElementsAre(499500.0f, 5));
}

TEST(CpuKernelsTest, ReduceSumRejectsTinyOutput) {
  std::vector<float> x = {1};
  std::vector<uint8_t> out(2);
  HostBufferArg out_arg{out.data(), 2, DType::kFloat32, Access::kWrite};
  absl::Status s = ReduceSumKernel({View(x, DType::kFloat32), out_arg});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("at least one float32"));
}

TEST(CpuKernelsTest, AddAndAxpyComputeInPlace) {
  std::vector<float> a = {1, 2, 3};
  std::vector<float> b = {10, 20, 30};
  ASSERT_TRUE(AddKernel({View(a, DType::kFloat32), View(b, DType::kFloat32),
                         View(a, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(a, ElementsAre(11, 22, 33));
  ASSERT_TRUE(AddKernel({View(a, DType::kFloat32), View(a, DType::kFloat32),
                         View(a, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(a, ElementsAre(22, 44, 66));
  ASSERT_TRUE(
      AxpyKernel({0.5f, View(b, DType::kFloat32), View(b, DType::kFloat32)})
          .ok());
  EXPECT_THAT(b, ElementsAre(15, 30, 45));
}

TEST(CpuKernelsTest, ElementwiseRejectsShiftedOverlap) {
  std::vector<float> v = {1, 2, 3, 4};
  HostBufferArg head{v.data(), 12, DType::kFloat32, Access::kRead};
  HostBufferArg tail{v.data() + 1, 12, DType::kFloat32, Access::kWrite};
  absl::Status s = AddKernel({head, head, tail});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("add: argument 2 (the output) overlaps "
                                     "argument 0 without being the same"));
  s = AxpyKernel({1.0f, tail, head});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  s = SubKernel({tail, head, head});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(v, ElementsAre(1, 2, 3, 4));
}

TEST(CpuKernelsTest, SubMulDivElementwise) {
  std::vector<float> a = {6, 8, 9, 1};
  std::vector<float> b = {2, 4, 3, 0};
  std::vector<float> out(4, -1);
  ASSERT_TRUE(SubKernel({View(a, DType::kFloat32), View(b, DType::kFloat32),
                         View(out, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(out, ElementsAre(4, 4, 6, 1));
  ASSERT_TRUE(MulKernel({View(a, DType::kFloat32), View(b, DType::kFloat32),
                         View(out, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(out, ElementsAre(12, 32, 27, 0));
  ASSERT_TRUE(DivKernel({View(a, DType::kFloat32), View(b, DType::kFloat32),
                         View(out, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(out,
              ElementsAre(3, 2, 3, std::numeric_limits<float>::infinity()));
}

TEST(CpuKernelsTest, SubMulDivOverShorterOfAAndOut) {
  std::vector<float> a = {5, 6, 7};
  std::vector<float> b = {1, 1, 1, 1, 1};
  std::vector<float> out = {0, 0, 0, 0, 9};
  ASSERT_TRUE(SubKernel({View(a, DType::kFloat32), View(b, DType::kFloat32),
                         View(out, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(out, ElementsAre(4, 5, 6, 0, 9));  // out[3, 5) untouched
  std::vector<float> short_out = {0, 0};
  ASSERT_TRUE(MulKernel({View(a, DType::kFloat32), View(b, DType::kFloat32),
                         View(short_out, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(short_out, ElementsAre(5, 6));
}

TEST(CpuKernelsTest, SubMulDivBroadcastOneElementB) {
  std::vector<float> a = {2, 4, 6};
  std::vector<float> b = {2};
  std::vector<float> out(3);
  ASSERT_TRUE(SubKernel({View(a, DType::kFloat32), View(b, DType::kFloat32),
                         View(out, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(out, ElementsAre(0, 2, 4));
  ASSERT_TRUE(MulKernel({View(a, DType::kFloat32), View(b, DType::kFloat32),
                         View(out, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(out, ElementsAre(4, 8, 12));
  ASSERT_TRUE(DivKernel({View(a, DType::kFloat32), View(b, DType::kFloat32),
                         View(a, DType::kFloat32)})  // in place
                  .ok());
  EXPECT_THAT(a, ElementsAre(1, 2, 3));
}

TEST(CpuKernelsTest, SubMulDivRejectShortB) {
  std::vector<float> a = {1, 2, 3};
  std::vector<float> b = {1, 2};
  std::vector<float> out(3, 7);
  for (auto kernel : {&SubKernel, &MulKernel, &DivKernel}) {
    absl::Status s = kernel({View(a, DType::kFloat32), View(b, DType::kFloat32),
                             View(out, DType::kFloat32)});
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(s.message(),
                HasSubstr("argument 1 (b) holds 2 float32 elements; it must "
                          "hold one (broadcast) or at least 3"));
  }
  EXPECT_THAT(out, ElementsAre(7, 7, 7));
  std::vector<int32_t> ints(3);
  absl::Status s =
      MulKernel({View(a, DType::kFloat32), View(a, DType::kFloat32),
                 View(ints, DType::kInt32)});
  EXPECT_THAT(s.message(), HasSubstr("mul: argument 2 must be float32"));
}

TEST(CpuKernelsTest, SubMulDivInPlaceOnEitherInput) {
  std::vector<float> r = {10, 20, 30};
  std::vector<float> q = {1, 2, 3};
  ASSERT_TRUE(SubKernel({View(r, DType::kFloat32), View(q, DType::kFloat32),
                         View(r, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(r, ElementsAre(9, 18, 27));
  ASSERT_TRUE(SubKernel({View(r, DType::kFloat32), View(q, DType::kFloat32),
                         View(q, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(q, ElementsAre(8, 16, 24));
  ASSERT_TRUE(MulKernel({View(q, DType::kFloat32), View(q, DType::kFloat32),
                         View(q, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(q, ElementsAre(64, 256, 576));
}

TEST(CpuKernelsTest, BroadcastBInsideALongerOutputIsRejected) {
  std::vector<float> v = {2, 3, 4};
  HostBufferArg first{v.data(), 4, DType::kFloat32, Access::kRead};
  absl::Status s =
      SubKernel({View(v, DType::kFloat32), first, View(v, DType::kFloat32)});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("overlaps argument 1"));
  // A one-element output that is b itself is in place.
  std::vector<float> one = {5};
  ASSERT_TRUE(SubKernel({View(one, DType::kFloat32), View(one, DType::kFloat32),
                         View(one, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(one, ElementsAre(0));
}

TEST(CpuKernelsTest, DotOverShorterLengthInDouble) {
  std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> y = {5, 6, 7};
  std::vector<float> out = {-1, 8};
  ASSERT_TRUE(DotKernel({View(x, DType::kFloat32), View(y, DType::kFloat32),
                         View(out, DType::kFloat32)})
                  .ok());
  EXPECT_THAT(out, ElementsAre(1 * 5 + 2 * 6 + 3 * 7, 8));
  // 1e8 + 1 - 1e8: float32 accumulation would lose the 1.
  std::vector<float> big = {1e8f, 1, -1e8f};
  std::vector<float> ones = {1, 1, 1};
  ASSERT_TRUE(
      DotKernel({View(big, DType::kFloat32), View(ones, DType::kFloat32),
                 View(out, DType::kFloat32)})
          .ok());
  EXPECT_EQ(out[0], 1.0f);
  std::vector<float> empty;
  ASSERT_TRUE(
      DotKernel({View(empty, DType::kFloat32), View(ones, DType::kFloat32),
                 View(out, DType::kFloat32)})
          .ok());
  EXPECT_EQ(out[0], 0.0f);
}

TEST(CpuKernelsTest, DotRejectsAliasedOrTinyOutput) {
  std::vector<float> x = {1, 2};
  std::vector<float> y = {3, 4};
  absl::Status s =
      DotKernel({View(x, DType::kFloat32), View(y, DType::kFloat32),
                 View(y, DType::kFloat32)});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("dot: argument 2 (out) overlaps argument "
                                     "1 (y)"));
  s = DotKernel({View(x, DType::kFloat32), View(y, DType::kFloat32),
                 View(x, DType::kFloat32)});
  EXPECT_THAT(s.message(), HasSubstr("overlaps argument 0 (x)"));
  EXPECT_THAT(y, ElementsAre(3, 4));
  HostBufferArg none{y.data(), 0, DType::kFloat32, Access::kWrite};
  s = DotKernel({View(x, DType::kFloat32), View(y, DType::kFloat32), none});
  EXPECT_THAT(s.message(), HasSubstr("(out) must hold at least one float32"));
}

TEST(CpuKernelsTest, GemvMatchesHandComputation) {
  // A = [[1, 2, 3],
  //      [4, 5, 6],
  //      [7, 8, 9],
  //      [-1, 0, 2]], x = [1, -1, 2]
  std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, -1, 0, 2};
  std::vector<float> x = {1, -1, 2};
  std::vector<float> y = {0, 0, 0, 0, 42};
  ASSERT_TRUE(GemvKernel({int32_t{4}, int32_t{3}, View(a, DType::kFloat32),
                          View(x, DType::kFloat32), View(y, DType::kFloat32)})
                  .ok());
  // 1 - 2 + 6 = 5; 4 - 5 + 12 = 11; 7 - 8 + 18 = 17; -1 + 0 + 4 = 3
  EXPECT_THAT(y, ElementsAre(5, 11, 17, 3, 42));
  // The same A read as 3 x 4 (row-major), x of 4 with int64 dimensions.
  std::vector<float> x4 = {1, 0, 0, 1};
  ASSERT_TRUE(GemvKernel({int64_t{3}, int64_t{4}, View(a, DType::kFloat32),
                          View(x4, DType::kFloat32), View(y, DType::kFloat32)})
                  .ok());
  // rows [1 2 3 4], [5 6 7 8], [9 -1 0 2]
  EXPECT_THAT(y, ElementsAre(5, 13, 11, 3, 42));
}

TEST(CpuKernelsTest, GemvChecksSizesNamingTheArgument) {
  std::vector<float> a(6), x(3), y(2);
  auto run = [&](HostArg rows, HostArg cols) {
    return GemvKernel({rows, cols, View(a, DType::kFloat32),
                       View(x, DType::kFloat32), View(y, DType::kFloat32)});
  };
  EXPECT_TRUE(run(int32_t{2}, int32_t{3}).ok());
  absl::Status s = run(int32_t{3}, int32_t{2});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("gemv: argument 4 (y) holds 2 float32 "
                                     "elements, fewer than rows = 3"));
  s = run(int32_t{1}, int32_t{4});
  EXPECT_THAT(s.message(), HasSubstr("gemv: argument 3 (x) holds 3 float32 "
                                     "elements, fewer than cols = 4"));
  s = run(int32_t{2}, int32_t{4});
  EXPECT_THAT(s.message(), HasSubstr("gemv: argument 2 (A) holds 6 float32 "
                                     "elements, fewer than rows * cols = 8"));
  s = run(int32_t{0}, int32_t{3});
  EXPECT_THAT(s.message(),
              HasSubstr("gemv: argument 0 (rows) must be in [1, 2^31 - 1], "
                        "got 0"));
  s = run(int32_t{2}, 3.0f);
  EXPECT_THAT(s.message(),
              HasSubstr("gemv: argument 1 (cols) must be an integer scalar"));
  s = run(int32_t{2}, int64_t{1} << 31);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CpuKernelsTest, GemvRejectsOutputOverlappingAnInput) {
  std::vector<float> a = {1, 2, 3, 4};
  std::vector<float> x = {1, 1};
  absl::Status s =
      GemvKernel({int32_t{2}, int32_t{2}, View(a, DType::kFloat32),
                  View(x, DType::kFloat32), View(x, DType::kFloat32)});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("gemv: argument 4 (y) overlaps argument "
                                     "3 (x)"));
  HostBufferArg a_tail{a.data() + 2, 8, DType::kFloat32, Access::kWrite};
  s = GemvKernel({int32_t{2}, int32_t{2}, View(a, DType::kFloat32),
                  View(x, DType::kFloat32), a_tail});
  EXPECT_THAT(s.message(), HasSubstr("overlaps argument 2 (A)"));
  EXPECT_THAT(a, ElementsAre(1, 2, 3, 4));
  // Elements past rows * cols are not A's: y may lie there.
  std::vector<float> big = {1, 2, 3, 4, 0, 0};
  HostBufferArg after{big.data() + 4, 8, DType::kFloat32, Access::kWrite};
  ASSERT_TRUE(GemvKernel({int32_t{2}, int32_t{2}, View(big, DType::kFloat32),
                          View(x, DType::kFloat32), after})
                  .ok());
  EXPECT_THAT(big, ElementsAre(1, 2, 3, 4, 3, 7));
}

TEST(CpuKernelsTest, LessAndGreaterWriteAnInt32Flag) {
  std::vector<float> x = {1.5f, 100};
  std::vector<int32_t> flag = {7, 7};
  ASSERT_TRUE(
      LessKernel({View(x, DType::kFloat32), 2.0f, View(flag, DType::kInt32)})
          .ok());
  EXPECT_THAT(flag, ElementsAre(1, 7));  // only x[0] and flag[0] count
  ASSERT_TRUE(GreaterKernel({View(x, DType::kFloat32), int32_t{2},
                             View(flag, DType::kInt32)})
                  .ok());
  EXPECT_THAT(flag, ElementsAre(0, 7));
  ASSERT_TRUE(
      GreaterKernel({View(x, DType::kFloat32), 1.0, View(flag, DType::kInt32)})
          .ok());
  EXPECT_EQ(flag[0], 1);
  ASSERT_TRUE(
      LessKernel({View(x, DType::kFloat32), 1.5f, View(flag, DType::kInt32)})
          .ok());
  EXPECT_EQ(flag[0], 0);  // strict
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN()};
  ASSERT_TRUE(GreaterKernel(
                  {View(nan, DType::kFloat32), 0.0f, View(flag, DType::kInt32)})
                  .ok());
  EXPECT_EQ(flag[0], 0);
}

TEST(CpuKernelsTest, ComparisonsRejectBadArguments) {
  std::vector<float> x = {1};
  std::vector<float> fl = {0};
  std::vector<int32_t> flag = {0};
  absl::Status s =
      LessKernel({View(x, DType::kFloat32), 1.0f, View(fl, DType::kFloat32)});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(),
              HasSubstr("less: argument 2 (flag) must be int32, got FLOAT32"));
  s = GreaterKernel({View(x, DType::kFloat32), View(x, DType::kFloat32),
                     View(flag, DType::kInt32)});
  EXPECT_THAT(s.message(), HasSubstr("greater: argument 1 (t) must be a "
                                     "scalar"));
  std::vector<float> empty;
  s = LessKernel(
      {View(empty, DType::kFloat32), 1.0f, View(flag, DType::kInt32)});
  EXPECT_THAT(s.message(), HasSubstr("(x) must hold at least one float32"));
}

TEST(CpuKernelsTest, SpinLeavesMemoryAlone) {
  std::vector<float> x = {3, 4};
  ASSERT_TRUE(SpinKernel({View(x, DType::kFloat32)}).ok());
  ASSERT_TRUE(SpinKernel({}).ok());
  EXPECT_THAT(x, ElementsAre(3, 4));
  EXPECT_THAT(SpinKernel({1.0f}), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(CpuKernelsTest, WrongArity) {
  std::vector<float> x = {1};
  absl::Status s = ScaleKernel({View(x, DType::kFloat32)});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(s.message(), HasSubstr("scale: expected 2 arguments, got 1"));
}

TEST(CpuKernelTableTest, UnknownOpIsUnimplemented) {
  CpuKernelTable table = CpuKernelTable::WithBuiltins();
  absl::Status s = table.Run("matmul", {});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_THAT(s.message(), HasSubstr("no kernel for op 'matmul'"));
}

TEST(CpuKernelTableTest, HoldsExactlyTheBuiltins) {
  CpuKernelTable table = CpuKernelTable::WithBuiltins();
  for (const char* op :
       {"fill", "copy", "axpy", "scale", "add", "sub", "mul", "div",
        "reduce_sum", "dot", "gemv", "less", "greater", "spin"}) {
    EXPECT_TRUE(table.Contains(op)) << op;
  }
  EXPECT_FALSE(table.Contains("boom"));
  EXPECT_EQ(CpuKernelTable().Find("fill"), nullptr);
}

TEST(CpuKernelTableTest, RegisterCustomAndRejectDuplicate) {
  CpuKernelTable table = CpuKernelTable::WithBuiltins();
  int calls = 0;
  ASSERT_TRUE(table
                  .Register("boom",
                            [&calls](absl::Span<const HostArg>) {
                              ++calls;
                              return absl::InternalError("boom");
                            })
                  .ok());
  EXPECT_THAT(table.Run("boom", {}), StatusIs(absl::StatusCode::kInternal));
  EXPECT_EQ(calls, 1);
  absl::Status dup = table.Register("fill", FillKernel);
  EXPECT_THAT(dup, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(dup.message(), HasSubstr("'fill'"));
}

}  // namespace
}  // namespace weft::runtime
