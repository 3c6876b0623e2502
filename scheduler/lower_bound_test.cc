#include "scheduler/lower_bound.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/cost_model.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph_builder.h"
#include "scheduler/planner.h"
#include "scheduler/test_util.h"
#include "weft/v1/weft.pb.h"

namespace weft::scheduler {
namespace {

using testing::Buffer;
using testing::GraphMaker;
using testing::Kernel;

LowerBoundTerms BoundOf(const Graph& g, int devices) {
  absl::StatusOr<Dag> dag = InferDependencies(g);
  EXPECT_TRUE(dag.ok()) << dag.status();
  LowerBoundOptions options;
  options.num_devices = devices;
  return ComputeLowerBound(g, *dag, options);
}

TEST(LowerBoundTest, CriticalPathAndWork) {
  GraphMaker m;
  m.Buffer("x").Buffer("y").Buffer("z");
  m.Node("a", "x:w", {.cost = 4});
  m.Node("b", "x:r y:w", {.cost = 6});
  m.Node("c", "z:w", {.cost = 8});
  Graph g = m.Build();
  EXPECT_EQ(BoundOf(g, 1).critical_path_us, 10);
  EXPECT_EQ(BoundOf(g, 1).kernel_work_us, 18);
  EXPECT_EQ(BoundOf(g, 1).bound_us, 18);
  EXPECT_EQ(BoundOf(g, 2).bound_us, 10);
}

TEST(LowerBoundTest, WorkIsWeightedByOccupancy) {
  GraphMaker m;
  m.Buffer("x");
  for (int i = 0; i < 8; ++i) {
    m.Node(absl::StrCat("q", i), "x:r", {.cost = 10, .occupancy = 0.25});
  }
  Graph g = m.Build();
  EXPECT_EQ(BoundOf(g, 1).kernel_work_us, 20);  // 8 x 10 x 1/4
  EXPECT_EQ(BoundOf(g, 2).kernel_work_us, 10);
  EXPECT_EQ(BoundOf(g, 1).long_kernels_us, 0);
}

TEST(LowerBoundTest, LongKernelsCannotShareADevice) {
  // Ten independent full kernels on four devices: some device runs three.
  GraphMaker m;
  m.Buffer("x");
  for (int i = 0; i < 10; ++i) m.Node(absl::StrCat("k", i), "x:r", {.cost = 5});
  Graph g = m.Build();
  EXPECT_EQ(BoundOf(g, 4).kernel_work_us, 12.5);
  EXPECT_EQ(BoundOf(g, 4).long_kernels_us, 15);
  EXPECT_EQ(BoundOf(g, 4).bound_us, 15);
  EXPECT_EQ(BoundOf(g, 5).bound_us, 10);
  EXPECT_EQ(BoundOf(g, 10).bound_us, 5);
}

// Two independent loops: each takes its device for an iteration's cost,
// as the cost model books it, so one device runs both in turn.
TEST(LowerBoundTest, ControlNodesTakeTheirDevice) {
  weft::v1::Graph proto;
  for (const char* name : {"a", "b"}) {
    weft::v1::Buffer* data = proto.add_buffers();
    data->set_name(name);
    data->set_size_bytes(64);
    data->set_dtype(weft::v1::FLOAT32);
    weft::v1::Buffer* go = proto.add_buffers();
    go->set_name(absl::StrCat("go_", name));
    go->set_size_bytes(4);
    go->set_dtype(weft::v1::INT32);
    weft::v1::Node* loop = proto.add_nodes();
    loop->set_name(absl::StrCat("loop_", name));
    weft::v1::WhileLoop* w = loop->mutable_while_loop();
    w->set_condition(go->name());
    w->set_max_iterations(4);
    weft::v1::Node* step = w->add_body();
    step->set_name(absl::StrCat("step_", name));
    step->set_op("scale");
    step->add_args()->set_f32(2);
    weft::v1::BufferArg* arg = step->add_args()->mutable_buffer();
    arg->set_name(name);
    arg->set_access(weft::v1::READ_WRITE);
    step->mutable_cost()->set_estimated_us(100);
    weft::v1::Node* stop = w->add_body();
    stop->set_name(absl::StrCat("stop_", name));
    stop->set_op("fill");
    weft::v1::BufferArg* cond = stop->add_args()->mutable_buffer();
    cond->set_name(go->name());
    cond->set_access(weft::v1::WRITE);
    stop->add_args()->set_i32(0);
    stop->mutable_cost()->set_estimated_us(10);
  }
  absl::StatusOr<Graph> g = BuildGraph(proto, GraphLimits());
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->cost_us(0), 110);
  EXPECT_EQ(BoundOf(*g, 1).critical_path_us, 110);
  EXPECT_EQ(BoundOf(*g, 1).kernel_work_us, 220);
  EXPECT_EQ(BoundOf(*g, 1).bound_us, 220);
  EXPECT_EQ(BoundOf(*g, 2).bound_us, 110);
  PlannerOptions options;
  absl::StatusOr<Plan> plan = PlanGraph(*g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(plan->estimated_makespan_us, plan->lower_bound_us);
  EXPECT_EQ(plan->lower_bound_us, 220);
}

TEST(LowerBoundTest, WorkAfterAGate) {
  // Eight half-device kernels that wait for a full one, beside four short
  // ones that wait for nothing: on two devices the eight take 200 us after
  // the gate's 100, whatever the short ones do.
  GraphMaker m;
  m.Buffer("g");
  m.Node("gate", "g:w", {.cost = 100});
  for (int i = 0; i < 8; ++i) {
    m.Buffer(absl::StrCat("o", i));
    m.Node(absl::StrCat("k", i), absl::StrCat("g:r o", i, ":w"),
           {.cost = 100, .occupancy = 0.5});
  }
  for (int i = 0; i < 4; ++i) {
    m.Buffer(absl::StrCat("p", i));
    m.Node(absl::StrCat("s", i), absl::StrCat("p", i, ":w"),
           {.cost = 10, .occupancy = 0.5});
  }
  Graph g = m.Build();
  LowerBoundOptions options;
  options.num_devices = 2;
  options.model_transfers = false;
  absl::StatusOr<Dag> dag = InferDependencies(g);
  ASSERT_TRUE(dag.ok()) << dag.status();
  const LowerBoundTerms terms = ComputeLowerBound(g, *dag, options);
  // The gate's tail holds the eight's work after it, not one of them.
  EXPECT_EQ(terms.critical_path_us, 100 + 400 / 2);
  EXPECT_EQ(terms.kernel_work_us, 100 + 400 / 2);
}

TEST(LowerBoundTest, PhasesOfWholeKernelsBetweenJoins) {
  // Two phases of sixteen full-device kernels of 100 us, each phase ending
  // in a join, on five devices: some device runs four kernels of each
  // phase, 800 us in all (spread evenly, 640; the thirty-two as one set,
  // seven on one device, 700).
  GraphMaker m;
  m.Buffer("x");
  m.Buffer("y");
  for (int phase = 0; phase < 2; ++phase) {
    std::string join_args = phase == 0 ? "x:w" : "y:w";
    for (int i = 0; i < 16; ++i) {
      const std::string out = absl::StrCat("o", phase, "_", i);
      m.Buffer(out);
      m.Node(absl::StrCat("k", phase, "_", i),
             absl::StrCat(phase == 0 ? "" : "x:r ", out, ":w"), {.cost = 100});
      absl::StrAppend(&join_args, " ", out, ":r");
    }
    m.Node(absl::StrCat("join", phase), join_args, {.cost = 1});
  }
  Graph g = m.Build();
  LowerBoundOptions options;
  options.num_devices = 5;
  options.model_transfers = false;
  absl::StatusOr<Dag> dag = InferDependencies(g);
  ASSERT_TRUE(dag.ok()) << dag.status();
  const LowerBoundTerms terms = ComputeLowerBound(g, *dag, options);
  EXPECT_EQ(terms.critical_path_us, 400 + 1 + 400 + 1);
  EXPECT_EQ(terms.bound_us, 802);
  PlannerOptions planner;
  planner.num_devices = 5;
  absl::StatusOr<Plan> plan = PlanGraph(g, planner);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(plan->estimated_makespan_us, plan->lower_bound_us);
}

TEST(LowerBoundTest, UploadsQueueOnTheBusiestEngine) {
  // Sixteen inputs of 100 us each over five host links: one link carries
  // four (spread evenly: 320 us).
  std::vector<BufferSpec> buffers;
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 16; ++i) {
    buffers.push_back(Buffer(absl::StrCat("in", i), 2.5, true));
    buffers.push_back(Buffer(absl::StrCat("out", i), 0, false));
    nodes.push_back(
        Kernel(absl::StrCat("k", i), 1,
               {{2 * i, Access::kRead}, {2 * i + 1, Access::kWrite}}));
  }
  Graph g("uploads", std::move(buffers), std::move(nodes));
  EXPECT_NEAR(BoundOf(g, 5).uploads_us, 400 + 1, 1e-9);
}

TEST(LowerBoundTest, HostDataMustComeUp) {
  std::vector<BufferSpec> buffers(3);
  for (int b = 0; b < 3; ++b) {
    buffers[b].name = absl::StrCat("in", b);
    buffers[b].size_bytes = 2500000;  // 100 us at 25 GB/s
    buffers[b].init = BufferSpec::Init::kData;
  }
  buffers[2].init = BufferSpec::Init::kZero;
  buffers[2].output = true;
  std::vector<NodeSpec> nodes(1);
  nodes[0].name = "sum";
  nodes[0].op = "spin";
  nodes[0].cost_us = 10;
  nodes[0].args = {BufferUse{0, Access::kRead}, BufferUse{1, Access::kRead},
                   BufferUse{2, Access::kWrite}};
  Graph g("up", std::move(buffers), std::move(nodes));
  // One device: both inputs over its one upload engine, then the output
  // back down.
  EXPECT_DOUBLE_EQ(BoundOf(g, 1).critical_path_us, 200 + 10 + 100);
  // Two devices: both inputs still go up to the device of their only
  // user, on its one upload stream.
  EXPECT_DOUBLE_EQ(BoundOf(g, 2).critical_path_us, 200 + 10 + 100);
}

TEST(LowerBoundTest, LastUploadIsFollowedByItsUsersChain) {
  // Two inputs of 1000 us each over one upload engine: whichever comes up
  // second, its user and the user's successor still run after it.
  std::vector<BufferSpec> buffers = {
      Buffer("x", 25, true), Buffer("y", 25, true), Buffer("x1", 1, false),
      Buffer("y1", 1, false), Buffer("res", 0, false, true)};
  std::vector<NodeSpec> nodes = {
      Kernel("sx", 50, {{0, Access::kRead}, {2, Access::kWrite}}),
      Kernel("sy", 50, {{1, Access::kRead}, {3, Access::kWrite}}),
      Kernel("sum", 30,
             {{2, Access::kRead}, {3, Access::kRead}, {4, Access::kWrite}})};
  Graph g("upload_order", std::move(buffers), std::move(nodes));
  EXPECT_DOUBLE_EQ(BoundOf(g, 1).uploads_us, 2000 + 50 + 30);
  EXPECT_DOUBLE_EQ(BoundOf(g, 1).bound_us, 2080);
  // Over two engines the inputs come up side by side.
  EXPECT_DOUBLE_EQ(BoundOf(g, 2).uploads_us, 1000 + 50 + 30);
}

TEST(LowerBoundTest, LastUploadIsFollowedByTheWorkBelowIt) {
  // The first user of the late input has three full kernels below it,
  // which one device runs one after another.
  std::vector<BufferSpec> buffers = {
      Buffer("x", 25, true), Buffer("a", 1, false), Buffer("b", 1, false),
      Buffer("c", 1, false)};
  std::vector<NodeSpec> nodes = {
      Kernel("k", 10, {{0, Access::kRead}, {1, Access::kWrite}}),
      Kernel("p", 100, {{1, Access::kRead}, {2, Access::kWrite}}),
      Kernel("q", 100, {{1, Access::kRead}, {3, Access::kWrite}})};
  Graph g("work_below", std::move(buffers), std::move(nodes));
  EXPECT_DOUBLE_EQ(BoundOf(g, 1).uploads_us, 1000 + 210);
  // On two devices p and q run side by side only once one of them has
  // copied k's output (1 MB over a 300 GB/s link).
  EXPECT_NEAR(BoundOf(g, 2).uploads_us, 1000 + 10 + 1e6 / 300e3 + 100, 1e-9);
}

TEST(LowerBoundTest, HostDataRewrittenInPlaceComesUpForItsReader) {
  // Each input is read and then rewritten in place: its reader, not its
  // writer (which waits for the reader), is the first to use it, and the
  // writer still runs after the reader once the data is up. Whichever
  // input comes up second, 100 + 1 us of work follow it.
  std::vector<BufferSpec> buffers = {
      Buffer("x", 25, true), Buffer("y", 25, true), Buffer("a", 1, false),
      Buffer("b", 1, false)};
  std::vector<NodeSpec> nodes = {
      Kernel("read_x", 100, {{0, Access::kRead}, {2, Access::kWrite}}),
      Kernel("read_y", 100, {{1, Access::kRead}, {3, Access::kWrite}}),
      Kernel("write_x", 1, {{0, Access::kWrite}}),
      Kernel("write_y", 1, {{1, Access::kWrite}})};
  Graph g("rewritten", std::move(buffers), std::move(nodes));
  EXPECT_DOUBLE_EQ(BoundOf(g, 1).uploads_us, 2000 + 100 + 1);
  EXPECT_DOUBLE_EQ(BoundOf(g, 1).bound_us, 2101);
  PlannerOptions options;
  options.num_devices = 1;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_DOUBLE_EQ(plan->estimated_makespan_us, 2101);
}

TEST(LowerBoundTest, InputsMeetOnOneDevice) {
  // sum uses what sx and sy wrote: on one device with both of them, or
  // after a copy from the other device.
  std::vector<BufferSpec> buffers = {
      Buffer("x", 25, true), Buffer("y", 25, true), Buffer("x1", 1, false),
      Buffer("y1", 1, false), Buffer("res", 0, false, true)};
  std::vector<NodeSpec> nodes = {
      Kernel("sx", 50, {{0, Access::kRead}, {2, Access::kWrite}}),
      Kernel("sy", 50, {{1, Access::kRead}, {3, Access::kWrite}}),
      Kernel("sum", 30,
             {{2, Access::kRead}, {3, Access::kRead}, {4, Access::kWrite}})};
  Graph g("meet", std::move(buffers), std::move(nodes));
  EXPECT_NEAR(BoundOf(g, 2).critical_path_us, 1000 + 50 + 1e6 / 300e3 + 30,
              1e-9);
  // With one device there is nothing to copy, but both inputs go up on
  // its one upload engine before sum can start.
  EXPECT_DOUBLE_EQ(BoundOf(g, 1).critical_path_us, 2000 + 30);
}

// A node waits for the uploads of everything its ancestors read, over all
// the devices' upload engines together.
TEST(LowerBoundTest, UploadsOfEverythingAboveANodeComeFirst) {
  // Four host inputs of 1000 us each (25 MB at 25 GB/s), each read by one
  // kernel; a chain joins them all before `last`.
  std::vector<BufferSpec> buffers;
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 4; ++i) {
    buffers.push_back(Buffer(absl::StrCat("in", i), 25, true));
    buffers.push_back(Buffer(absl::StrCat("out", i), 1, false));
  }
  buffers.push_back(Buffer("res", 0, false, true));
  for (int i = 0; i < 4; ++i) {
    nodes.push_back(
        Kernel(absl::StrCat("k", i), 10,
               {{2 * i, Access::kRead}, {2 * i + 1, Access::kWrite}}));
  }
  std::vector<BufferUse> all;
  for (int i = 0; i < 4; ++i) all.push_back({2 * i + 1, Access::kRead});
  all.push_back({8, Access::kWrite});
  nodes.push_back(Kernel("last", 5, all));
  Graph g("closure", std::move(buffers), std::move(nodes));
  // One device: 4000 us of uploads on its one engine, then `last`.
  EXPECT_DOUBLE_EQ(BoundOf(g, 1).critical_path_us, 4000 + 5);
  // Two devices: two engines, 2000 us each at least; each input's own
  // kernel still waits 1000 us for it.
  EXPECT_GE(BoundOf(g, 2).critical_path_us, 2000 + 5);
}

// Sixteen kernels read one host buffer on eight devices. Only the
// buffer's first user uploads it; every other device copies it from a
// device that has it. So by the time a second device can have it, one
// device at most has run the kernels for the peer copy's time.
TEST(LowerBoundTest, SharedHostDataReachesOneDeviceFirst) {
  std::vector<BufferSpec> buffers = {Buffer("w", 64, true)};
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 16; ++i) {
    buffers.push_back(Buffer(absl::StrCat("o", i), 0, false));
    nodes.push_back(Kernel(absl::StrCat("k", i), 300,
                           {{0, Access::kRead}, {i + 1, Access::kWrite}}));
  }
  Graph g("shared", std::move(buffers), std::move(nodes));
  const Topology topology = Topology::Default(8);
  const double up = topology.TransferUs(64000000, Topology::kHost, 0);
  const double peer = topology.TransferUs(64000000, 0, 1);
  ASSERT_GT(peer, 0);
  ASSERT_LT(peer, 300);
  // At h = up + peer: the kernels could each have run `peer` before h
  // on eight devices, but only one device had the buffer.
  EXPECT_NEAR(BoundOf(g, 8).kernel_work_us, up + peer + (16 * 300 - peer) / 8,
              1e-6);
  // Before, the bound took them to start at `up` on every device.
  EXPECT_GT(BoundOf(g, 8).kernel_work_us, up + 16 * 300 / 8.0);
  // One device: nothing to copy.
  EXPECT_NEAR(BoundOf(g, 1).kernel_work_us, up + 16 * 300, 1e-6);
}

// The same, but a host node reads the buffer first: then each device
// uploads it from the host memory that node filled, all at once, and a
// plan that spreads the kernels meets the plain bound.
TEST(LowerBoundTest, SharedHostDataReadOnTheHostFirstGoesUpEverywhere) {
  std::vector<BufferSpec> buffers = {Buffer("w", 64, true),
                                     Buffer("h", 0, false)};
  NodeSpec host = Kernel("peek", 1, {{0, Access::kRead}, {1, Access::kWrite}});
  host.engine = Engine::kHost;
  std::vector<NodeSpec> nodes = {host};
  for (int i = 0; i < 16; ++i) {
    buffers.push_back(Buffer(absl::StrCat("o", i), 0, false));
    nodes.push_back(Kernel(absl::StrCat("k", i), 300,
                           {{0, Access::kRead}, {i + 2, Access::kWrite}}));
    nodes.back().device = i % 8;
    nodes.back().after.push_back(0);  // issued after the host node
  }
  Graph g("shared_host_first", std::move(buffers), std::move(nodes));
  const double up =
      Topology::Default(8).TransferUs(64000000, Topology::kHost, 0);
  EXPECT_NEAR(BoundOf(g, 8).kernel_work_us, up + 16 * 300 / 8.0, 1e-6);
  PlannerOptions options;
  options.num_devices = 8;
  options.explain = false;
  absl::StatusOr<Plan> plan = PlanGraph(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(plan->estimated_makespan_us, plan->lower_bound_us - 1e-9);
  EXPECT_LT(plan->estimated_makespan_us, up + 1 + 700);
}

TEST(LowerBoundTest, DownloadsFollowTheWorkAboveTheirWriters) {
  // Two outputs of 400 us each, written by the last two of four 100 us
  // kernels on one device: the first download starts after three kernels,
  // the second after the first download.
  std::vector<BufferSpec> buffers = {
      Buffer("a", 1, false), Buffer("b", 1, false),
      Buffer("o1", 10, false, true), Buffer("o2", 10, false, true)};
  std::vector<NodeSpec> nodes = {
      Kernel("k1", 100, {{0, Access::kWrite}}),
      Kernel("k2", 100, {{1, Access::kWrite}}),
      Kernel("w1", 100, {{0, Access::kRead}, {2, Access::kWrite}}),
      Kernel("w2", 100, {{1, Access::kRead}, {3, Access::kWrite}})};
  Graph g("download_order", std::move(buffers), std::move(nodes));
  EXPECT_DOUBLE_EQ(BoundOf(g, 1).downloads_us, 200 + 400 + 400);
  EXPECT_DOUBLE_EQ(BoundOf(g, 2).downloads_us, 200 + 400);
}

// A random DAG of every engine, occupancy, size and initialization.
Graph RandomGraph(std::mt19937& rng, int num_nodes) {
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<BufferSpec> buffers;
  const int inputs = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < inputs + num_nodes; ++i) {
    BufferSpec b;
    b.name = absl::StrCat("b", i);
    b.size_bytes = uint64_t{1} << (6 + rng() % 20);
    if (i < inputs) {
      b.init = BufferSpec::Init::kData;
      b.data = "x";
    }
    b.output = unit(rng) < 0.2;
    buffers.push_back(b);
  }
  std::vector<NodeSpec> nodes(num_nodes);
  for (int i = 0; i < num_nodes; ++i) {
    NodeSpec& n = nodes[i];
    n.name = absl::StrCat("n", i);
    n.op = "spin";
    const double e = unit(rng);
    n.engine = e < 0.75   ? Engine::kCompute
               : e < 0.85 ? Engine::kCopy
               : e < 0.95 ? Engine::kHost
                          : Engine::kCollective;
    n.cost_us = unit(rng) < 0.05 ? 0 : 1 + unit(rng) * 200;
    if (n.engine == Engine::kCompute || n.engine == Engine::kCollective) {
      n.occupancy = unit(rng) < 0.5 ? 1.0 : 0.05 + 0.95 * unit(rng);
    }
    const int reads = static_cast<int>(rng() % 3);
    for (int r = 0; r < reads; ++r) {
      const int b = static_cast<int>(rng() % (inputs + i));
      n.args.push_back(BufferUse{b, Access::kRead});
    }
    // Write a buffer of its own, or sometimes one written before.
    const int w = unit(rng) < 0.8 ? inputs + i
                                  : static_cast<int>(rng() % (inputs + i + 1));
    n.args.push_back(
        BufferUse{w, unit(rng) < 0.5 ? Access::kWrite : Access::kReadWrite});
  }
  return Graph("random", std::move(buffers), std::move(nodes));
}

// A random policy, stream cap, kernel slots and copy engines, no reasons.
void RandomizeOptions(std::mt19937& rng, PlannerOptions& options) {
  options.device_policy = static_cast<DevicePolicyKind>(rng() % 7);
  options.max_streams_per_device = 1 + static_cast<int>(rng() % 8);
  options.max_concurrent_kernels = 1 + static_cast<int>(rng() % 32);
  options.copy_engines_per_device = 1 + static_cast<int>(rng() % 2);
  options.explain = false;
}

// The simulated makespan of a plan of any policy on 1 to 8 devices is
// never below the bound, and the bound is at least the plain critical
// path.
TEST(LowerBoundPropertyTest, NoPlanBeatsTheBound) {
  std::mt19937 rng(2026);
  int plans = 0;
  int tight = 0;
  for (int round = 0; round < 1500; ++round) {
    Graph g = RandomGraph(rng, 2 + static_cast<int>(rng() % 40));
    const int devices = 1 + static_cast<int>(rng() % 8);
    PlannerOptions options;
    options.num_devices = devices;
    RandomizeOptions(rng, options);
    absl::StatusOr<Plan> plan = PlanGraph(g, options);
    if (!plan.ok() &&
        options.device_policy == DevicePolicyKind::kLookaheadFinishTime) {
      continue;
    }
    ASSERT_TRUE(plan.ok()) << plan.status();
    ++plans;
    EXPECT_GE(plan->lower_bound_us, plan->critical_path_us - 1e-9);
    EXPECT_GE(plan->estimated_makespan_us,
              plan->lower_bound_us * (1 - 1e-12) - 1e-9)
        << "round " << round << " on " << devices << " devices, policy "
        << static_cast<int>(options.device_policy);
    if (plan->estimated_makespan_us <= plan->lower_bound_us * 1.0001) ++tight;
  }
  EXPECT_GT(plans, 1000);
  // The bound is not vacuous: some plans reach it.
  EXPECT_GT(tight, plans / 20);
}

// Graphs whose transfers dominate: many large host inputs, some rewritten
// in place or first written by a HOST node, large outputs, control edges.
Graph TransferHeavyGraph(std::mt19937& rng, int num_nodes) {
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<BufferSpec> buffers;
  const int inputs = 1 + static_cast<int>(rng() % 12);
  for (int i = 0; i < inputs + num_nodes; ++i) {
    buffers.push_back(Buffer(absl::StrCat("b", i), 1 + rng() % 60,
                             i < inputs || unit(rng) < 0.1, unit(rng) < 0.3));
  }
  std::vector<NodeSpec> nodes(num_nodes);
  for (int i = 0; i < num_nodes; ++i) {
    NodeSpec& n = nodes[i];
    n.name = absl::StrCat("n", i);
    n.op = "spin";
    const double e = unit(rng);
    n.engine = e < 0.8   ? Engine::kCompute
               : e < 0.9 ? Engine::kHost
                         : Engine::kCopy;
    n.cost_us = unit(rng) < 0.05 ? 0 : 1 + unit(rng) * 2000;
    if (n.engine == Engine::kCompute) {
      n.occupancy = unit(rng) < 0.6 ? 1.0 : 0.05 + 0.95 * unit(rng);
    }
    const int reads = static_cast<int>(rng() % 4);
    for (int r = 0; r < reads; ++r) {
      // Mostly the host inputs, so that they have several users.
      const int b = unit(rng) < 0.5 ? static_cast<int>(rng() % inputs)
                                    : static_cast<int>(rng() % (inputs + i));
      n.args.push_back(BufferUse{b, Access::kRead});
    }
    const int w = unit(rng) < 0.7 ? inputs + i
                                  : static_cast<int>(rng() % (inputs + i + 1));
    n.args.push_back(
        BufferUse{w, unit(rng) < 0.5 ? Access::kWrite : Access::kReadWrite});
    if (i > 0 && unit(rng) < 0.1) {
      n.after.push_back(static_cast<NodeId>(rng() % i));
    }
  }
  return Graph("transfer_heavy", std::move(buffers), std::move(nodes));
}

TEST(LowerBoundPropertyTest, TransferHeavyGraphs) {
  std::mt19937 rng(77);
  int plans = 0;
  int tight = 0;
  for (int round = 0; round < 1500; ++round) {
    Graph g = TransferHeavyGraph(rng, 1 + static_cast<int>(rng() % 30));
    PlannerOptions options;
    options.num_devices = 1 + static_cast<int>(rng() % 8);
    RandomizeOptions(rng, options);
    absl::StatusOr<Plan> plan = PlanGraph(g, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ++plans;
    EXPECT_GE(plan->estimated_makespan_us,
              plan->lower_bound_us * (1 - 1e-12) - 1e-9)
        << "round " << round << " on " << options.num_devices
        << " devices, policy " << static_cast<int>(options.device_policy);
    if (plan->estimated_makespan_us <= plan->lower_bound_us * 1.0001) ++tight;
  }
  EXPECT_GT(tight, plans / 40);
}

// Graphs of large host inputs read by many kernels (the model weights of
// GrCUDA's ML ensemble) and some host nodes, pinned to random devices so
// that schedules the policies would not choose are bounded too: no plan
// beats the bound, which counts that only one device has an input first.
TEST(LowerBoundPropertyTest, SharedHostInputsOnAnyDevices) {
  std::mt19937 rng(606);
  std::uniform_real_distribution<double> unit(0, 1);
  int plans = 0, near = 0;
  for (int round = 0; round < 1200; ++round) {
    const int inputs = 1 + static_cast<int>(rng() % 3);
    const int kernels = 2 + static_cast<int>(rng() % 30);
    std::vector<BufferSpec> buffers;
    for (int i = 0; i < inputs; ++i) {
      buffers.push_back(
          Buffer(absl::StrCat("w", i), 1 + rng() % 80, true, false));
    }
    std::vector<NodeSpec> nodes;
    const int devices = 2 + static_cast<int>(rng() % 7);
    const bool pinned = unit(rng) < 0.6;
    for (int k = 0; k < kernels; ++k) {
      buffers.push_back(
          Buffer(absl::StrCat("o", k), rng() % 4, false, unit(rng) < 0.2));
      std::vector<BufferUse> args = {
          {static_cast<BufferId>(rng() % inputs), Access::kRead}};
      if (unit(rng) < 0.3) {
        args.push_back({static_cast<BufferId>(rng() % inputs), Access::kRead});
      }
      // Now and then a kernel reads an earlier one's output, or
      // rewrites an input after its readers.
      if (k > 0 && unit(rng) < 0.3) {
        args.push_back(
            {static_cast<BufferId>(inputs + rng() % k), Access::kRead});
      }
      args.push_back({static_cast<BufferId>(inputs + k),
                      unit(rng) < 0.1 ? Access::kReadWrite : Access::kWrite});
      if (unit(rng) < 0.05) {
        args.push_back(
            {static_cast<BufferId>(rng() % inputs), Access::kReadWrite});
      }
      NodeSpec n = Kernel(absl::StrCat("k", k), 1 + unit(rng) * 3000, args);
      if (unit(rng) < 0.3) n.occupancy = 0.1 + 0.9 * unit(rng);
      // Now and then a host node reads the inputs (maybe first): then
      // every device uploads them itself.
      if (unit(rng) < 0.1) n.engine = Engine::kHost;
      if (pinned) n.device = static_cast<int>(rng() % devices);
      nodes.push_back(std::move(n));
    }
    Graph g("shared_inputs", std::move(buffers), std::move(nodes));
    PlannerOptions options;
    options.num_devices = devices;
    RandomizeOptions(rng, options);
    absl::StatusOr<Plan> plan = PlanGraph(g, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ++plans;
    EXPECT_GE(plan->estimated_makespan_us,
              plan->lower_bound_us * (1 - 1e-12) - 1e-9)
        << "round " << round << " on " << devices << " devices, policy "
        << static_cast<int>(options.device_policy);
    if (plan->estimated_makespan_us <= plan->lower_bound_us * 1.05) ++near;
  }
  EXPECT_EQ(plans, 1200);
  EXPECT_GT(near, plans / 20);
}

// Phases of partitions, as the multi-GPU benchmark shapes run them: each
// phase's kernels (mostly filling their device, of one cost or of mixed
// costs) read the previous phase's outputs and, in the first phase, host
// inputs of their own; a join ends each phase now and then. On 1 to 8
// devices, so that the partitions rarely divide evenly: the joins' loads
// and the busiest engine's share of the uploads are never above a plan.
TEST(LowerBoundPropertyTest, PhasesOfPartitions) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> unit(0, 1);
  int plans = 0, tight = 0;
  for (int round = 0; round < 400; ++round) {
    const int parts = 2 + static_cast<int>(rng() % 20);
    const int phases = 1 + static_cast<int>(rng() % 4);
    const bool equal = unit(rng) < 0.5;
    std::vector<BufferSpec> buffers;
    std::vector<NodeSpec> nodes;
    std::vector<BufferId> last(parts);
    for (int p = 0; p < parts; ++p) {
      last[p] = static_cast<BufferId>(buffers.size());
      buffers.push_back(
          Buffer(absl::StrCat("in", p), 0.5 + unit(rng) * 4, unit(rng) < 0.8));
    }
    const double cost = 20 + unit(rng) * 300;
    for (int phase = 0; phase < phases; ++phase) {
      std::vector<BufferUse> join_args;
      for (int p = 0; p < parts; ++p) {
        const BufferId out = static_cast<BufferId>(buffers.size());
        buffers.push_back(Buffer(absl::StrCat("o", phase, "_", p),
                                 unit(rng) * 2, false, unit(rng) < 0.1));
        NodeSpec n = Kernel(absl::StrCat("k", phase, "_", p),
                            equal ? cost : 10 + unit(rng) * 300,
                            {{last[p], Access::kRead}, {out, Access::kWrite}});
        if (unit(rng) < 0.2) n.occupancy = 0.2 + 0.8 * unit(rng);
        nodes.push_back(std::move(n));
        last[p] = out;
        join_args.push_back({out, Access::kRead});
      }
      if (unit(rng) < 0.7) {
        const BufferId sum = static_cast<BufferId>(buffers.size());
        buffers.push_back(
            Buffer(absl::StrCat("s", phase), 0.01, false, phase + 1 == phases));
        join_args.push_back({sum, Access::kWrite});
        nodes.push_back(
            Kernel(absl::StrCat("join", phase), 1 + unit(rng) * 10, join_args));
        for (int p = 0; p < parts; ++p) last[p] = sum;
      }
    }
    Graph g("phases", std::move(buffers), std::move(nodes));
    PlannerOptions options;
    options.num_devices = 1 + static_cast<int>(rng() % 8);
    RandomizeOptions(rng, options);
    if (unit(rng) < 0.5) {
      options.device_policy = DevicePolicyKind::kLookaheadFinishTime;
    }
    absl::StatusOr<Plan> plan = PlanGraph(g, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ++plans;
    EXPECT_GE(plan->estimated_makespan_us,
              plan->lower_bound_us * (1 - 1e-12) - 1e-9)
        << "round " << round << " on " << options.num_devices
        << " devices, policy " << static_cast<int>(options.device_policy);
    if (plan->estimated_makespan_us <= plan->lower_bound_us * 1.05) ++tight;
  }
  EXPECT_EQ(plans, 400);
  EXPECT_GT(tight, plans / 10);
}

// Wide graphs of independent kernels, some of which can share a device:
// the long-kernel term must count only kernels that cannot.
TEST(LowerBoundPropertyTest, WideGraphsOfMixedOccupancy) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int round = 0; round < 300; ++round) {
    GraphMaker m;
    m.Buffer("x");
    const int width = 2 + static_cast<int>(rng() % 30);
    for (int i = 0; i < width; ++i) {
      const double occupancy = unit(rng) < 0.3 ? 1.0 : 0.26 + 0.24 * unit(rng);
      m.Node(absl::StrCat("k", i), "x:r",
             {.cost = 1 + 99 * unit(rng), .occupancy = occupancy});
    }
    Graph g = m.Build();
    PlannerOptions options;
    options.num_devices = 1 + static_cast<int>(rng() % 8);
    options.device_policy = DevicePolicyKind::kMinFinishTime;
    options.max_streams_per_device = 32;
    options.explain = false;
    absl::StatusOr<Plan> plan = PlanGraph(g, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_GE(plan->estimated_makespan_us,
              plan->lower_bound_us * (1 - 1e-12) - 1e-9)
        << "round " << round;
  }
}

}  // namespace
}  // namespace weft::scheduler
