#include "client/plan_memory.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace weft::client {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

template <typename Message>
Message Parse(const std::string& text) {
  Message message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message))
      << text;
  return message;
}

// fill a, a -> b, b -> c on one stream of device 0. c is host data and an
// output: uploaded before anything runs and live to the end.
constexpr char kChainGraph[] = R"pb(
  buffers { name: "a" size_bytes: 1000 fill: 1 }
  buffers { name: "b" size_bytes: 1000 }
  buffers { name: "c" size_bytes: 500 data: "xyz" output: true }
  nodes {
    name: "n1"
    op: "fill"
    args { buffer { name: "a" access: WRITE } }
  }
  nodes {
    name: "n2"
    op: "copy"
    args { buffer { name: "a" access: READ } }
    args { buffer { name: "b" access: WRITE } }
  }
  nodes {
    name: "n3"
    op: "add"
    args { buffer { name: "b" access: READ } }
    args { buffer { name: "c" access: READ_WRITE } }
  }
)pb";

constexpr char kChainPlan[] = R"pb(
  nodes { name: "n1" stream: 0 estimated_start_us: 0 estimated_end_us: 10 }
  nodes { name: "n2" stream: 0 estimated_start_us: 10 estimated_end_us: 20 }
  nodes { name: "n3" stream: 0 estimated_start_us: 20 estimated_end_us: 30 }
  streams { id: 0 device: 0 }
  estimated_makespan_us: 30
  num_devices: 1
  memory { device: 0 arena_bytes: 2560 peak_live_bytes: 2560 }
  buffers { name: "c" device: 0 offset: 0 size_bytes: 512 }
  buffers { name: "a" device: 0 offset: 512 size_bytes: 1024 }
  buffers { name: "b" device: 0 offset: 1536 size_bytes: 1024 }
)pb";

TEST(LiveBytesByDeviceTest, ChainOnOneDevice) {
  const auto graph = Parse<weft::v1::Graph>(kChainGraph);
  const auto plan = Parse<weft::v1::Plan>(kChainPlan);
  const std::vector<DeviceLiveBytes> live = LiveBytesByDevice(plan, graph);
  ASSERT_THAT(live, SizeIs(1));
  EXPECT_EQ(live[0].device, 0);
  // c from 0 to the end, a over [0, 20), b over [10, 30); planned sizes.
  EXPECT_THAT(live[0].samples,
              ElementsAre(LiveSample{0, 1536}, LiveSample{10, 2560},
                          LiveSample{20, 1536}, LiveSample{30, 0}));
  EXPECT_EQ(live[0].peak_bytes, 2560);
}

TEST(LiveBytesByDeviceTest, OutputLivesToTheMakespan) {
  const auto graph = Parse<weft::v1::Graph>(kChainGraph);
  auto plan = Parse<weft::v1::Plan>(kChainPlan);
  plan.set_estimated_makespan_us(50);
  const std::vector<DeviceLiveBytes> live = LiveBytesByDevice(plan, graph);
  ASSERT_THAT(live, SizeIs(1));
  EXPECT_THAT(live[0].samples,
              ElementsAre(LiveSample{0, 1536}, LiveSample{10, 2560},
                          LiveSample{20, 1536}, LiveSample{30, 512},
                          LiveSample{50, 0}));
}

TEST(LiveBytesByDeviceTest, TransferUsesTheSourceCopy) {
  const auto graph = Parse<weft::v1::Graph>(R"pb(
    buffers { name: "x" size_bytes: 256 fill: 2 }
    buffers { name: "y" size_bytes: 256 }
    nodes {
      name: "w"
      op: "fill"
      args { buffer { name: "x" access: WRITE } }
    }
    nodes {
      name: "r"
      op: "copy"
      args { buffer { name: "x" access: READ } }
      args { buffer { name: "y" access: WRITE } }
    }
  )pb");
  const auto plan = Parse<weft::v1::Plan>(R"pb(
    nodes { name: "w" stream: 0 estimated_start_us: 0 estimated_end_us: 10 }
    nodes { name: "r" stream: 1 estimated_start_us: 15 estimated_end_us: 25 }
    streams { id: 0 device: 0 }
    streams { id: 1 device: 1 }
    estimated_makespan_us: 25
    num_devices: 2
    memory { device: 0 }
    memory { device: 1 }
    buffers { name: "x" device: 0 size_bytes: 256 }
    buffers { name: "x" device: 1 size_bytes: 256 }
    buffers { name: "y" device: 1 size_bytes: 256 }
  )pb");
  const std::vector<DeviceLiveBytes> live = LiveBytesByDevice(plan, graph);
  ASSERT_THAT(live, SizeIs(2));
  EXPECT_THAT(live[0].samples,
              ElementsAre(LiveSample{0, 256}, LiveSample{25, 0}));
  EXPECT_THAT(
      live[1].samples,
      ElementsAre(LiveSample{0, 0}, LiveSample{15, 512}, LiveSample{25, 0}));
  EXPECT_EQ(live[1].peak_bytes, 512);
}

TEST(LiveBytesByDeviceTest, ControlNodesUseTheirBodiesAndHostNodesNoDevice) {
  const auto graph = Parse<weft::v1::Graph>(R"pb(
    buffers { name: "cond" size_bytes: 256 dtype: INT32 }
    buffers { name: "acc" size_bytes: 512 }
    nodes {
      name: "loop"
      while_loop {
        condition: "cond"
        max_iterations: 4
        body {
          name: "step"
          op: "scale"
          args { buffer { name: "acc" access: READ_WRITE } }
        }
      }
    }
    nodes {
      name: "check"
      op: "less"
      engine: HOST
      args { buffer { name: "acc" access: READ } }
    }
  )pb");
  const auto plan = Parse<weft::v1::Plan>(R"pb(
    nodes { name: "loop" stream: 0 estimated_start_us: 5 estimated_end_us: 40 }
    nodes {
      name: "check"
      stream: 1
      estimated_start_us: 40
      estimated_end_us: 60
    }
    streams { id: 0 device: 0 }
    streams { id: 1 device: 0 engine: HOST }
    estimated_makespan_us: 60
    num_devices: 1
    memory { device: 0 }
    buffers { name: "cond" device: 0 size_bytes: 256 }
    buffers { name: "acc" device: 0 size_bytes: 512 }
  )pb");
  const std::vector<DeviceLiveBytes> live = LiveBytesByDevice(plan, graph);
  ASSERT_THAT(live, SizeIs(1));
  // The host node reads acc from device 0 (the source of its transfer).
  EXPECT_THAT(live[0].samples,
              ElementsAre(LiveSample{0, 0}, LiveSample{5, 768},
                          LiveSample{40, 512}, LiveSample{60, 0}));
}

TEST(LiveBytesByDeviceTest, BodiesUseTheirBuffersOnTheirOwnDevices) {
  // The loop runs on device 0; its body's `step` is planned on device 1,
  // where the plan places acc: live there while the loop runs.
  const auto graph = Parse<weft::v1::Graph>(R"pb(
    buffers { name: "cond" size_bytes: 256 dtype: INT32 }
    buffers { name: "acc" size_bytes: 512 }
    nodes {
      name: "loop"
      while_loop {
        condition: "cond"
        max_iterations: 4
        body {
          name: "step"
          op: "scale"
          device: 1
          args { buffer { name: "acc" access: READ_WRITE } }
        }
        body {
          name: "stop"
          op: "fill"
          device: 0
          args { buffer { name: "cond" access: WRITE } }
        }
      }
    }
  )pb");
  const auto plan = Parse<weft::v1::Plan>(R"pb(
    nodes { name: "loop" stream: 0 estimated_start_us: 5 estimated_end_us: 40 }
    streams { id: 0 device: 0 }
    streams { id: 1 device: 1 }
    estimated_makespan_us: 40
    num_devices: 2
    memory { device: 0 }
    memory { device: 1 }
    buffers { name: "cond" device: 0 size_bytes: 256 }
    buffers { name: "acc" device: 0 size_bytes: 512 }
    buffers { name: "acc" device: 1 size_bytes: 512 }
    bodies {
      node: "loop"
      plan {
        nodes { name: "step" device: 1 stream: 1 }
        nodes { name: "stop" device: 0 stream: 0 }
        streams { id: 0 device: 0 }
        streams { id: 1 device: 1 }
      }
    }
  )pb");
  const std::vector<DeviceLiveBytes> live = LiveBytesByDevice(plan, graph);
  ASSERT_THAT(live, SizeIs(2));
  EXPECT_THAT(live[0].samples, ElementsAre(LiveSample{0, 0}, LiveSample{5, 768},
                                           LiveSample{40, 0}));
  EXPECT_EQ(live[1].device, 1);
  EXPECT_THAT(live[1].samples, ElementsAre(LiveSample{0, 0}, LiveSample{5, 512},
                                           LiveSample{40, 0}));
}

TEST(LiveBytesByDeviceTest, NoBuffersNoSamples) {
  const auto graph = Parse<weft::v1::Graph>(kChainGraph);
  auto plan = Parse<weft::v1::Plan>(kChainPlan);
  plan.clear_buffers();
  const std::vector<DeviceLiveBytes> live = LiveBytesByDevice(plan, graph);
  ASSERT_THAT(live, SizeIs(1));
  EXPECT_THAT(live[0].samples, IsEmpty());
  plan.clear_memory();
  EXPECT_THAT(LiveBytesByDevice(plan, graph), IsEmpty());
}

TEST(LiveBytesByDeviceTest, CopiesTheReplayDoesNotFindAreLeftOut) {
  const auto graph = Parse<weft::v1::Graph>(kChainGraph);
  auto plan = Parse<weft::v1::Plan>(kChainPlan);
  // Not a buffer of the graph, and a copy on a device nothing runs on.
  weft::v1::PlannedBuffer* unknown = plan.add_buffers();
  unknown->set_name("zzz");
  unknown->set_size_bytes(1 << 20);
  weft::v1::PlannedBuffer* elsewhere = plan.add_buffers();
  elsewhere->set_name("a");
  elsewhere->set_device(3);
  elsewhere->set_size_bytes(1 << 20);
  const std::vector<DeviceLiveBytes> live = LiveBytesByDevice(plan, graph);
  ASSERT_THAT(live, SizeIs(2));
  EXPECT_EQ(live[0].peak_bytes, 2560);
  EXPECT_EQ(live[1].device, 3);
  EXPECT_THAT(live[1].samples, IsEmpty());
}

}  // namespace
}  // namespace weft::client
