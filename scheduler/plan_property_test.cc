// Plans thousands of random graphs end to end (wire graph -> GraphBuilder
// -> PlanGraph) and checks every plan with the brute-force verifier.
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/graph_builder.h"
#include "scheduler/plan_verifier.h"
#include "scheduler/planner.h"

namespace weft::scheduler {
namespace {

struct Case {
  weft::v1::Graph graph;
  PlannerOptions options;
};

Case RandomCase(std::mt19937& rng, int max_nodes) {
  auto uniform = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  auto coin = [&](double p) {
    return std::uniform_real_distribution<double>(0, 1)(rng) < p;
  };
  Case c;
  c.options.num_devices = uniform(1, 4);
  c.options.stream_mode = coin(0.25) ? StreamMode::kSingle : StreamMode::kMulti;
  const int caps[] = {1, 2, 3, 8};
  c.options.max_streams_per_device = caps[uniform(0, 3)];

  const int num_buffers = uniform(1, 8);
  for (int b = 0; b < num_buffers; ++b) {
    weft::v1::Buffer* buffer = c.graph.add_buffers();
    buffer->set_name(absl::StrCat("b", b));
    buffer->set_size_bytes(64);
  }
  const int n = uniform(1, max_nodes);
  for (int i = 0; i < n; ++i) {
    weft::v1::Node* node = c.graph.add_nodes();
    node->set_name(absl::StrCat("n", i));
    node->set_op("spin");
    const int args = uniform(0, 3);
    for (int a = 0; a < args; ++a) {
      weft::v1::BufferArg* arg = node->add_args()->mutable_buffer();
      arg->set_name(absl::StrCat("b", uniform(0, num_buffers - 1)));
      const int access = uniform(0, 5);
      arg->set_access(
          access < 3 ? weft::v1::READ
                     : (access < 5 ? weft::v1::READ_WRITE : weft::v1::WRITE));
    }
    if (n > 1 && coin(0.15)) {
      int other = uniform(0, n - 2);
      if (other >= i) ++other;
      node->add_after(absl::StrCat("n", other));
    }
    const int engine = uniform(0, 9);
    node->set_engine(engine < 7 ? weft::v1::COMPUTE
                                : static_cast<weft::v1::Engine>(engine - 6));
    node->mutable_cost()->set_estimated_us(coin(0.1) ? 0 : uniform(1, 20));
    if (coin(0.15)) node->set_device(uniform(0, c.options.num_devices - 1));
    if (c.options.stream_mode == StreamMode::kMulti && coin(0.1)) {
      node->set_stream_label(absl::StrCat("L", uniform(0, 1)));
    }
  }
  return c;
}

absl::StatusOr<Graph> Build(Case& c) {
  GraphLimits limits;
  limits.num_devices = c.options.num_devices;
  absl::StatusOr<Graph> g = BuildGraph(c.graph, limits);
  if (g.ok() || !absl::StrContains(g.status().message(), "cycle")) return g;
  // Only an `after` edge to a later node can close a cycle: drop those.
  for (int i = 0; i < c.graph.nodes_size(); ++i) {
    weft::v1::Node* node = c.graph.mutable_nodes(i);
    for (int k = node->after_size() - 1; k >= 0; --k) {
      if (std::stoi(node->after(k).substr(1)) > i) {
        node->mutable_after()->DeleteSubrange(k, 1);
      }
    }
  }
  return BuildGraph(c.graph, limits);
}

void CheckCase(Case& c, int trial) {
  absl::StatusOr<Graph> g = Build(c);
  ASSERT_TRUE(g.ok()) << "trial " << trial << ": " << g.status();
  absl::StatusOr<Plan> plan = PlanGraph(*g, c.options);
  ASSERT_TRUE(plan.ok()) << "trial " << trial << ": " << plan.status();
  absl::Status verified = VerifyPlan(*g, *plan);
  ASSERT_TRUE(verified.ok()) << "trial " << trial << ": " << verified << "\n"
                             << c.graph.DebugString();

  // Mode-specific stream rules.
  std::set<int> devices_used;
  std::map<std::tuple<std::string, int, Engine>, int> label_stream;
  for (const PlannedNode& pn : plan->nodes) {
    devices_used.insert(pn.device);
    const NodeSpec& node = g->node(pn.node);
    const PlannedStream& stream = plan->streams[pn.stream];
    ASSERT_FALSE(pn.reason.empty());
    if (c.options.stream_mode == StreamMode::kSingle) continue;
    ASSERT_EQ(stream.engine, node.engine) << "trial " << trial;
    ASSERT_EQ(stream.label, node.stream_label) << "trial " << trial;
    if (!node.stream_label.empty()) {
      auto key = std::make_tuple(node.stream_label, pn.device, node.engine);
      auto [it, inserted] = label_stream.emplace(key, pn.stream);
      ASSERT_EQ(it->second, pn.stream) << "trial " << trial;
    }
    if (node.device.has_value()) {
      ASSERT_EQ(pn.device, *node.device);
    }
  }
  if (c.options.stream_mode == StreamMode::kSingle) {
    ASSERT_EQ(plan->streams.size(), devices_used.size()) << "trial " << trial;
    if (devices_used.size() <= 1) {
      ASSERT_EQ(plan->num_events, 0);
    }
  }
  weft::v1::Plan proto = PlanToProto(*g, *plan);
  ASSERT_EQ(proto.nodes_size(), g->num_nodes());
  ASSERT_EQ(proto.streams_size(), static_cast<int>(plan->streams.size()));
}

TEST(PlanPropertyTest, SmallRandomGraphs) {
  std::mt19937 rng(1234567);
  for (int trial = 0; trial < 2000; ++trial) {
    Case c = RandomCase(rng, 40);
    CheckCase(c, trial);
    if (HasFatalFailure()) return;
  }
}

// Long graphs, so that dependencies span more than the reachability
// window (64 nodes) and recycling looks far back.
TEST(PlanPropertyTest, LongRandomGraphs) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 15; ++trial) {
    Case c = RandomCase(rng, 220);
    CheckCase(c, trial);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace weft::scheduler
