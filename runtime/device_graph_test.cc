#include "runtime/device_graph.h"

#include <functional>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

// axpy(a, x, y) then a copy of y to device 1's peer buffer, then an event:
// a small graph with every kind of node.
DeviceGraph Sample(uint64_t x_addr, uint64_t y_addr, float a, double cost,
                   uint64_t event) {
  DeviceGraph g;
  g.device = 0;
  KernelLaunch axpy;
  axpy.op = "axpy";
  axpy.cost_us = cost;
  axpy.args = {
      a, DeviceBufferArg{{0, x_addr}, 64, DType::kFloat32, Access::kRead},
      DeviceBufferArg{{0, y_addr}, 64, DType::kFloat32, Access::kReadWrite}};
  const int wait = g.AddEventWait(EventHandle{event + 1}, {});
  const int k = g.AddKernel(axpy, {wait});
  const int c = g.AddDeviceCopy({0, x_addr + 4096}, {1, y_addr}, 64, {k});
  g.AddEventRecord(EventHandle{event}, {k, c});
  return g;
}

TEST(DeviceGraphTest, ParametersDoNotChangeTheSignature) {
  const std::string a = DeviceGraphSignature(Sample(0x1000, 0x2000, 2, 5, 7));
  const std::string b =
      DeviceGraphSignature(Sample(0x9000, 0xa000, -3, 50, 70));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, DeviceGraphSignature(Sample(0x1000, 0x2000, 2, 5, 7)));
}

TEST(DeviceGraphTest, StructuralChangesChangeTheSignature) {
  const DeviceGraph base = Sample(0x1000, 0x2000, 2, 5, 7);
  const std::string key = DeviceGraphSignature(base);
  auto differs = [&](auto mutate, const char* what) {
    DeviceGraph g = base;
    mutate(g);
    EXPECT_NE(DeviceGraphSignature(g), key) << what;
  };
  differs([](DeviceGraph& g) { g.device = 1; }, "device");
  differs([](DeviceGraph& g) { g.nodes[1].launch.op = "add"; }, "op");
  differs(
      [](DeviceGraph& g) {
        std::get<DeviceBufferArg>(g.nodes[1].launch.args[1]).size_bytes = 128;
      },
      "buffer size");
  differs(
      [](DeviceGraph& g) {
        std::get<DeviceBufferArg>(g.nodes[1].launch.args[1]).dtype =
            DType::kInt32;
      },
      "dtype");
  differs(
      [](DeviceGraph& g) {
        std::get<DeviceBufferArg>(g.nodes[1].launch.args[2]).access =
            Access::kWrite;
      },
      "access");
  differs([](DeviceGraph& g) { g.nodes[1].launch.args[0] = 2.0; },
          "scalar type");
  differs([](DeviceGraph& g) { g.nodes[1].launch.args.pop_back(); },
          "argument count");
  differs([](DeviceGraph& g) { g.nodes[2].bytes = 32; }, "copy size");
  differs([](DeviceGraph& g) { g.nodes[2].src.device = 0; }, "copy source");
  differs([](DeviceGraph& g) { g.nodes[3].deps = {1}; }, "edge removed");
  differs([](DeviceGraph& g) { g.nodes[1].deps.clear(); }, "edge");
  differs([](DeviceGraph& g) { g.AddKernel(g.nodes[1].launch, {}); },
          "node added");
  differs(
      [](DeviceGraph& g) {
        g.nodes[0].kind = DeviceGraphNodeKind::kEventRecord;
      },
      "node kind");
}

TEST(DeviceGraphTest, ValidGraphPasses) {
  EXPECT_TRUE(ValidateDeviceGraph(Sample(0x1000, 0x2000, 2, 5, 7)).ok());
}

TEST(DeviceGraphTest, RejectsForwardDependency) {
  DeviceGraph g = Sample(0x1000, 0x2000, 2, 5, 7);
  g.nodes[1].deps = {2};
  const absl::Status s = ValidateDeviceGraph(g);
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInvalidArgument,
                  HasSubstr(
                      "node 1 (kernel): dependency 2 is not an earlier node")));
}

TEST(DeviceGraphTest, RejectsKernelBufferOnAnotherDevice) {
  DeviceGraph g = Sample(0x1000, 0x2000, 2, 5, 7);
  std::get<DeviceBufferArg>(g.nodes[1].launch.args[1]).ptr.device = 1;
  const absl::Status s = ValidateDeviceGraph(g);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("buffer argument on device 1")));
}

TEST(DeviceGraphTest, RejectsCopyIntoAnotherDevice) {
  DeviceGraph g = Sample(0x1000, 0x2000, 2, 5, 7);
  g.nodes[2].dst.device = 1;
  const absl::Status s = ValidateDeviceGraph(g);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("destination on device 1")));
}

TEST(DeviceGraphTest, RejectsCopyWithoutASourceDevice) {
  DeviceGraph g = Sample(0x1000, 0x2000, 2, 5, 7);
  g.nodes[2].src.device = -1;
  const absl::Status s = ValidateDeviceGraph(g);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          AllOf(HasSubstr("source on device -1"),
                                ::testing::Not(HasSubstr("destination")))));
}

TEST(DeviceGraphTest, RejectsMissingEventAndHostAddress) {
  DeviceGraph g;
  g.AddEventRecord(EventHandle{}, {});
  absl::Status s = ValidateDeviceGraph(g);
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no event")));

  DeviceGraph h;
  h.AddDeviceToHost(nullptr, DevicePtr{0, 64}, 8, {});
  s = ValidateDeviceGraph(h);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr("needs a host destination")));
}

// A graph holding a loop whose body is Sample's graph.
DeviceGraph WithLoop(uint64_t condition, uint32_t max_iterations,
                     uint64_t body_x) {
  auto loop = std::make_shared<DeviceGraphControl>();
  loop->name = "loop";
  loop->value = {0, condition};
  loop->max_iterations = max_iterations;
  loop->bodies.push_back(Sample(body_x, 0x2000, 1, 1, 7));
  DeviceGraph g;
  g.device = 0;
  g.AddControl(loop, {});
  return g;
}

TEST(DeviceGraphTest, ControlNodesNestInTheSignatureAndParameters) {
  const DeviceGraph g = WithLoop(0x100, 5, 0x1000);
  ASSERT_OK(ValidateDeviceGraph(g));
  EXPECT_TRUE(g.HasControl());
  // Addresses, inside the body too, are parameters.
  EXPECT_EQ(DeviceGraphSignature(g),
            DeviceGraphSignature(WithLoop(0x200, 5, 0x3000)));
  EXPECT_NE(DeviceGraphParameters(g),
            DeviceGraphParameters(WithLoop(0x200, 5, 0x1000)));
  EXPECT_NE(DeviceGraphParameters(g),
            DeviceGraphParameters(WithLoop(0x100, 5, 0x3000)));
  // The bound and the body's structure are not.
  EXPECT_NE(DeviceGraphSignature(g),
            DeviceGraphSignature(WithLoop(0x100, 6, 0x1000)));
  DeviceGraph other = WithLoop(0x100, 5, 0x1000);
  auto changed = std::make_shared<DeviceGraphControl>(*other.nodes[0].control);
  changed->bodies[0].nodes.pop_back();
  other.nodes[0].control = changed;
  EXPECT_NE(DeviceGraphSignature(g), DeviceGraphSignature(other));
}

TEST(DeviceGraphTest, RejectsControlNodesTheDeviceCannotRun) {
  auto check = [](std::function<void(DeviceGraphControl&)> change,
                  const std::string& why) {
    DeviceGraph g = WithLoop(0x100, 5, 0x1000);
    auto control = std::make_shared<DeviceGraphControl>(*g.nodes[0].control);
    change(*control);
    g.nodes[0].control = control;
    EXPECT_THAT(ValidateDeviceGraph(g),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(why)));
  };
  check([](DeviceGraphControl& c) { c.max_iterations = 0; },
        "needs one body and max_iterations > 0");
  check([](DeviceGraphControl& c) { c.value.device = 1; },
        "reads its condition on device 1");
  check(
      [](DeviceGraphControl& c) {
        c.loop = false;
        c.dtype = DType::kFloat32;
      },
      "needs an INT32 or INT64 selector");
  check([](DeviceGraphControl& c) { c.bodies[0].nodes[1].deps = {3}; },
        "in a body of 'loop'");
  DeviceGraph empty;
  empty.AddControl(nullptr, {});
  EXPECT_THAT(
      ValidateDeviceGraph(empty),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no control")));
}

TEST(DeviceGraphTest, ParametersTrackWhatTheSignatureLeavesOut) {
  const std::string base =
      DeviceGraphParameters(Sample(0x1000, 0x2000, 2, 5, 7));
  EXPECT_EQ(base, DeviceGraphParameters(Sample(0x1000, 0x2000, 2, 5, 7)));
  EXPECT_NE(base, DeviceGraphParameters(Sample(0x1100, 0x2000, 2, 5, 7)));
  EXPECT_NE(base, DeviceGraphParameters(Sample(0x1000, 0x2000, 3, 5, 7)));
  EXPECT_NE(base, DeviceGraphParameters(Sample(0x1000, 0x2000, 2, 6, 7)));
  EXPECT_NE(base, DeviceGraphParameters(Sample(0x1000, 0x2000, 2, 5, 8)));
}

TEST(DeviceGraphTest, OccupancyAndEngineAreParameters) {
  const DeviceGraph base = Sample(0x1000, 0x2000, 2, 5, 7);
  const std::string key = DeviceGraphSignature(base);
  const std::string params = DeviceGraphParameters(base);
  DeviceGraph quarter = base;
  quarter.nodes[1].launch.occupancy_units = scheduler::kOccupancyUnits / 4;
  EXPECT_EQ(DeviceGraphSignature(quarter), key);
  EXPECT_NE(DeviceGraphParameters(quarter), params);
  DeviceGraph copy = base;
  copy.nodes[1].launch.engine = scheduler::Engine::kCopy;
  EXPECT_EQ(DeviceGraphSignature(copy), key);
  EXPECT_NE(DeviceGraphParameters(copy), params);
  EXPECT_NE(DeviceGraphParameters(copy), DeviceGraphParameters(quarter));
}

KernelLaunch Spin() {
  KernelLaunch launch;
  launch.op = "spin";
  return launch;
}

TEST(DeviceGraphTest, LanesFollowChains) {
  DeviceGraph g;
  const int a = g.AddKernel(Spin(), {});
  const int b = g.AddKernel(Spin(), {});
  const int c = g.AddKernel(Spin(), {a});
  const int d = g.AddKernel(Spin(), {b, c});
  g.AddKernel(Spin(), {a});  // a's lane has moved on to c: a new lane
  int lanes = 0;
  EXPECT_THAT(AssignLanes(g, 8, lanes), ::testing::ElementsAre(0, 1, 0, 1, 2));
  EXPECT_EQ(lanes, 3);
  (void)d;
  // Capped at two lanes: the fifth node joins the lane least recently used.
  EXPECT_THAT(AssignLanes(g, 2, lanes), ::testing::ElementsAre(0, 1, 0, 1, 0));
  EXPECT_EQ(lanes, 2);
  DeviceGraph empty;
  EXPECT_TRUE(AssignLanes(empty, 4, lanes).empty());
  EXPECT_EQ(lanes, 1);
}

}  // namespace
}  // namespace weft::runtime
