#include "runtime/sim/sim_launch.h"

#include <cstring>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/ops/cpu_kernels.h"
#include "runtime/sim/sim_device_model.h"
#include "runtime/sim/sim_memory.h"
#include "runtime/sim/sim_stream.h"
#include "runtime/sim/sim_timeline.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

class SimLaunchesTest : public ::testing::Test {
 protected:
  SimLaunchesTest() : memory_({"gpu0"}, 1 << 20), model_(&clock_, 32) {}

  SimLaunches Make(SimLaunches::Options options = {}) {
    options.memory = &memory_;
    return SimLaunches(std::move(options));
  }

  KernelLaunch Fill(DevicePtr ptr, KernelArg value, double cost_us = 0) {
    KernelLaunch launch;
    launch.op = "fill";
    launch.cost_us = cost_us;
    launch.args = {DeviceBufferArg{ptr, 16, DType::kFloat32, Access::kWrite},
                   value};
    return launch;
  }

  // Runs `launch` as the backend would, outside a batch.
  absl::Status Run(SimLaunches& launches, const KernelLaunch& launch,
                   absl::Status fault = absl::OkStatus(),
                   double* end_us = nullptr) {
    const CpuKernel* kernel = launches.KernelFor(launch);
    if (kernel == nullptr) return absl::NotFoundError(launch.op);
    SimLaunches::RecordPtr record = launches.Make(
        launch, launch.cost_us, kernel, 0, &model_, std::move(fault), nullptr);
    SimStream::Timing timing(0, &no_waker_);
    absl::Status status = launches.Run(*record, timing);
    if (end_us != nullptr) *end_us = timing.end_us;
    return status;
  }

  float FirstFloat(DevicePtr ptr) {
    SimMemory::Resolved r = memory_.Resolve(ptr, 4).value();
    float v = 0;
    if (r.data != nullptr) std::memcpy(&v, r.data, 4);
    return v;
  }

  const std::shared_ptr<SimStream::Waker> no_waker_;
  SimClock clock_{0};
  SimMemory memory_;
  SimDeviceModel model_;
};

TEST_F(SimLaunchesTest, KnowsWhatEachKernelDoesToItsBuffers) {
  SimLaunches launches = Make();
  const DevicePtr p{0, 1};
  KernelLaunch spin;
  spin.op = "spin";
  KernelLaunch add;
  add.op = "add";
  KernelLaunch user;
  user.op = "my_kernel";
  const scheduler::KernelSpec spec;
  user.user_kernel = &spec;
  KernelLaunch unknown;
  unknown.op = "nope";
  EXPECT_EQ(launches.KernelFor(unknown), nullptr);
  ASSERT_NE(launches.KernelFor(user), nullptr);
  EXPECT_EQ(launches.ContentsOf(launches.KernelFor(user), user),
            SimContents::kNone);
  EXPECT_EQ(launches.ContentsOf(launches.KernelFor(spin), spin),
            SimContents::kNone);
  EXPECT_EQ(launches.ContentsOf(launches.KernelFor(add), add),
            SimContents::kCompute);
  const KernelLaunch zero = Fill(p, 0.0f);
  EXPECT_EQ(launches.ContentsOf(launches.KernelFor(zero), zero),
            SimContents::kZeroFill);
  const KernelLaunch minus_zero = Fill(p, -0.0);
  EXPECT_EQ(launches.ContentsOf(launches.KernelFor(minus_zero), minus_zero),
            SimContents::kCompute);
}

TEST_F(SimLaunchesTest, RunsTheKernelOnDeviceMemoryThenBooksIt) {
  SimLaunches launches = Make();
  const DevicePtr p = memory_.Allocate(0, 16).value();
  double end_us = 0;
  ASSERT_OK(
      Run(launches, Fill(p, 3.0f, /*cost_us=*/7), absl::OkStatus(), &end_us));
  EXPECT_EQ(FirstFloat(p), 3.0f);
  EXPECT_EQ(end_us, 7);
}

TEST_F(SimLaunchesTest, ZeroFillGivesNoContents) {
  SimLaunches launches = Make();
  const DevicePtr p = memory_.Allocate(0, 16).value();
  ASSERT_OK(Run(launches, Fill(p, 0.0f)));
  EXPECT_EQ(memory_.materialized_bytes(0), 0u);
}

TEST_F(SimLaunchesTest, FaultsAndKernelErrorsFailTheLaunch) {
  SimLaunches::Options options;
  options.launch_fault = [](int, const KernelLaunch& launch) {
    return launch.cost_us == 13 ? absl::InternalError("hook")
                                : absl::OkStatus();
  };
  SimLaunches launches = Make(options);
  const DevicePtr p = memory_.Allocate(0, 16).value();
  EXPECT_THAT(Run(launches, Fill(p, 1.0f), absl::DataLossError("injected")),
              StatusIs(absl::StatusCode::kDataLoss, "injected"));
  EXPECT_EQ(memory_.materialized_bytes(0), 0u);  // did not run
  EXPECT_THAT(Run(launches, Fill(p, 1.0f, 13)),
              StatusIs(absl::StatusCode::kInternal, "hook"));
  KernelLaunch bad = Fill(p, 1.0f);
  bad.args.pop_back();
  EXPECT_THAT(Run(launches, bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("fill on device 0: ")));
  KernelLaunch outside = Fill(DevicePtr{0, p.address + 8}, 1.0f);
  EXPECT_THAT(Run(launches, outside),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("fill on device 0: device 0: [")));
}

TEST_F(SimLaunchesTest, RecordsAreReused) {
  SimLaunches launches = Make();
  KernelLaunch spin;
  spin.op = "spin";
  const CpuKernel* kernel = launches.KernelFor(spin);
  {
    SimLaunches::RecordPtr a =
        launches.Make(spin, 0, kernel, 0, &model_, absl::OkStatus(), nullptr);
    SimLaunches::RecordPtr b =
        launches.Make(spin, 0, kernel, 0, &model_, absl::OkStatus(), nullptr);
    SimLaunches::RecordPtr c =
        launches.Make(spin, 0, kernel, 0, &model_, absl::OkStatus(), nullptr);
  }
  EXPECT_EQ(launches.records(), 3);
  // A batch takes several at once and gives back those it did not use.
  std::vector<SimLaunchRecord*> cache;
  SimLaunches::RecordPtr d =
      launches.Make(spin, 0, kernel, 0, &model_, absl::OkStatus(), &cache);
  EXPECT_EQ(cache.size(), 2u);
  launches.Return(&cache);
  EXPECT_TRUE(cache.empty());
  SimLaunches::RecordPtr e =
      launches.Make(spin, 0, kernel, 0, &model_, absl::OkStatus(), nullptr);
  SimLaunches::RecordPtr f =
      launches.Make(spin, 0, kernel, 0, &model_, absl::OkStatus(), nullptr);
  EXPECT_EQ(launches.records(), 3);
}

}  // namespace
}  // namespace weft::runtime
