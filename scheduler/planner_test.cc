#include "scheduler/planner.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "scheduler/device_policy.h"
#include "scheduler/graph_builder.h"
#include "scheduler/plan_proto.h"
#include "scheduler/test_util.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using testing::GraphMaker;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::weft::testing::StatusIs;

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
  PlannerOptions options;
  options.device_policy = DevicePolicyKind::kRoundRobin;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
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
  // One device runs one full kernel at a time: all 17 us of work in
  // sequence, then `out` (4 bytes) goes back to the host.
  EXPECT_DOUBLE_EQ(plan->lower_bound_us, 17 + 4 / 25e3);
  EXPECT_DOUBLE_EQ(plan->estimated_makespan_us, 17 + 4 / 25e3);
  EXPECT_THAT(plan->reasons[0], HasSubstr("device 0 (round robin)"));
  EXPECT_THAT(plan->reasons[0], HasSubstr("new stream 0"));
  EXPECT_THAT(plan->reasons[1], HasSubstr("continues after 'init'"));

  weft::v1::Plan proto = PlanToProto(g, *plan);
  ASSERT_EQ(proto.nodes_size(), 4);
  EXPECT_EQ(proto.nodes(0).name(), "init");
  EXPECT_EQ(proto.nodes(3).name(), "sum");
  EXPECT_THAT(proto.nodes(3).deps(), ElementsAre("left", "right"));
  EXPECT_THAT(proto.nodes(2).wait_events(), ElementsAre(0));
  EXPECT_EQ(proto.nodes(0).signal_event(), 0);
  EXPECT_EQ(proto.nodes(3).reason(), plan->reasons[3]);
  EXPECT_EQ(proto.streams_size(), 2);
  EXPECT_EQ(proto.streams(1).id(), 1);
  EXPECT_EQ(proto.num_events(), 2);
  EXPECT_EQ(proto.critical_path_us(), 13);
  EXPECT_DOUBLE_EQ(proto.lower_bound_us(), 17 + 4 / 25e3);
  EXPECT_DOUBLE_EQ(proto.estimated_makespan_us(), 17 + 4 / 25e3);
  EXPECT_EQ(proto.nodes(3).estimated_end_us(), 17);
  EXPECT_EQ(proto.num_devices(), 1);
}

TEST(PlannerTest, RoundRobinSplitsAcrossDevices) {
  Graph g = FromText(kForkJoin);
  PlannerOptions options;
  options.num_devices = 2;
  options.device_policy = DevicePolicyKind::kRoundRobin;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<int> devices;
  for (const PlannedNode& pn : plan->nodes) devices.push_back(pn.device);
  EXPECT_THAT(devices, ElementsAre(0, 1, 0, 1));
  // A stream per device, and one eager copy stream on device 1 for x (to
  // left) and y (to sum), both written on device 0's stream.
  EXPECT_EQ(plan->streams.size(), 3u);
  ASSERT_EQ(plan->copies.size(), 2u);
  EXPECT_EQ(g.buffer(plan->copies[0].buffer).name, "x");
  EXPECT_EQ(g.buffer(plan->copies[1].buffer).name, "y");
  EXPECT_EQ(plan->copies[0].stream, plan->copies[1].stream);
  const weft::v1::Plan proto = PlanToProto(g, *plan);
  ASSERT_EQ(proto.copies_size(), 2);
  EXPECT_EQ(proto.copies(0).buffer(), "x");
  EXPECT_EQ(proto.copies(0).writer(), "init");
  EXPECT_EQ(proto.copies(0).reader(), "left");
  EXPECT_EQ(proto.copies(1).reader(), "sum");
  EXPECT_EQ(proto.copies(1).device(), 1);
  // The critical path, then `out` (4 bytes) back to the host.
  EXPECT_DOUBLE_EQ(plan->lower_bound_us, 13 + 4 / 25e3);
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
  EXPECT_THAT(plan->reasons[2], HasSubstr("single-stream mode"));
}

TEST(PlannerTest, SingleModeRejectsStreamLabels) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:r", {.label = "io"});
  PlannerOptions options;
  options.stream_mode = StreamMode::kSingle;
  absl::StatusOr<Plan> plan = PlanGraph(m.Build(), options);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("graph.nodes[1].stream_label")));
}

TEST(PlannerTest, EveryPolicyPlans) {
  Graph g = FromText(kForkJoin);
  for (DevicePolicyKind kind :
       {DevicePolicyKind::kRoundRobin, DevicePolicyKind::kStreamAware,
        DevicePolicyKind::kMinTransferSize,
        DevicePolicyKind::kMinMinTransferTime,
        DevicePolicyKind::kMinMaxTransferTime,
        DevicePolicyKind::kMinFinishTime}) {
    PlannerOptions options;
    options.num_devices = 2;
    options.device_policy = kind;
    absl::StatusOr<Plan> plan = PlanGraph(g, options);
    ASSERT_TRUE(plan.ok()) << static_cast<int>(kind) << ": " << plan.status();
    EXPECT_GE(plan->estimated_makespan_us, plan->lower_bound_us - 1e-9);
    ASSERT_EQ(plan->reasons.size(), plan->nodes.size());
    for (const std::string& reason : plan->reasons) {
      EXPECT_FALSE(reason.empty());
    }
  }
}

TEST(PlannerTest, MinFinishTimeKeepsTheForkJoinWhereItIsFastest) {
  Graph g = FromText(kForkJoin);
  PlannerOptions options;
  options.num_devices = 2;
  options.device_policy = DevicePolicyKind::kMinFinishTime;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // init on 0; left (10 us) and right (4 us) split across the devices;
  // sum after both, on device 0, where left ends last: y crosses as soon
  // as right writes it.
  std::vector<int> devices;
  for (const PlannedNode& pn : plan->nodes) devices.push_back(pn.device);
  EXPECT_THAT(devices, ElementsAre(0, 0, 1, 0));
  EXPECT_THAT(plan->reasons[0],
              HasSubstr("device 0 (earliest estimated finish: 1 us)"));
  EXPECT_LT(plan->estimated_makespan_us, 17);  // beats one device
}

TEST(PlannerTest, ExplainOffLeavesReasonsEmpty) {
  Graph g = FromText(kForkJoin);
  PlannerOptions options;
  options.explain = false;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->reasons, IsEmpty());
  PlanProfile profile;
  plan = PlanGraph(g, PlannerOptions(), &profile);
  ASSERT_TRUE(plan.ok());
  EXPECT_GE(profile.streams_s, 0);
}

TEST(PlannerTest, SearchPlacesEachOrderOnce) {
  // A counter's chain and a scratch buffer's, with uploads: few orders,
  // and a plan the search cannot bring to its bound, so it tries every
  // round it may.
  const Graph g = FromText(
      R"pb(
        name: "step"
        buffers { name: "i" size_bytes: 4 dtype: FLOAT32 output: true }
        buffers { name: "one" size_bytes: 4 dtype: FLOAT32 fill: 1 }
        buffers { name: "go" size_bytes: 4 dtype: INT32 fill: 1 output: true }
        buffers { name: "y" size_bytes: 4 dtype: FLOAT32 }
        nodes {
          name: "inc"
          op: "axpy"
          args { f32: 1 }
          args { buffer { name: "one" access: READ } }
          args { buffer { name: "i" access: READ_WRITE } }
        }
        nodes {
          name: "scale0"
          op: "scale"
          args { f32: 1 }
          args { buffer { name: "y" access: READ_WRITE } }
        }
        nodes {
          name: "scale1"
          op: "scale"
          args { f32: 1 }
          args { buffer { name: "y" access: READ_WRITE } }
        }
        nodes {
          name: "test"
          op: "less"
          args { buffer { name: "i" access: READ } }
          args { f32: 10 }
          args { buffer { name: "go" access: WRITE } }
        }
      )pb",
      2);
  for (int devices : {1, 2}) {
    PlannerOptions options;
    options.num_devices = devices;
    options.simulate = false;
    PlanProfile profile;
    absl::StatusOr<Plan> plan = PlanGraph(g, options, &profile);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_LE(profile.orders_placed, 4) << devices << " devices";
  }
}

TEST(PlannerTest, SimulateOffPlansTheSameAndLeavesEstimatesZero) {
  // A random graph over few buffers, with copies, on three devices: many
  // cross-device edges, events and transfers.
  std::mt19937 rng(11);
  GraphMaker m;
  for (int b = 0; b < 12; ++b) m.Buffer(absl::StrCat("b", b), 4096);
  const char* modes[] = {":r", ":w", ":rw"};
  for (int v = 0; v < 300; ++v) {
    std::string uses;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
      absl::StrAppend(&uses, uses.empty() ? "" : " ", "b", rng() % 12,
                      modes[rng() % 3]);
    }
    testing::NodeOptions node;
    node.cost = 1 + rng() % 50;
    if (rng() % 8 == 0) {
      node.engine = Engine::kCopy;
      node.op = "copy";
    }
    m.Node(absl::StrCat("n", v), uses, node);
  }
  Graph g = m.Build();
  for (DevicePolicyKind policy :
       {DevicePolicyKind::kRoundRobin, DevicePolicyKind::kMinFinishTime}) {
    PlannerOptions options;
    options.num_devices = 3;
    options.device_policy = policy;
    absl::StatusOr<Plan> full = PlanGraph(g, options);
    ASSERT_TRUE(full.ok()) << full.status();
    options.simulate = false;
    absl::StatusOr<Plan> bare = PlanGraph(g, options);
    ASSERT_TRUE(bare.ok()) << bare.status();
    ASSERT_EQ(bare->nodes.size(), full->nodes.size());
    EXPECT_EQ(bare->reasons, full->reasons);
    ASSERT_GT(full->num_events, 0);
    EXPECT_GT(full->estimated_makespan_us, 0);
    EXPECT_EQ(bare->estimated_makespan_us, 0);
    EXPECT_EQ(bare->critical_path_us, full->critical_path_us);
    EXPECT_EQ(bare->lower_bound_us, 0);
    EXPECT_EQ(bare->num_events, full->num_events);
    EXPECT_EQ(bare->streams.size(), full->streams.size());
    for (size_t i = 0; i < full->nodes.size(); ++i) {
      const PlannedNode& a = full->nodes[i];
      const PlannedNode& b = bare->nodes[i];
      EXPECT_EQ(b.node, a.node);
      EXPECT_EQ(b.device, a.device);
      EXPECT_EQ(b.stream, a.stream);
      EXPECT_EQ(b.peer_stream, a.peer_stream);
      EXPECT_EQ(b.signal_event, a.signal_event);
    }
    EXPECT_EQ(bare->deps, full->deps);
    EXPECT_EQ(bare->waits, full->waits);
    EXPECT_EQ(full->estimates.size(), full->nodes.size());
    EXPECT_TRUE(bare->estimates.empty());
  }
}

TEST(PlannerTest, ParentDevicesKeepAChainTogether) {
  // A chain of four under STREAM_AWARE: alone, each step moves to the
  // less busy device; kept with its parent when that is no worse, the
  // chain stays on one device after its first move and needs fewer events.
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:rw").Node("c", "x:rw");
  m.Node("d", "x:rw");
  Graph g = m.Build();
  PlannerOptions options;
  options.num_devices = 2;
  options.device_policy = DevicePolicyKind::kStreamAware;
  absl::StatusOr<Plan> free = PlanGraph(g, options);
  ASSERT_TRUE(free.ok());
  options.restrict_to_parent_devices = true;
  absl::StatusOr<Plan> kept = PlanGraph(g, options);
  ASSERT_TRUE(kept.ok());
  std::vector<int> a, b;
  for (const PlannedNode& pn : free->nodes) a.push_back(pn.device);
  for (const PlannedNode& pn : kept->nodes) b.push_back(pn.device);
  EXPECT_THAT(a, ElementsAre(0, 1, 0, 1));
  EXPECT_THAT(b, ElementsAre(0, 1, 1, 1));
  EXPECT_EQ(free->num_events, 3);
  EXPECT_EQ(kept->num_events, 1);
  EXPECT_THAT(kept->reasons[2], HasSubstr("a predecessor's device"));
}

TEST(PlannerTest, TopologySlowsCrossDeviceWork) {
  Graph g = FromText(kForkJoin);
  PlannerOptions options;
  options.num_devices = 2;
  options.device_policy = DevicePolicyKind::kRoundRobin;
  options.eager_copies = false;  // copies on the nodes' own streams
  absl::StatusOr<Plan> fast = PlanGraph(g, options);
  ASSERT_TRUE(fast.ok());
  absl::StatusOr<Topology> slow =
      Topology::FromCsv("From,To,GB/s\n-1,0,1\n-1,1,1\n0,1,1\n", 2);
  ASSERT_TRUE(slow.ok()) << slow.status();
  options.topology = *slow;
  absl::StatusOr<Plan> slowed = PlanGraph(g, options);
  ASSERT_TRUE(slowed.ok());
  EXPECT_GT(slowed->estimated_makespan_us, fast->estimated_makespan_us);
  EXPECT_GT(slowed->estimates[1].transfer_us, 0);
}

TEST(PlannerTest, SplitsLongStreams) {
  GraphMaker m;
  m.Buffer("x").Node("n0", "x:w");
  for (int i = 1; i < 10; ++i) m.Node("n" + std::to_string(i), "x:rw");
  PlannerOptions options;
  options.max_nodes_per_stream = 4;
  absl::StatusOr<Plan> plan = PlanGraph(m.Build(), options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Three nodes and a record; then a wait, two nodes and a record, twice;
  // then a wait and the last three nodes: 4 streams, 3 events.
  EXPECT_EQ(plan->streams.size(), 4u);
  EXPECT_EQ(plan->num_events, 3);
  EXPECT_THAT(plan->reasons[3], HasSubstr("split from stream 0"));
  EXPECT_EQ(plan->estimated_makespan_us, 10);
}

TEST(PlannerTest, RejectsBadOptions) {
  Graph g = FromText(kForkJoin);
  PlannerOptions options;
  options.max_streams_per_device = 0;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  EXPECT_THAT(plan.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("options.max_streams_per_device")));
  options = PlannerOptions();
  options.num_devices = 0;
  plan = PlanGraph(g, options);
  EXPECT_THAT(plan.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("options.num_devices")));
  options = PlannerOptions();
  options.busy_streams = {1, 2};
  plan = PlanGraph(g, options);
  EXPECT_THAT(plan.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                      HasSubstr("options.busy_streams")));
  struct Bad {
    void (*set)(PlannerOptions&);
    const char* message;
  };
  const Bad bad[] = {
      {[](PlannerOptions& o) { o.num_devices = 64; },
       "options.num_devices: need between 1 and 63 devices, got 64"},
      {[](PlannerOptions& o) { o.data_threshold = 1.5; },
       "options.data_threshold: must be in [0, 1], got 1.5"},
      {[](PlannerOptions& o) { o.max_nodes_per_stream = 2; },
       "options.max_nodes_per_stream: must be 0 (no limit) or at least 3"},
      {[](PlannerOptions& o) { o.max_concurrent_kernels = 0; },
       "options.max_concurrent_kernels: must be at least 1, got 0"},
      {[](PlannerOptions& o) { o.copy_engines_per_device = 0; },
       "options.copy_engines_per_device: must be at least 1, got 0"},
      {[](PlannerOptions& o) {
         o.num_devices = 3;
         o.topology = Topology::Default(2);
       },
       "options.topology: describes 2 devices, the plan has 3"},
  };
  for (const Bad& b : bad) {
    options = PlannerOptions();
    b.set(options);
    plan = PlanGraph(g, options);
    EXPECT_THAT(plan.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                        HasSubstr(b.message)))
        << b.message;
  }
}

TEST(PlannerTest, RejectsPinsBeyondTheDevices) {
  GraphMaker m;
  m.Buffer("x").Node("a", "x:w").Node("b", "x:r", {.device = 3});
  PlannerOptions options;
  options.num_devices = 2;
  absl::StatusOr<Plan> plan = PlanGraph(m.Build(), options);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(
      plan.status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("graph.nodes[1].device: device 3 is outside [0, 2)")));
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
  EXPECT_EQ(options->device_policy, DevicePolicyKind::kLookaheadFinishTime);
  EXPECT_EQ(options->stream_mode, StreamMode::kMulti);
  EXPECT_EQ(options->max_streams_per_device, 16);  // 0 -> the default

  // ROUND_ROBIN is the enum's zero: set, it is kept.
  proto.set_device_policy(weft::v1::ROUND_ROBIN);
  options = PlannerOptionsFromProto(proto, 2, 16);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->device_policy, DevicePolicyKind::kRoundRobin);
}

TEST(PlannerOptionsTest, RejectsNegativeStreamCap) {
  weft::v1::ScheduleOptions proto;
  proto.set_max_streams_per_device(-1);
  absl::StatusOr<PlannerOptions> options = PlannerOptionsFromProto(proto, 1, 8);
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(
      options.status(),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr(
              "options.max_streams_per_device: must not be negative, got -1")));
}

TEST(PlannerOptionsTest, RejectsUnknownEnumValues) {
  weft::v1::ScheduleOptions proto;
  proto.set_device_policy(static_cast<weft::v1::DevicePolicy>(77));
  absl::StatusOr<PlannerOptions> options = PlannerOptionsFromProto(proto, 1, 8);
  EXPECT_THAT(
      options.status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("options.device_policy: unknown device policy 77")));
  proto = weft::v1::ScheduleOptions();
  proto.set_stream_mode(static_cast<weft::v1::StreamMode>(5));
  options = PlannerOptionsFromProto(proto, 1, 8);
  EXPECT_THAT(options.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("options.stream_mode")));
}

TEST(PlannerOptionsTest, MapsPlacementAndSplittingOptions) {
  weft::v1::ScheduleOptions proto;
  proto.set_data_threshold(0.25);
  proto.set_restrict_to_parent_devices(true);
  proto.set_max_nodes_per_stream(3);
  absl::StatusOr<PlannerOptions> options = PlannerOptionsFromProto(proto, 2, 8);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->data_threshold, 0.25);
  EXPECT_TRUE(options->restrict_to_parent_devices);
  EXPECT_EQ(options->max_nodes_per_stream, 3);

  proto.set_data_threshold(1);
  proto.set_max_nodes_per_stream(1000);
  options = PlannerOptionsFromProto(proto, 2, 8);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->data_threshold, 1);
  EXPECT_EQ(options->max_nodes_per_stream, 1000);

  // Zero means the planner's defaults.
  const PlannerOptions defaults;
  options = PlannerOptionsFromProto(weft::v1::ScheduleOptions(), 2, 8);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->data_threshold, defaults.data_threshold);
  EXPECT_FALSE(options->restrict_to_parent_devices);
  EXPECT_EQ(options->max_nodes_per_stream, defaults.max_nodes_per_stream);
}

TEST(PlannerOptionsTest, RejectsDataThresholdOutsideUnitInterval) {
  for (double bad : {-0.5, 1.5, std::nan("")}) {
    weft::v1::ScheduleOptions proto;
    proto.set_data_threshold(bad);
    absl::StatusOr<PlannerOptions> options =
        PlannerOptionsFromProto(proto, 2, 8);
    ASSERT_FALSE(options.ok()) << bad;
    EXPECT_THAT(
        options.status(),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 HasSubstr("options.data_threshold: must be in [0, 1]")));
  }
}

TEST(PlannerOptionsTest, RejectsMaxNodesPerStreamBelowSplitterMinimum) {
  for (int bad : {-1, 1, 2}) {
    weft::v1::ScheduleOptions proto;
    proto.set_max_nodes_per_stream(bad);
    absl::StatusOr<PlannerOptions> options =
        PlannerOptionsFromProto(proto, 2, 8);
    ASSERT_FALSE(options.ok()) << bad;
    EXPECT_THAT(options.status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat(
                             "options.max_nodes_per_stream: must be at least 3 "
                             "(0: the default 65536), got ",
                             bad))));
  }
}

// init fills x on device 0; move, a COPY node on device 1, copies it into
// y; use reduces y on device 1.
constexpr char kCrossDeviceCopy[] = R"pb(
  name: "xcopy"
  buffers { name: "x" size_bytes: 3000000 dtype: FLOAT32 }
  buffers { name: "y" size_bytes: 3000000 dtype: FLOAT32 }
  buffers { name: "out" size_bytes: 4 dtype: FLOAT32 output: true }
  nodes {
    name: "init"
    op: "fill"
    args { buffer { name: "x" access: WRITE } }
    args { f32: 1 }
    cost { estimated_us: 1 }
    device: 0
  }
  nodes {
    name: "move"
    op: "copy"
    args { buffer { name: "x" access: READ } }
    args { buffer { name: "y" access: WRITE } }
    engine: COPY
    cost { estimated_us: 4 }
    device: 1
  }
  nodes {
    name: "use"
    op: "reduce_sum"
    args { buffer { name: "y" access: READ } }
    args { buffer { name: "out" access: WRITE } }
    cost { estimated_us: 2 }
    device: 1
  }
)pb";

TEST(PlannerTest, CopyBetweenDevicesHoldsAPeerStreamOnTheSource) {
  Graph g = FromText(kCrossDeviceCopy, 2);
  PlannerOptions options;
  options.num_devices = 2;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->streams.size(), 4u);
  EXPECT_EQ(plan->nodes[0].stream, 0);
  EXPECT_EQ(plan->nodes[1].stream, 1);
  EXPECT_EQ(plan->nodes[1].peer_stream, 2);
  EXPECT_EQ(plan->nodes[2].stream, 3);
  EXPECT_EQ(plan->nodes[0].peer_stream, -1);
  EXPECT_EQ(plan->nodes[2].peer_stream, -1);
  EXPECT_EQ(plan->streams[1].device, 1);
  EXPECT_EQ(plan->streams[2].device, 0);
  EXPECT_EQ(plan->streams[2].engine, Engine::kCopy);
  EXPECT_THAT(plan->Waits(1), ElementsAre(0));
  EXPECT_THAT(plan->Waits(2), ElementsAre(1));
  EXPECT_EQ(plan->num_events, 2);
  // As the executor runs it, x first comes over to device 1 (3 MB at
  // 300 GB/s) and the copy then runs there; `out` goes back at the end.
  EXPECT_EQ(plan->estimates[1].transfer_us, 10);
  EXPECT_EQ(plan->estimates[1].start_us, 11);
  EXPECT_DOUBLE_EQ(plan->estimated_makespan_us, 17 + 4 / 25e3);
  EXPECT_THAT(plan->reasons[1], HasSubstr("peer copy stream 2 on device 0"));

  weft::v1::Plan proto = PlanToProto(g, *plan);
  EXPECT_TRUE(proto.nodes(1).has_peer_stream());
  EXPECT_EQ(proto.nodes(1).peer_stream(), 2);
  EXPECT_FALSE(proto.nodes(0).has_peer_stream());

  // SINGLE mode: the peer is device 0's one stream.
  options.stream_mode = StreamMode::kSingle;
  plan = PlanGraph(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->streams.size(), 2u);
  EXPECT_EQ(plan->nodes[1].stream, 1);
  EXPECT_EQ(plan->nodes[1].peer_stream, 0);
  EXPECT_EQ(plan->num_events, 0);  // init is on the peer stream
}

TEST(PlannerTest, CopyOnTheDeviceHoldingItsInputHasNoPeer) {
  PlannerOptions options;
  options.num_devices = 2;
  Graph local = FromText(
      absl::StrReplaceAll(kCrossDeviceCopy, {{"device: 1", "device: 0"}}), 2);
  absl::StatusOr<Plan> plan = PlanGraph(local, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const PlannedNode& pn : plan->nodes) EXPECT_EQ(pn.peer_stream, -1);
}

// Every node and stream of the plans of `plan`'s bodies, at any depth,
// is on `device`.
void ExpectBodiesOn(const Plan& plan, int device, int depth = 0) {
  for (const std::vector<std::shared_ptr<const Plan>>& bodies : plan.bodies) {
    for (const std::shared_ptr<const Plan>& body : bodies) {
      EXPECT_EQ(body->num_devices, plan.num_devices);
      for (const PlannedNode& pn : body->nodes) {
        EXPECT_EQ(pn.device, device) << "at depth " << depth + 1;
      }
      for (const PlannedStream& ps : body->streams) {
        EXPECT_EQ(ps.device, device) << "at depth " << depth + 1;
      }
      for (const std::string& reason : body->reasons) {
        EXPECT_THAT(reason, ::testing::StartsWith(absl::StrCat(
                                "device ", device, " (planned as for one")));
        EXPECT_THAT(reason,
                    Not(HasSubstr(absl::StrCat(" on device ", 1 - device))));
      }
      ExpectBodiesOn(*body, device, depth + 1);
    }
  }
}

// A case_of holding a loop, after a node pinned to device 1 that writes
// what it uses: its branches, and the loop's body inside one of them, all
// run on the case_of's device.
TEST(PlannerTest, NestedBodiesRunOnTheirControlNodesDevice) {
  weft::v1::Graph proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        buffers { name: "x" size_bytes: 1048576 dtype: FLOAT32 fill: 1 }
        buffers { name: "go" size_bytes: 4 dtype: INT32 }
        buffers { name: "pick" size_bytes: 8 dtype: INT64 }
        nodes {
          name: "warm"
          op: "scale"
          device: 1
          args { f32: 2 }
          args { buffer { name: "x" access: READ_WRITE } }
          cost { estimated_us: 100 }
        }
        nodes {
          name: "C"
          case_of {
            selector: "pick"
            branches {
              nodes {
                name: "a"
                op: "scale"
                args { f32: 2 }
                args { buffer { name: "x" access: READ_WRITE } }
              }
            }
            branches {
              nodes {
                name: "inner"
                while_loop {
                  condition: "go"
                  max_iterations: 3
                  body {
                    name: "b"
                    op: "scale"
                    args { f32: 3 }
                    args { buffer { name: "x" access: READ_WRITE } }
                  }
                  body {
                    name: "stop"
                    op: "fill"
                    args { buffer { name: "go" access: WRITE } }
                    args { i32: 0 }
                  }
                }
              }
            }
          }
        }
      )pb",
      &proto));
  GraphLimits limits;
  limits.num_devices = 2;
  absl::StatusOr<Graph> graph = BuildGraph(proto, limits);
  ASSERT_OK(graph.status());
  for (const DevicePolicyKind policy :
       {DevicePolicyKind::kRoundRobin, DevicePolicyKind::kMinTransferSize,
        DevicePolicyKind::kMinFinishTime}) {
    SCOPED_TRACE(static_cast<int>(policy));
    PlannerOptions options;
    options.num_devices = 2;
    options.device_policy = policy;
    absl::StatusOr<Plan> plan = PlanGraph(*graph, options);
    ASSERT_OK(plan.status());
    ASSERT_EQ(plan->bodies.size(), 2u);
    int device = -1;
    for (const PlannedNode& pn : plan->nodes) {
      if (pn.node == 1) device = pn.device;
    }
    ASSERT_GE(device, 0);
    ExpectBodiesOn(*plan, device);
  }
}

// A loop over 64 MiB that a node pinned to device 1 wrote: its bodies run
// on its device, so it goes where the data is, and the plan's estimate
// moves nothing.
TEST(PlannerTest, ControlNodeGoesWhereItsDataIs) {
  weft::v1::Graph proto;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        buffers { name: "x" size_bytes: 67108864 dtype: FLOAT32 }
        buffers { name: "go" size_bytes: 4 dtype: INT32 }
        nodes {
          name: "make"
          op: "fill"
          device: 1
          args { buffer { name: "x" access: WRITE } }
          args { f32: 1 }
          cost { estimated_us: 100 }
        }
        nodes {
          name: "L"
          while_loop {
            condition: "go"
            max_iterations: 4
            body {
              name: "step"
              op: "scale"
              args { f32: 2 }
              args { buffer { name: "x" access: READ_WRITE } }
              cost { estimated_us: 50 }
            }
            body {
              name: "stop"
              op: "fill"
              args { buffer { name: "go" access: WRITE } }
              args { i32: 0 }
            }
          }
        }
      )pb",
      &proto));
  GraphLimits limits;
  limits.num_devices = 2;
  absl::StatusOr<Graph> graph = BuildGraph(proto, limits);
  ASSERT_OK(graph.status());
  // Simulated, and as a job.
  for (const bool simulate : {true, false}) {
    SCOPED_TRACE(simulate);
    PlannerOptions options;
    options.num_devices = 2;
    options.simulate = simulate;
    absl::StatusOr<Plan> plan = PlanGraph(*graph, options);
    ASSERT_OK(plan.status());
    ASSERT_EQ(plan->nodes.size(), 2u);
    EXPECT_EQ(plan->nodes[1].node, 1);
    EXPECT_EQ(plan->nodes[1].device, 1);
    if (!simulate) continue;
    ASSERT_EQ(plan->estimates.size(), 2u);
    EXPECT_EQ(plan->estimates[1].transfer_us, 0);
  }
  // Beside more nodes than placement models one by one (the device walk
  // by load): small independent ones that keep both devices about as busy.
  for (int i = 0; i < kMaxModelledPlacementNodes; ++i) {
    weft::v1::Buffer* b = proto.add_buffers();
    b->set_name(absl::StrCat("f", i));
    b->set_size_bytes(64);
    b->set_dtype(weft::v1::FLOAT32);
    weft::v1::Node* n = proto.add_nodes();
    n->set_name(absl::StrCat("fill", i));
    n->set_op("fill");
    weft::v1::Arg* out = n->add_args();
    out->mutable_buffer()->set_name(b->name());
    out->mutable_buffer()->set_access(weft::v1::WRITE);
    n->add_args()->set_f32(1);
    n->mutable_cost()->set_estimated_us(0.001);
  }
  limits.max_nodes = proto.nodes_size() + 2;  // and the body's
  limits.max_buffers = proto.buffers_size();
  absl::StatusOr<Graph> large = BuildGraph(proto, limits);
  ASSERT_OK(large.status());
  PlannerOptions options;
  options.num_devices = 2;
  options.explain = false;
  absl::StatusOr<Plan> plan = PlanGraph(*large, options);
  ASSERT_OK(plan.status());
  int device = -1;
  for (const PlannedNode& pn : plan->nodes) {
    if (pn.node == 1) device = pn.device;
  }
  EXPECT_EQ(device, 1);
}

}  // namespace
}  // namespace weft::scheduler
