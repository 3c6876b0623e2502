#include "runtime/cuda/launch_args.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/backend.h"
#include "testing/status_matchers.h"

namespace weft::runtime::cuda {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::IsOk;
using ::weft::testing::StatusIs;

DeviceBufferArg Buffer(int device, uint64_t address, uint64_t bytes,
                       scheduler::DType dtype = scheduler::DType::kFloat32) {
  DeviceBufferArg b;
  b.ptr = DevicePtr{device, address};
  b.size_bytes = bytes;
  b.dtype = dtype;
  return b;
}

// One allocation per device: [0x1000, 0x2000).
absl::Status InsideOneAllocation(DevicePtr ptr, uint64_t bytes,
                                 absl::string_view what) {
  if (ptr.address >= 0x1000 && ptr.address + bytes <= 0x2000) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(std::string(what));
}

TEST(LaunchArgsTest, ArityAndScalars) {
  KernelLaunch launch;
  launch.op = "scale";
  launch.args = {2.0f, Buffer(0, 0x1000, 16)};
  EXPECT_THAT(CheckArity("scale", launch, 2), IsOk());
  EXPECT_THAT(CheckArity("scale", launch, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("scale: expected 3 arguments, got 2")));
  EXPECT_TRUE(IsScalar(launch.args[0]));
  EXPECT_FALSE(IsScalar(launch.args[1]));
  EXPECT_THAT(ArgError("scale", 1, "must be float32"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "scale: argument 1 must be float32"));
}

TEST(LaunchArgsTest, OverlapsOnlyOnOneDeviceAndNonEmpty) {
  EXPECT_TRUE(Overlaps({0, 100}, 10, {0, 109}, 1));
  EXPECT_FALSE(Overlaps({0, 100}, 10, {0, 110}, 1));
  EXPECT_FALSE(Overlaps({0, 100}, 10, {1, 100}, 10));
  EXPECT_FALSE(Overlaps({0, 100}, 0, {0, 100}, 10));
}

TEST(LaunchArgsTest, ElementwiseOutputIsExactlyAnInputOrApart) {
  EXPECT_THAT(CheckElementwiseAlias("add", 2, {0, 100}, 16, 0, {0, 100}, 16),
              IsOk());
  EXPECT_THAT(CheckElementwiseAlias("add", 2, {0, 100}, 16, 0, {0, 116}, 16),
              IsOk());
  EXPECT_THAT(CheckElementwiseAlias("add", 2, {0, 100}, 16, 1, {0, 104}, 16),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("argument 2 (the output) overlaps argument "
                                 "1 without being the same memory")));
  EXPECT_THAT(
      CheckNoOverlap("dot", 2, "out", {0, 100}, 4, 0, "x", {0, 100}, 16),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("dot: argument 2 (out) overlaps argument 0 "
                         "(x)")));
  EXPECT_THAT(CheckNoOverlap("dot", 2, "out", {0, 96}, 4, 0, "x", {0, 100}, 16),
              IsOk());
}

TEST(LaunchArgsTest, DimensionsAreIntegersInRange) {
  KernelLaunch launch;
  launch.op = "gemv";
  launch.args = {int32_t{3}, int64_t{1} << 31, 2.0f, int32_t{0}};
  EXPECT_EQ(*DimensionAt("gemv", launch, 0, "rows"), 3u);
  EXPECT_THAT(DimensionAt("gemv", launch, 1, "cols"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("(cols) must be in [1, 2^31 - 1]")));
  EXPECT_THAT(DimensionAt("gemv", launch, 2, "rows"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("(rows) must be an integer scalar")));
  EXPECT_THAT(DimensionAt("gemv", launch, 3, "rows"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(LaunchArgsTest, BuffersAreCheckedForDeviceRangeAndDtype) {
  KernelLaunch launch;
  launch.op = "axpy";
  launch.args = {1.0f,
                 Buffer(0, 0x1000, 16),
                 Buffer(1, 0x1000, 16),
                 Buffer(0, 0x1ff8, 16),
                 Buffer(0, 0x1000, 16, scheduler::DType::kInt32),
                 Buffer(0, 0x9000, 0)};
  const RangeCheck check = InsideOneAllocation;
  EXPECT_THAT(BufferAt("axpy", launch, 0, 0, check),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "axpy: argument 0 must be a buffer"));
  EXPECT_THAT(Float32At("axpy", launch, 1, 0, check), IsOk());
  EXPECT_THAT(BufferAt("axpy", launch, 2, 0, check),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("lives on device 1 but the stream is on "
                                 "device 0")));
  EXPECT_THAT(BufferAt("axpy", launch, 2, /*device=*/-1, check), IsOk());
  EXPECT_THAT(BufferAt("axpy", launch, 3, 0, check),
              StatusIs(absl::StatusCode::kInvalidArgument, "axpy: argument 3"));
  EXPECT_THAT(BufferAt("axpy", launch, 4, 0, check), IsOk());
  EXPECT_THAT(Float32At("axpy", launch, 4, 0, check),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "axpy: argument 4 must be float32, got INT32"));
  // An empty buffer is not looked up.
  EXPECT_THAT(BufferAt("axpy", launch, 5, 0, check), IsOk());
}

}  // namespace
}  // namespace weft::runtime::cuda
