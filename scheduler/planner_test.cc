#include "scheduler/planner.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "scheduler/graph_builder.h"
#include "scheduler/test_util.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using testing::GraphMaker;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Graph FromText(const std::string& text, int num_devices = 1) {
  weft::v1::Graph proto;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto));
  GraphLimits limits;
  limits.num_devices = num_devices;
  absl::StatusOr<Graph> g = BuildGraph(proto, limits);
  EXPECT_TRUE(g.ok()) << g.status();
  return std::move(g).value();
}

// A fork of two spins joined by a reduction.
constexpr char kForkJoin[] = R"pb(
  name: "forkjoin"
  buffers { name: "x" size_bytes: 16 dtype: FLOAT32 }
  buffers { name: "y" size_bytes: 16 dtype: FLOAT32 }
  buffers { name: "out" size_bytes: 4 dtype: FLOAT32 output: true }
  nodes {
    name: "init"
    op: "fill"
    args { buffer { name: "x" access: WRITE } }
    args { f32: 1 }
    cost { estimated_us: 1 }
  }
  nodes {
    name: "left"
    op: "spin"
    args { buffer { name: "x" access: READ } }
    cost { estimated_us: 10 }
  }
  nodes {
    name: "right"
    op: "copy"
    args { buffer { name: "x" access: READ } }
    args { buffer { name: "y" access: WRITE } }
    cost { estimated_us: 4 }
  }
  nodes {
    name: "sum"
    op: "reduce_sum"
    args { buffer { name: "y" access: READ } }
    args { buffer { name: "out" access: WRITE } }
    after: "left"
    cost { estimated_us: 2 }
  }
)pb";

TEST(PlannerTest, PlansAForkJoinOnOneDevice) {
  Graph g = FromText(kForkJoin);
  absl::StatusOr<Plan> plan = PlanGraph(g, PlannerOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->nodes.size(), 4u);
  EXPECT_EQ(plan->num_devices, 1);
  // init -> left (critical, 10 us) -> sum on stream 0; right on stream 1.
  EXPECT_EQ(plan->nodes[0].stream, 0);
  EXPECT_EQ(plan->nodes[1].stream, 0);
  EXPECT_EQ(plan->nodes[2].stream, 1);
  EXPECT_EQ(plan->nodes[3].stream, 0);
  EXPECT_EQ(plan->streams.size(), 2u);
  EXPECT_EQ(plan->num_events, 2);
  EXPECT_EQ(plan->critical_path_us, 13);
  // One device runs one kernel at a time: all 17 us of work in sequence.
  EXPECT_EQ(plan->lower_bound_us, 17);
  EXPECT_EQ(plan->estimated_makespan_us, 17);
  EXPECT_THAT(plan->nodes[0].reason, HasSubstr("device 0 (round robin)"));
  EXPECT_THAT(plan->nodes[0].reason, HasSubstr("new stream 0"));
  EXPECT_THAT(plan->nodes[1].reason, HasSubstr("continues after 'init'"));

  weft::v1::Plan proto = PlanToProto(g, *plan);
  ASSERT_EQ(proto.nodes_size(), 4);
  EXPECT_EQ(proto.nodes(0).name(), "init");
  EXPECT_EQ(proto.nodes(3).name(), "sum");
  EXPECT_THAT(proto.nodes(3).deps(), ElementsAre("left", "right"));
  EXPECT_THAT(proto.nodes(2).wait_events(), ElementsAre(0));
  EXPECT_EQ(proto.nodes(0).signal_event(), 0);
  EXPECT_EQ(proto.nodes(3).reason(), plan->nodes[3].reason);
  EXPECT_EQ(proto.streams_size(), 2);
  EXPECT_EQ(proto.streams(1).id(), 1);
  EXPECT_EQ(proto.num_events(), 2);
  EXPECT_EQ(proto.critical_path_us(), 13);
  EXPECT_EQ(proto.lower_bound_us(), 17);
  EXPECT_EQ(proto.estimated_makespan_us(), 17);
  EXPECT_EQ(proto.nodes(3).estimated_end_us(), 17);
  EXPECT_EQ(proto.num_devices(), 1);
}

TEST(PlannerTest, RoundRobinSplitsAcrossDevices) {
  Graph g = FromText(kForkJoin);
  PlannerOptions options;
  options.num_devices = 2;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<int> devices;
  for (const PlannedNode& pn : plan->nodes) devices.push_back(pn.device);
  EXPECT_THAT(devices, ElementsAre(0, 1, 0, 1));
  EXPECT_EQ(plan->streams.size(), 2u);
  EXPECT_EQ(plan->lower_bound_us, 13);
  EXPECT_GE(plan->estimated_makespan_us, plan->lower_bound_us);
}

TEST(PlannerTest, SingleStreamMode) {
  Graph g = FromText(kForkJoin);
  PlannerOptions options;
  options.stream_mode = StreamMode::kSingle;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->streams.size(), 1u);
  EXPECT_EQ(plan->num_events, 0);
  EXPECT_THAT(plan->nodes[2].reason, HasSubstr("single-stream mode"));
}

TEST(PlannerTest, SingleModeRejectsStreamLabels) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:r", {.label = "io"});
  PlannerOptions options;
  options.stream_mode = StreamMode::kSingle;
  absl::StatusOr<Plan> plan = PlanGraph(m.Build(), options);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("graph.nodes[1].stream_label"));
}

TEST(PlannerTest, UnimplementedPolicy) {
  Graph g = FromText(kForkJoin);
  PlannerOptions options;
  options.device_policy = DevicePolicyKind::kMinFinishTime;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("MIN_FINISH_TIME is not implemented yet"));
}

TEST(PlannerTest, RejectsBadOptions) {
  Graph g = FromText(kForkJoin);
  PlannerOptions options;
  options.max_streams_per_device = 0;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("options.max_streams_per_device"));
  options = PlannerOptions();
  options.num_devices = 0;
  plan = PlanGraph(g, options);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("options.num_devices"));
  options = PlannerOptions();
  options.busy_streams = {1, 2};
  plan = PlanGraph(g, options);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("options.busy_streams"));
}

TEST(PlannerTest, RejectsPinsBeyondTheDevices) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:r", {.device = 3});
  PlannerOptions options;
  options.num_devices = 2;
  absl::StatusOr<Plan> plan = PlanGraph(m.Build(), options);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("graph.nodes[1].device: device 3 is outside [0, 2)"));
}

TEST(PlannerTest, EmptyGraph) {
  absl::StatusOr<Plan> plan =
      PlanGraph(Graph("empty", {}, {}), PlannerOptions());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->nodes, IsEmpty());
  EXPECT_THAT(plan->streams, IsEmpty());
  EXPECT_EQ(plan->estimated_makespan_us, 0);
}

TEST(PlannerOptionsTest, MapsTheWireEnums) {
  weft::v1::ScheduleOptions proto;
  proto.set_device_policy(weft::v1::MINMAX_TRANSFER_TIME);
  proto.set_stream_mode(weft::v1::SINGLE);
  proto.set_max_streams_per_device(3);
  absl::StatusOr<PlannerOptions> options =
      PlannerOptionsFromProto(proto, 4, 16);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->num_devices, 4);
  EXPECT_EQ(options->device_policy, DevicePolicyKind::kMinMaxTransferTime);
  EXPECT_EQ(options->stream_mode, StreamMode::kSingle);
  EXPECT_EQ(options->max_streams_per_device, 3);

  options = PlannerOptionsFromProto(weft::v1::ScheduleOptions(), 2, 16);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->device_policy, DevicePolicyKind::kRoundRobin);
  EXPECT_EQ(options->stream_mode, StreamMode::kMulti);
  EXPECT_EQ(options->max_streams_per_device, 16);  // 0 -> the default
}

TEST(PlannerOptionsTest, RejectsNegativeStreamCap) {
  weft::v1::ScheduleOptions proto;
  proto.set_max_streams_per_device(-1);
  absl::StatusOr<PlannerOptions> options = PlannerOptionsFromProto(proto, 1, 8);
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(options.status().message()),
              HasSubstr("options.max_streams_per_device: must not be "
                        "negative, got -1"));
}

TEST(PlannerOptionsTest, RejectsUnknownEnumValues) {
  weft::v1::ScheduleOptions proto;
  proto.set_device_policy(static_cast<weft::v1::DevicePolicy>(77));
  absl::StatusOr<PlannerOptions> options = PlannerOptionsFromProto(proto, 1, 8);
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(options.status().message()),
              HasSubstr("options.device_policy: unknown device policy 77"));
  proto = weft::v1::ScheduleOptions();
  proto.set_stream_mode(static_cast<weft::v1::StreamMode>(5));
  options = PlannerOptionsFromProto(proto, 1, 8);
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(options.status().message()),
              HasSubstr("options.stream_mode"));
}

}  // namespace
}  // namespace weft::scheduler
