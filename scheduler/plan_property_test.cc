// Plans thousands of random graphs end to end (wire graph -> GraphBuilder
// -> PlanGraph) and checks every plan with the brute-force verifier.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "scheduler/graph_builder.h"
#include "scheduler/plan_proto.h"
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
  c.options.device_policy = static_cast<DevicePolicyKind>(uniform(0, 5));
  c.options.restrict_to_parent_devices = coin(0.3);
  c.options.data_threshold = coin(0.5) ? 0.1 : 0.5;
  c.options.max_concurrent_kernels = uniform(1, 3);
  c.options.copy_engines_per_device = uniform(1, 2);
  const int splits[] = {0, 3, 4, 7, 65536};
  c.options.max_nodes_per_stream = splits[uniform(0, 4)];
  c.options.explain = !coin(0.2);
  if (coin(0.3)) {
    std::vector<std::vector<double>> gbps(
        c.options.num_devices + 1,
        std::vector<double>(c.options.num_devices + 1));
    for (auto& row : gbps) {
      for (double& g : row) g = coin(0.2) ? 0 : uniform(1, 50);
    }
    for (int d = 0; d < c.options.num_devices; ++d) {
      gbps[d][c.options.num_devices] = uniform(1, 50);
      gbps[c.options.num_devices][d] = uniform(1, 50);
    }
    absl::StatusOr<Topology> topology = Topology::FromMatrix(gbps);
    if (topology.ok()) c.options.topology = *topology;
  }
  if (coin(0.3)) {
    for (int d = 0; d < c.options.num_devices; ++d) {
      c.options.busy_streams.push_back(uniform(0, 3));
    }
  }

  const int num_buffers = uniform(1, 8);
  for (int b = 0; b < num_buffers; ++b) {
    weft::v1::Buffer* buffer = c.graph.add_buffers();
    buffer->set_name(absl::StrCat("b", b));
    buffer->set_size_bytes(64 << uniform(0, 14));
    if (coin(0.3)) buffer->set_data("abc");
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

// One line per planned node, for failure messages.
std::string Dump(const Graph& g, const Plan& plan) {
  std::string out;
  for (int i = 0; i < plan.num_nodes(); ++i) {
    const PlannedNode& pn = plan.nodes[i];
    absl::StrAppend(&out, g.node(pn.node).name, " dev ", pn.device, " stream ",
                    pn.stream, " peer ", pn.peer_stream, " waits [",
                    absl::StrJoin(plan.Waits(i), ","), "] signal ",
                    pn.signal_event, " deps [");
    for (NodeId d : plan.Deps(i)) absl::StrAppend(&out, g.node(d).name, " ");
    absl::StrAppend(&out, "]\n");
  }
  return out;
}

// Returns the number of nodes holding a peer stream.
int CheckCase(Case& c, int trial) {
  absl::StatusOr<Graph> g = Build(c);
  EXPECT_TRUE(g.ok()) << "trial " << trial << ": " << g.status();
  if (!g.ok()) return 0;
  absl::StatusOr<Plan> plan = PlanGraph(*g, c.options);
  EXPECT_TRUE(plan.ok()) << "trial " << trial << ": " << plan.status();
  if (!plan.ok()) return 0;
  absl::Status verified = VerifyPlan(*g, *plan);
  EXPECT_TRUE(verified.ok()) << "trial " << trial << ": " << verified << "\n"
                             << c.graph.DebugString() << Dump(*g, *plan);
  if (!verified.ok()) return 0;
  int peers = 0;
  EXPECT_EQ(plan->reasons.size(), c.options.explain ? plan->nodes.size() : 0);
  for (const std::string& reason : plan->reasons) {
    EXPECT_FALSE(reason.empty());
  }

  // Mode-specific stream rules.
  std::set<int> devices_used;
  std::map<std::tuple<std::string, int, Engine>, int> label_stream;
  for (const PlannedNode& pn : plan->nodes) {
    devices_used.insert(pn.device);
    if (pn.peer_stream >= 0) {
      ++peers;
      // A copy between devices: a stream of its source device, which is
      // a COPY stream outside SINGLE mode.
      EXPECT_NE(plan->streams[pn.peer_stream].device, pn.device);
      if (c.options.stream_mode == StreamMode::kMulti) {
        EXPECT_EQ(plan->streams[pn.peer_stream].engine, Engine::kCopy);
      }
    }
    const NodeSpec& node = g->node(pn.node);
    const PlannedStream& stream = plan->streams[pn.stream];

    if (c.options.stream_mode == StreamMode::kSingle) continue;
    EXPECT_EQ(stream.engine, node.engine) << "trial " << trial;
    EXPECT_EQ(stream.label, node.stream_label) << "trial " << trial;
    // A physical split may continue a label's stream on another one.
    const bool splits_possible = c.options.max_nodes_per_stream != 0 &&
                                 c.options.max_nodes_per_stream < 1000;
    if (!node.stream_label.empty() && !splits_possible) {
      auto key = std::make_tuple(node.stream_label, pn.device, node.engine);
      auto [it, inserted] = label_stream.emplace(key, pn.stream);
      EXPECT_EQ(it->second, pn.stream) << "trial " << trial;
    }
    if (node.device.has_value()) {
      EXPECT_EQ(pn.device, *node.device);
    }
  }
  const bool split = c.options.max_nodes_per_stream != 0 &&
                     c.options.max_nodes_per_stream < 1000;
  if (c.options.stream_mode == StreamMode::kSingle && !split) {
    EXPECT_EQ(plan->streams.size(), devices_used.size()) << "trial " << trial;
    if (devices_used.size() <= 1) {
      EXPECT_EQ(plan->num_events, 0);
    }
  }
  if (split) {
    // Every stream within its task budget, unless one node alone exceeds
    // it.
    std::vector<int> tasks(plan->streams.size(), 0);
    std::vector<int> biggest(plan->streams.size(), 0);
    for (int i = 0; i < plan->num_nodes(); ++i) {
      const PlannedNode& pn = plan->nodes[i];
      // A copy between devices also records and waits for the events that
      // join its two streams, on each of them.
      const int join = pn.peer_stream >= 0 ? 2 : 0;
      const int t = 1 + static_cast<int>(plan->Waits(i).size()) +
                    (pn.signal_event >= 0 ? 1 : 0) + join;
      tasks[pn.stream] += t;
      biggest[pn.stream] = std::max(biggest[pn.stream], t);
      if (pn.peer_stream >= 0) {
        tasks[pn.peer_stream] += 1 + join;
        biggest[pn.peer_stream] = std::max(biggest[pn.peer_stream], 1 + join);
      }
    }
    // An eager copy: its wait, itself and its record.
    for (const PlannedCopy& copy : plan->copies) {
      tasks[copy.stream] += 3;
      biggest[copy.stream] = std::max(biggest[copy.stream], 3);
    }
    for (size_t s = 0; s < tasks.size(); ++s) {
      if (tasks[s] > c.options.max_nodes_per_stream) {
        EXPECT_EQ(tasks[s], biggest[s])
            << "trial " << trial << ": stream " << s << " holds " << tasks[s]
            << " tasks over " << c.options.max_nodes_per_stream;
      }
    }
  }
  weft::v1::Plan proto = PlanToProto(*g, *plan);
  EXPECT_EQ(proto.nodes_size(), g->num_nodes());
  EXPECT_EQ(proto.streams_size(), static_cast<int>(plan->streams.size()));
  return peers;
}

TEST(PlanPropertyTest, SmallRandomGraphs) {
  std::mt19937 rng(1234567);
  int plans_with_peers = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    Case c = RandomCase(rng, 40);
    plans_with_peers += CheckCase(c, trial) > 0 ? 1 : 0;
    if (HasFailure()) return;
  }
  // Copies between devices are common enough to be covered.
  EXPECT_GT(plans_with_peers, 100);
}

// Plans as weftd makes them for jobs: no simulation (so no estimates to
// check), memory planned. Everything else holds as for a full plan.
TEST(PlanPropertyTest, JobPlansOfSmallRandomGraphs) {
  std::mt19937 rng(7654321);
  for (int trial = 0; trial < 500; ++trial) {
    Case c = RandomCase(rng, 40);
    c.options.simulate = false;
    c.options.explain = false;
    c.options.plan_memory = true;
    c.options.plan_memory_over_budget = true;
    CheckCase(c, trial);
    if (HasFailure()) return;
  }
}

// Long graphs, so that dependencies span more than the reachability
// window (64 nodes) and recycling looks far back.
TEST(PlanPropertyTest, LongRandomGraphs) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 15; ++trial) {
    Case c = RandomCase(rng, 220);
    CheckCase(c, trial);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace weft::scheduler
