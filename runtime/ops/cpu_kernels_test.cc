#include "runtime/ops/cpu_kernels.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::runtime {
namespace {

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
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
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
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
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
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
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
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("at least one float32"));
}

TEST(CpuKernelsTest, SpinLeavesMemoryAlone) {
  std::vector<float> x = {3, 4};
  ASSERT_TRUE(SpinKernel({View(x, DType::kFloat32)}).ok());
  ASSERT_TRUE(SpinKernel({}).ok());
  EXPECT_THAT(x, ElementsAre(3, 4));
  EXPECT_EQ(SpinKernel({1.0f}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuKernelsTest, WrongArity) {
  std::vector<float> x = {1};
  absl::Status s = ScaleKernel({View(x, DType::kFloat32)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("scale: expected 2 arguments, got 1"));
}

TEST(CpuKernelTableTest, UnknownOpIsUnimplemented) {
  CpuKernelTable table = CpuKernelTable::WithBuiltins();
  absl::Status s = table.Run("matmul", {});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("no kernel for op 'matmul'"));
}

TEST(CpuKernelTableTest, HoldsExactlyTheBuiltins) {
  CpuKernelTable table = CpuKernelTable::WithBuiltins();
  for (const char* op :
       {"fill", "copy", "axpy", "scale", "add", "reduce_sum", "spin"}) {
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
  EXPECT_EQ(table.Run("boom", {}).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(calls, 1);
  absl::Status dup = table.Register("fill", FillKernel);
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(dup.message(), HasSubstr("'fill'"));
}

}  // namespace
}  // namespace weft::runtime
