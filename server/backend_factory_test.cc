#include "server/backend_factory.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::server {
namespace {

using ::testing::HasSubstr;

TEST(BackendFactoryTest, CreatesSimulatedDevices) {
  BackendOptions options;
  options.kind = "sim";
  options.sim_devices = 3;
  options.sim_memory_bytes = 1 << 20;
  absl::StatusOr<CreatedBackend> created = CreateBackend(options);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE(created->simulated);
  EXPECT_EQ(created->description, "3 simulated devices");
  ASSERT_EQ(created->backend->device_count(), 3);
  EXPECT_EQ(created->backend->device_info(2).memory_total_bytes, 1u << 20);
  EXPECT_TRUE(created->backend->device_info(0).simulated);
}

TEST(BackendFactoryTest, AutoFallsBackToSimulatorWithoutGpu) {
  if (VisibleGpus() > 0) GTEST_SKIP() << "a GPU is visible";
  BackendOptions options;
  options.sim_devices = 1;
  absl::StatusOr<CreatedBackend> created = CreateBackend(options);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->description, "1 simulated device");
}

TEST(BackendFactoryTest, RejectsUnknownKind) {
  BackendOptions options;
  options.kind = "tpu";
  absl::StatusOr<CreatedBackend> created = CreateBackend(options);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(created.status().message(), HasSubstr("'tpu'"));
}

TEST(BackendFactoryTest, RejectsZeroSimulatedDevices) {
  BackendOptions options;
  options.kind = "sim";
  options.sim_devices = 0;
  absl::StatusOr<CreatedBackend> created = CreateBackend(options);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(created.status().message(), HasSubstr("--sim_devices"));
}

TEST(BackendFactoryTest, CudaWithoutGpuIsUnavailable) {
  if (VisibleGpus() > 0) GTEST_SKIP() << "a GPU is visible";
  BackendOptions options;
  options.kind = "cuda";
  absl::StatusOr<CreatedBackend> created = CreateBackend(options);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(created.status().message(), HasSubstr("--backend=cuda: "));
}

}  // namespace
}  // namespace weft::server
