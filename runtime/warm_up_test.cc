#include "runtime/warm_up.h"

#include <memory>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/graph.h"
#include "scheduler/topology.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using ::testing::HasSubstr;
using ::weft::testing::IsOk;
using ::weft::testing::StatusIs;

constexpr int kDevices = 3;

class WarmUpTest : public ::testing::Test {
 protected:
  void MakeMachine(double time_scale = 0) {
    executor_.reset();
    SimBackend::Options sim;
    sim.num_devices = kDevices;
    sim.time_scale = time_scale;
    backend_ = SimBackend::Create(sim).value();
    Executor::Options options;
    options.backend = backend_.get();
    executor_ = Executor::Create(options).value();
  }

  WarmUpOptions Options() const {
    WarmUpOptions options;
    options.planner.topology = scheduler::Topology::Default(kDevices);
    return options;
  }

  void SetUp() override { MakeMachine(); }
  void TearDown() override {
    executor_.reset();
    backend_.reset();
  }

  std::unique_ptr<SimBackend> backend_;
  std::unique_ptr<Executor> executor_;
};

TEST(WarmUpGraphTest, PinsItsNodesToEveryDeviceAndJoinsThemOnTheFirst) {
  const scheduler::Graph graph = WarmUpGraph(kDevices, 2);
  ASSERT_EQ(graph.num_nodes(), kDevices * 2 + 1);
  std::vector<int> per_device(kDevices, 0);
  for (scheduler::NodeId v = 0; v + 1 < graph.num_nodes(); ++v) {
    const scheduler::NodeSpec& node = graph.node(v);
    EXPECT_EQ(node.op, "spin");
    EXPECT_EQ(node.cost_us, kWarmUpSpinUs);
    ASSERT_TRUE(node.device.has_value());
    ++per_device[*node.device];
  }
  EXPECT_THAT(per_device, ::testing::Each(2));
  const scheduler::NodeSpec& join = graph.node(graph.num_nodes() - 1);
  EXPECT_EQ(join.device, 0);
  EXPECT_EQ(join.args.size(), kDevices * 2 + 1);
  int outputs = 0;
  for (scheduler::BufferId b = 0; b < graph.num_buffers(); ++b) {
    EXPECT_EQ(graph.buffer(b).size_bytes, kWarmUpBufferBytes);
    outputs += graph.buffer(b).output ? 1 : 0;
  }
  EXPECT_EQ(outputs, 1);
  EXPECT_EQ(graph.buffer(0).init, scheduler::BufferSpec::Init::kData);
}

// A fresh executor has created nothing; warmed up, every device has the
// streams and memory blocks the job used, all of them free again.
TEST_F(WarmUpTest, LeavesEveryDevicesPoolsStockedAndFree) {
  for (const DeviceLoad& load : executor_->Load()) {
    EXPECT_EQ(load.streams_total, 0);
    EXPECT_EQ(load.memory.cached_bytes, 0u);
  }
  ASSERT_THAT(WarmUp(*executor_, Options()), IsOk());
  const std::vector<DeviceLoad> loads = executor_->Load();
  ASSERT_EQ(loads.size(), kDevices);
  for (int d = 0; d < kDevices; ++d) {
    SCOPED_TRACE(d);
    EXPECT_GE(loads[d].streams_total, 2);
    EXPECT_EQ(loads[d].streams_busy, 0);
    EXPECT_EQ(loads[d].memory.in_use_bytes, 0u);
    EXPECT_GT(loads[d].memory.cached_bytes, 0u);
  }
}

TEST_F(WarmUpTest, MoreStreamsPerDeviceStockMoreStreams) {
  WarmUpOptions options = Options();
  options.streams_per_device = 5;
  ASSERT_THAT(WarmUp(*executor_, options), IsOk());
  for (const DeviceLoad& load : executor_->Load()) {
    EXPECT_GE(load.streams_total, 5);
  }
}

TEST_F(WarmUpTest, ReportsAFailingDevice) {
  ASSERT_THAT(backend_->LoseDevice(1, "fell off the bus"), IsOk());
  EXPECT_THAT(WarmUp(*executor_, Options()),
              StatusIs(absl::StatusCode::kUnavailable,
                       ::testing::AllOf(HasSubstr("warm-up job"),
                                        HasSubstr("fell off the bus"))));
}

TEST_F(WarmUpTest, GivesUpPastItsTimeout) {
  // Paced a thousand times slower than real time: 10 ms per spin.
  MakeMachine(/*time_scale=*/1000);
  WarmUpOptions options = Options();
  options.timeout = absl::Milliseconds(1);
  EXPECT_THAT(WarmUp(*executor_, options),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("did not finish in 1ms")));
}

TEST_F(WarmUpTest, RefusesNoStreams) {
  WarmUpOptions options = Options();
  options.streams_per_device = 0;
  EXPECT_THAT(WarmUp(*executor_, options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("streams_per_device")));
}

}  // namespace
}  // namespace weft::runtime
