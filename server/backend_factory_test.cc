#include "server/backend_factory.h"

#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/sim/sim_backend.h"
#include "testing/status_matchers.h"

namespace weft::server {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

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
  // A simulated device's memory is all for jobs.
  EXPECT_EQ(runtime::UsableMemoryBytes(created->backend->device_info(2)),
            1u << 20);
  EXPECT_TRUE(created->backend->device_info(0).simulated);
}

TEST(BackendFactoryTest, JobsMayHoldTheUsableMemory) {
  runtime::DeviceInfo info;
  info.memory_total_bytes = 100;
  EXPECT_EQ(runtime::UsableMemoryBytes(info), 100u);  // none reported
  info.memory_usable_bytes = 60;  // a context and another process hold 40
  EXPECT_EQ(runtime::UsableMemoryBytes(info), 60u);
}

TEST(BackendFactoryTest, SimulatorModelsItsBandwidthAndKernelSlots) {
  BackendOptions options;
  options.kind = "sim";
  options.sim_devices = 2;
  options.sim_bandwidth_gbps = 12;
  absl::StatusOr<CreatedBackend> created = CreateBackend(options);
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(created->topology.has_value());
  EXPECT_EQ(created->topology->num_devices(), 2);
  EXPECT_EQ(created->topology->gbps(scheduler::Topology::kHost, 1), 12);
  EXPECT_EQ(created->topology->gbps(1, scheduler::Topology::kHost), 12);
  EXPECT_EQ(created->topology->gbps(0, 1), 12);
  EXPECT_EQ(created->max_concurrent_kernels,
            runtime::SimBackend::Options().max_concurrent_kernels);
}

TEST(BackendFactoryTest, SimulatorTakesTheTopologyFile) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/backend_topology.csv");
  std::ofstream(path) << "From,To,GB/s\n-1,0,10\n-1,1,20\n0,1,40\n1,0,60\n";
  BackendOptions options;
  options.kind = "sim";
  options.sim_devices = 2;
  options.topology_file = path;
  absl::StatusOr<CreatedBackend> created = CreateBackend(options);
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(created->topology.has_value());
  EXPECT_EQ(created->topology->gbps(scheduler::Topology::kHost, 0), 10);
  EXPECT_EQ(created->topology->gbps(1, scheduler::Topology::kHost), 20);
  EXPECT_EQ(created->topology->gbps(1, 0), 50);  // averaged

  options.topology_file = absl::StrCat(path, ".missing");
  created = CreateBackend(options);
  EXPECT_THAT(created.status(),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr(absl::StrCat("--topology: cannot read '",
                                              options.topology_file, "'"))));
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
  EXPECT_THAT(created.status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'tpu'")));
}

TEST(BackendFactoryTest, RejectsZeroSimulatedDevices) {
  BackendOptions options;
  options.kind = "sim";
  options.sim_devices = 0;
  absl::StatusOr<CreatedBackend> created = CreateBackend(options);
  EXPECT_THAT(created.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("--sim_devices")));
}

TEST(BackendFactoryTest, CudaWithoutGpuIsUnavailable) {
  if (VisibleGpus() > 0) GTEST_SKIP() << "a GPU is visible";
  BackendOptions options;
  options.kind = "cuda";
  absl::StatusOr<CreatedBackend> created = CreateBackend(options);
  EXPECT_THAT(created.status(), StatusIs(absl::StatusCode::kUnavailable,
                                         HasSubstr("--backend=cuda: ")));
}

}  // namespace
}  // namespace weft::server
