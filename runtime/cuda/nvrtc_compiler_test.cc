#include "runtime/cuda/nvrtc_compiler.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::runtime::cuda {
namespace {

using ::testing::HasSubstr;

// NVRTC runs on the CPU, so these tests need the toolkit but no GPU.
constexpr char kSaxpy[] = R"cu(
extern "C" __global__ void saxpy(float a, const float* x, float* y,
                                 long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i] * SCALE;
}
)cu";

const std::vector<std::string> kScale1 = {"-DSCALE=1"};

TEST(NvrtcCompilerTest, CompilesCudaSourceToPtxWithTheEntry) {
  NvrtcCompiler compiler;
  absl::StatusOr<std::shared_ptr<const std::string>> ptx =
      compiler.CompileToPtx(kSaxpy, kScale1, 90, "saxpy_module");
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_THAT(**ptx, HasSubstr(".entry saxpy("));
  EXPECT_THAT(**ptx, HasSubstr(".target sm_90"));
  EXPECT_EQ((*ptx)->find('\0'), std::string::npos);
  EXPECT_EQ(compiler.compiles(), 1);
  EXPECT_EQ(compiler.cache_hits(), 0);
}

TEST(NvrtcCompilerTest, SecondCompileHitsTheCache) {
  NvrtcCompiler compiler;
  auto first = compiler.CompileToPtx(kSaxpy, kScale1, 90, "m");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = compiler.CompileToPtx(kSaxpy, kScale1, 90, "other_name");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->get(), second->get());  // the very same cached PTX
  EXPECT_EQ(compiler.compiles(), 1);
  EXPECT_EQ(compiler.cache_hits(), 1);

  // Different options or architecture: a different program.
  const std::vector<std::string> scale2 = {"-DSCALE=2"};
  auto other_options = compiler.CompileToPtx(kSaxpy, scale2, 90, "m");
  ASSERT_TRUE(other_options.ok()) << other_options.status();
  auto other_arch = compiler.CompileToPtx(kSaxpy, kScale1, 80, "m");
  ASSERT_TRUE(other_arch.ok()) << other_arch.status();
  EXPECT_THAT(**other_arch, HasSubstr(".target sm_80"));
  EXPECT_EQ(compiler.compiles(), 3);
  EXPECT_EQ(compiler.cache_hits(), 1);
}

TEST(NvrtcCompilerTest, SyntaxErrorIsInvalidArgumentWithTheLog) {
  NvrtcCompiler compiler;
  const std::string broken =
      "extern \"C\" __global__ void k(float* y) { y[0] = 1.0f +; }\n";
  auto ptx = compiler.CompileToPtx(broken, {}, 90, "broken");
  ASSERT_FALSE(ptx.ok());
  EXPECT_EQ(ptx.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ptx.status().message()),
              HasSubstr("module 'broken' does not compile for compute_90"));
  EXPECT_THAT(std::string(ptx.status().message()),
              HasSubstr("NVRTC_ERROR_COMPILATION"));
  // The log names the program and the line.
  EXPECT_THAT(std::string(ptx.status().message()), HasSubstr("broken.cu(1)"));
  EXPECT_THAT(std::string(ptx.status().message()),
              HasSubstr("expected an expression"));
  // Failures are not cached.
  EXPECT_FALSE(compiler.CompileToPtx(broken, {}, 90, "broken").ok());
  EXPECT_EQ(compiler.compiles(), 2);
}

TEST(NvrtcCompilerTest, BadOptionIsInvalidArgument) {
  NvrtcCompiler compiler;
  const std::vector<std::string> bad = {"--no-such-option"};
  auto ptx = compiler.CompileToPtx(kSaxpy, bad, 90, "m");
  ASSERT_FALSE(ptx.ok());
  EXPECT_EQ(ptx.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ptx.status().message()), HasSubstr("module 'm'"));
}

TEST(NvrtcCompilerTest, TargetsTheNewestSupportedArchitecture) {
  absl::StatusOr<int> h100 = NvrtcCompiler::TargetArchitecture(90);
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_EQ(*h100, 90);
  absl::StatusOr<int> future = NvrtcCompiler::TargetArchitecture(990);
  ASSERT_TRUE(future.ok()) << future.status();
  EXPECT_GE(*future, 90);
  EXPECT_LE(*future, 990);
  absl::StatusOr<int> ancient = NvrtcCompiler::TargetArchitecture(10);
  ASSERT_FALSE(ancient.ok());
  EXPECT_EQ(ancient.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ancient.status().message()),
              HasSubstr("compute capability 1.0 or older"));
}

TEST(NvrtcCompilerTest, EvictsTheOldestBeyondItsCapacity) {
  NvrtcCompiler::Options options;
  options.max_entries = 1;
  NvrtcCompiler compiler(options);
  ASSERT_TRUE(compiler.CompileToPtx(kSaxpy, kScale1, 90, "m").ok());
  ASSERT_TRUE(compiler.CompileToPtx(kSaxpy, kScale1, 80, "m").ok());
  ASSERT_TRUE(compiler.CompileToPtx(kSaxpy, kScale1, 90, "m").ok());
  EXPECT_EQ(compiler.compiles(), 3);
  EXPECT_EQ(compiler.cache_hits(), 0);
}

}  // namespace
}  // namespace weft::runtime::cuda
