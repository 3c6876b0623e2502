#include "runtime/cuda/cuda_status.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::runtime::cuda {
namespace {

using ::testing::HasSubstr;

absl::Status ReturnsThrough(cudaError_t error) {
  WEFT_CUDA_RETURN_IF_ERROR(error);
  return absl::CancelledError("reached the end");
}

TEST(CudaStatusTest, SuccessIsOk) {
  EXPECT_TRUE(WEFT_CUDA_STATUS(cudaSuccess).ok());
  EXPECT_TRUE(WEFT_CUDA_STATUS(CUDA_SUCCESS).ok());
  EXPECT_TRUE(WEFT_CUDA_STATUS(NVRTC_SUCCESS).ok());
}

TEST(CudaStatusTest, RuntimeErrorsMapToCodes) {
  EXPECT_EQ(CudaStatusCode(cudaErrorMemoryAllocation),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaStatusCode(cudaErrorInvalidValue),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaStatusCode(cudaErrorNoDevice), absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatusCode(cudaErrorInsufficientDriver),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatusCode(cudaErrorIllegalAddress),
            absl::StatusCode::kInternal);
  EXPECT_EQ(CudaStatusCode(cudaErrorLaunchFailure),
            absl::StatusCode::kInternal);
}

TEST(CudaStatusTest, RuntimeMessageNamesErrorCallAndSite) {
  const int line = __LINE__ + 1;
  const absl::Status s = WEFT_CUDA_STATUS(cudaErrorMemoryAllocation);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("cudaErrorMemoryAllocation failed"));
  EXPECT_THAT(s.message(), HasSubstr(": cudaErrorMemoryAllocation: "));
  EXPECT_THAT(s.message(),
              HasSubstr(cudaGetErrorString(cudaErrorMemoryAllocation)));
  EXPECT_THAT(s.message(),
              HasSubstr("cuda_status_test.cc:" + std::to_string(line)));
}

TEST(CudaStatusTest, ReturnIfErrorReturnsOnlyOnFailure) {
  const absl::Status failed = ReturnsThrough(cudaErrorInvalidValue);
  EXPECT_EQ(failed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(failed.message(), HasSubstr("cudaErrorInvalidValue"));
  EXPECT_EQ(ReturnsThrough(cudaSuccess).code(), absl::StatusCode::kCancelled);
}

TEST(CudaStatusTest, DriverErrorsMapToCodes) {
  EXPECT_EQ(CudaStatusCode(CUDA_ERROR_OUT_OF_MEMORY),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaStatusCode(CUDA_ERROR_INVALID_VALUE),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaStatusCode(CUDA_ERROR_NO_DEVICE),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(CudaStatusCode(CUDA_ERROR_LAUNCH_FAILED),
            absl::StatusCode::kInternal);
  const absl::Status s = WEFT_CUDA_STATUS(CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  // Without a loaded driver the numeric code stands in for the name.
  EXPECT_THAT(s.message(),
              ::testing::AnyOf(HasSubstr("CUDA_ERROR_OUT_OF_MEMORY"),
                               HasSubstr("CUresult 2")));
  EXPECT_THAT(s.message(), HasSubstr("CUDA_ERROR_OUT_OF_MEMORY failed"));
}

TEST(CudaStatusTest, NvrtcErrorsMapToCodes) {
  EXPECT_EQ(CudaStatusCode(NVRTC_ERROR_OUT_OF_MEMORY),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaStatusCode(NVRTC_ERROR_INVALID_OPTION),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaStatusCode(NVRTC_ERROR_INTERNAL_ERROR),
            absl::StatusCode::kInternal);
  const absl::Status s = WEFT_CUDA_STATUS(NVRTC_ERROR_COMPILATION);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("NVRTC_ERROR_COMPILATION"));
}

}  // namespace
}  // namespace weft::runtime::cuda
