#include "scheduler/plan_size.h"

#include <string>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/benchmark_graphs.h"
#include "scheduler/plan_proto.h"
#include "scheduler/planner.h"

namespace weft::scheduler {
namespace {

// Enough of the wire form for the count: names and costs.
weft::v1::Graph ToProto(const Graph& graph) {
  weft::v1::Graph proto;
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    weft::v1::Node* node = proto.add_nodes();
    node->set_name(graph.node(v).name);
    node->mutable_cost()->set_estimated_us(graph.cost_us(v));
  }
  return proto;
}

// The bound never exceeds the real size, on graphs of every shape and
// option mix, and is not trivially small.
TEST(PlanSizeTest, IsALowerBoundOfTheEncodedPlan) {
  int checked = 0;
  for (const BenchmarkCase& c : AllScheduleCases()) {
    if (c.graph.num_nodes() > 3000) continue;
    for (bool explain : {false, true}) {
      for (bool simulate : {false, true}) {
        PlannerOptions options;
        options.num_devices = 2;
        options.explain = explain;
        options.simulate = simulate;
        absl::StatusOr<Plan> plan = PlanGraph(c.graph, options);
        ASSERT_TRUE(plan.ok()) << c.name << ": " << plan.status();
        const int64_t real =
            static_cast<int64_t>(PlanToProto(c.graph, *plan).ByteSizeLong());
        const int64_t bound = PlanProtoBytesAtLeast(c.graph, options);
        EXPECT_EQ(bound, PlanProtoBytesAtLeast(ToProto(c.graph), options));
        EXPECT_LE(bound, real)
            << c.name << " explain=" << explain << " simulate=" << simulate;
        // Within a small factor: the names and framing are most of it.
        EXPECT_GT(bound * 8, real) << c.name;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 40);
}

}  // namespace
}  // namespace weft::scheduler
