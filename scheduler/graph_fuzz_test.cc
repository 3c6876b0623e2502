// Feeds thousands of mostly valid, randomly damaged wire graphs and schedule
// options through GraphBuilder, the options conversion, the planner and the
// plan's wire form. Every rejection must be INVALID_ARGUMENT naming a field;
// every accepted graph must plan into a well-formed plan or be rejected the
// same way. Deterministic: a fixed seed.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/graph_builder.h"
#include "scheduler/plan_proto.h"
#include "scheduler/planner.h"
#include "testing/status_matchers.h"
#include "weft/v1/weft.pb.h"

namespace weft::scheduler {
namespace {

using ::weft::testing::StatusIs;

constexpr int kIterations = 10000;

class Random {
 public:
  explicit Random(uint32_t seed) : rng_(seed) {}
  int Uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }
  bool Coin(double p) {
    return std::uniform_real_distribution<double>(0, 1)(rng_) < p;
  }
  // A damage decision: Coin(p) scaled by the current graph's damage level,
  // so that some graphs are clean and some are wrecked.
  bool Damage(double p) { return Coin(p * damage_); }
  void set_damage(double damage) { damage_ = damage; }
  template <typename T>
  T Pick(const std::vector<T>& values) {
    return values[Uniform(0, static_cast<int>(values.size()) - 1)];
  }

 private:
  std::mt19937 rng_;
  double damage_ = 1;
};

double WeirdDouble(Random& r) {
  return r.Pick<double>({0.0, -0.0, -1.0, 1e300, -1e300,
                         std::numeric_limits<double>::quiet_NaN(),
                         std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::denorm_min(),
                         std::numeric_limits<double>::max()});
}

std::string Name(Random& r, const std::string& prefix, int count) {
  if (r.Damage(0.02)) return "";
  if (r.Damage(0.01)) return std::string(r.Uniform(1000, 5000), 'x');
  if (r.Damage(0.02)) return absl::StrCat("missing", r.Uniform(0, 3));
  return absl::StrCat(prefix, r.Uniform(0, count - 1));
}

weft::v1::Graph RandomGraph(Random& r) {
  weft::v1::Graph g;
  if (r.Coin(0.1)) g.set_name(std::string(r.Uniform(0, 300), 'g'));
  const int num_buffers = r.Uniform(0, 6);
  for (int b = 0; b < num_buffers; ++b) {
    weft::v1::Buffer* buffer = g.add_buffers();
    buffer->set_name(r.Damage(0.03) ? Name(r, "b", num_buffers)
                                    : absl::StrCat("b", b));
    int dtype = r.Uniform(0, 4);
    if (r.Damage(0.03)) dtype = r.Pick<int>({-1, 5, 99, 1 << 30});
    buffer->set_dtype(static_cast<weft::v1::DType>(dtype));
    uint64_t size = uint64_t{8} << r.Uniform(0, 10);
    if (r.Damage(0.05)) {
      size = r.Pick<uint64_t>({0, 1, 3, 7, uint64_t{1} << 40,
                               std::numeric_limits<uint64_t>::max(),
                               std::numeric_limits<uint64_t>::max() - 7});
    }
    buffer->set_size_bytes(size);
    switch (r.Uniform(0, 3)) {
      case 0:
        buffer->set_data(std::string(
            r.Damage(0.1) ? r.Uniform(0, 20000) : r.Uniform(0, 64), '\x7f'));
        break;
      case 1:
        buffer->set_fill(r.Damage(0.2) ? WeirdDouble(r) : 1.5);
        break;
      default:
        break;
    }
    buffer->set_output(r.Coin(0.3));
  }
  const int num_nodes = r.Uniform(0, 12);
  const std::vector<std::string> ops = {"fill",
                                        "copy",
                                        "axpy",
                                        "scale",
                                        "add",
                                        "reduce_sum",
                                        "spin",
                                        "spin",
                                        "spin",
                                        "",
                                        "FILL",
                                        "nope",
                                        std::string("sp\0in", 5)};
  for (int i = 0; i < num_nodes; ++i) {
    weft::v1::Node* node = g.add_nodes();
    node->set_name(r.Damage(0.03) ? Name(r, "n", num_nodes)
                                  : absl::StrCat("n", i));
    node->set_op(r.Damage(0.9) ? r.Pick(ops) : "spin");
    const int num_args = r.Damage(0.02) ? r.Uniform(0, 40) : r.Uniform(0, 4);
    for (int a = 0; a < num_args; ++a) {
      weft::v1::Arg* arg = node->add_args();
      switch (r.Damage(0.5) ? r.Uniform(0, 4) : 5) {
        case 0:
          arg->set_f32(static_cast<float>(WeirdDouble(r)));
          break;
        case 1:
          arg->set_f64(WeirdDouble(r));
          break;
        case 2:
          arg->set_i32(
              r.Pick<int32_t>({0, -1, 7, std::numeric_limits<int32_t>::min()}));
          break;
        case 3:
          arg->set_i64(std::numeric_limits<int64_t>::max());
          break;
        case 4:
          if (r.Damage(0.5)) break;  // leaves the oneof unset
          [[fallthrough]];
        default: {
          weft::v1::BufferArg* buffer = arg->mutable_buffer();
          buffer->set_name(num_buffers > 0 && !r.Damage(0.05)
                               ? Name(r, "b", num_buffers)
                               : Name(r, "x", 2));
          int access = r.Uniform(1, 3);
          if (r.Damage(0.05)) access = r.Pick<int>({0, -1, 4, 1000, -77});
          buffer->set_access(static_cast<weft::v1::Access>(access));
          break;
        }
      }
    }
    const int num_after = r.Coin(0.3) ? r.Uniform(1, 3) : 0;
    for (int k = 0; k < num_after; ++k) {
      if (r.Damage(0.05)) {
        node->add_after(node->name());  // self-loop
      } else if (num_nodes > 1) {
        std::string other = Name(r, "n", num_nodes);  // earlier or later
        if (other != node->name()) node->add_after(std::move(other));
      }
    }
    if (r.Coin(0.3))
      node->set_stream_label(r.Pick<std::string>({"s0", "s1", ""}));
    int engine = r.Coin(0.8) ? 0 : r.Uniform(1, 3);
    if (r.Damage(0.03)) engine = r.Pick<int>({-1, 4, 1 << 20});
    node->set_engine(static_cast<weft::v1::Engine>(engine));
    node->mutable_cost()->set_estimated_us(r.Damage(0.1) ? WeirdDouble(r)
                                                         : r.Uniform(0, 100));
    if (r.Coin(0.2)) {
      node->set_device(
          !r.Damage(0.2)
              ? r.Uniform(0, 3)
              : r.Pick<int32_t>({-1, 64, 1 << 30,
                                 std::numeric_limits<int32_t>::min(),
                                 std::numeric_limits<int32_t>::max()}));
    }
  }
  return g;
}

weft::v1::ScheduleOptions RandomOptions(Random& r) {
  weft::v1::ScheduleOptions o;
  int policy = r.Uniform(0, 5);
  if (r.Coin(0.05)) policy = r.Pick<int>({-1, 6, 1 << 20});
  o.set_device_policy(static_cast<weft::v1::DevicePolicy>(policy));
  int mode = r.Uniform(0, 1);
  if (r.Coin(0.05)) mode = r.Pick<int>({-1, 2, 12345});
  o.set_stream_mode(static_cast<weft::v1::StreamMode>(mode));
  o.set_max_streams_per_device(
      r.Coin(0.1) ? r.Pick<int32_t>({-1, std::numeric_limits<int32_t>::min(),
                                     std::numeric_limits<int32_t>::max()})
                  : r.Uniform(0, 4));
  o.set_data_threshold(r.Coin(0.1) ? WeirdDouble(r)
                                   : r.Pick<double>({0, 0.1, 0.5, 1}));
  o.set_restrict_to_parent_devices(r.Coin(0.3));
  o.set_max_nodes_per_stream(
      r.Coin(0.1)
          ? r.Pick<int32_t>({-1, 1, 2, std::numeric_limits<int32_t>::min(),
                             std::numeric_limits<int32_t>::max()})
          : r.Pick<int32_t>({0, 3, 4, 7}));
  return o;
}

bool NamesALimit(const std::string& message) {
  return absl::StrContains(message, "limit");
}

TEST(GraphFuzzTest, HostileGraphsAreRejectedCleanlyOrPlannedSoundly) {
  Random r(20240611);
  int built = 0, planned = 0, rejected_graphs = 0, rejected_options = 0,
      rejected_plans = 0;
  for (int it = 0; it < kIterations; ++it) {
    SCOPED_TRACE(absl::StrCat("iteration ", it));
    r.set_damage(r.Pick<double>({0, 0.1, 0.3, 1, 2}));
    const weft::v1::Graph proto = RandomGraph(r);
    GraphLimits limits;
    limits.num_devices = r.Uniform(1, 4);
    limits.max_nodes = r.Coin(0.05) ? r.Uniform(0, 5) : 64;
    limits.max_buffers = r.Coin(0.05) ? r.Uniform(0, 3) : 64;
    limits.max_buffer_bytes = r.Coin(0.05) ? 64 : uint64_t{1} << 20;
    limits.max_total_bytes = r.Coin(0.02) ? 128 : uint64_t{4} << 20;
    limits.max_args_per_node = r.Coin(0.05) ? r.Uniform(0, 2) : 16;

    absl::StatusOr<Graph> graph = BuildGraph(proto, limits);
    if (!graph.ok()) {
      ++rejected_graphs;
      ASSERT_THAT(graph.status(), StatusIs(absl::StatusCode::kInvalidArgument))
          << graph.status();
      const std::string message(graph.status().message());
      ASSERT_TRUE(absl::StartsWith(message, "graph.") || NamesALimit(message))
          << message;
      continue;
    }
    ++built;
    ASSERT_EQ(graph->num_nodes(), proto.nodes_size());
    ASSERT_EQ(graph->num_buffers(), proto.buffers_size());

    // Sometimes fewer devices than the graph was validated for, so that
    // pins reach past the planner's devices.
    const int num_devices =
        r.Coin(0.2) ? r.Uniform(1, limits.num_devices) : limits.num_devices;
    absl::StatusOr<PlannerOptions> options = PlannerOptionsFromProto(
        RandomOptions(r), num_devices, r.Coin(0.1) ? r.Uniform(-1, 0) : 4);
    if (!options.ok()) {
      ++rejected_options;
      ASSERT_THAT(options.status(),
                  StatusIs(absl::StatusCode::kInvalidArgument))
          << options.status();
      ASSERT_TRUE(absl::StartsWith(options.status().message(), "options.") ||
                  absl::StartsWith(options.status().message(), "num_devices"))
          << options.status();
      continue;
    }
    options->explain = r.Coin(0.5);

    absl::StatusOr<Plan> plan = PlanGraph(*graph, *options);
    if (!plan.ok()) {
      ++rejected_plans;
      ASSERT_THAT(plan.status(), StatusIs(absl::StatusCode::kInvalidArgument))
          << plan.status();
      ASSERT_FALSE(plan.status().message().empty());
      continue;
    }
    ++planned;
    ASSERT_EQ(plan->nodes.size(), static_cast<size_t>(graph->num_nodes()));
    ASSERT_EQ(plan->num_devices, num_devices);
    std::vector<int> seen(graph->num_nodes(), 0);
    ASSERT_EQ(plan->deps.rows(), graph->num_nodes());
    ASSERT_EQ(plan->waits.rows(), graph->num_nodes());
    for (int i = 0; i < plan->num_nodes(); ++i) {
      const PlannedNode& pn = plan->nodes[i];
      ASSERT_GE(pn.node, 0);
      ASSERT_LT(pn.node, graph->num_nodes());
      ++seen[pn.node];
      ASSERT_GE(pn.stream, 0);
      ASSERT_LT(pn.stream, static_cast<int>(plan->streams.size()));
      ASSERT_GE(pn.device, 0);
      ASSERT_LT(pn.device, num_devices);
      ASSERT_EQ(plan->streams[pn.stream].device, pn.device);
      if (graph->node(pn.node).device.has_value()) {
        ASSERT_EQ(pn.device, *graph->node(pn.node).device);
      }
      ASSERT_GE(pn.signal_event, -1);
      ASSERT_LT(pn.signal_event, plan->num_events);
      for (int e : plan->Waits(i)) {
        ASSERT_GE(e, 0);
        ASSERT_LT(e, plan->num_events);
      }
      ASSERT_TRUE(std::isfinite(plan->Estimate(i).start_us));
      ASSERT_TRUE(std::isfinite(plan->Estimate(i).end_us));
    }
    for (int count : seen) ASSERT_EQ(count, 1);
    for (size_t s = 0; s < plan->streams.size(); ++s) {
      ASSERT_EQ(plan->streams[s].id, static_cast<int>(s));
      ASSERT_GE(plan->streams[s].device, 0);
      ASSERT_LT(plan->streams[s].device, num_devices);
    }
    ASSERT_TRUE(std::isfinite(plan->estimated_makespan_us));

    const weft::v1::Plan wire = PlanToProto(*graph, *plan);
    ASSERT_EQ(wire.nodes_size(), graph->num_nodes());
    ASSERT_EQ(wire.streams_size(), static_cast<int>(plan->streams.size()));
    ASSERT_EQ(wire.num_events(), plan->num_events);
    weft::v1::Plan reparsed;
    ASSERT_TRUE(reparsed.ParseFromString(wire.SerializeAsString()));
    ASSERT_EQ(reparsed.nodes_size(), wire.nodes_size());
    for (int i = 0; i < wire.nodes_size(); ++i) {
      ASSERT_EQ(wire.nodes(i).name(), graph->node(plan->nodes[i].node).name);
    }
  }
  // The mix must exercise every outcome, or the generator has drifted.
  EXPECT_GT(rejected_graphs, kIterations / 10);
  EXPECT_GT(built, kIterations / 20);
  EXPECT_GT(planned, kIterations / 40);
  EXPECT_GT(rejected_options, 0);
  std::cout << "built " << built << " planned " << planned
            << " rejected graphs " << rejected_graphs << " options "
            << rejected_options << " plans " << rejected_plans << "\n";
}

}  // namespace
}  // namespace weft::scheduler
