// Control nodes (weft.v1.WhileLoop, weft.v1.CaseOf) through BuildGraph:
// what the enclosing graph sees of them, and every rejection by field path.
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "scheduler/graph_builder.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

weft::v1::Graph Parse(const std::string& text) {
  weft::v1::Graph g;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &g)) << text;
  return g;
}

// x, y (FLOAT32), go (INT32), pick (INT64), f (FLOAT32 one element).
constexpr char kBuffers[] = R"pb(
  buffers { name: "x" size_bytes: 16 dtype: FLOAT32 fill: 1 }
  buffers { name: "y" size_bytes: 16 dtype: FLOAT32 output: true }
  buffers { name: "go" size_bytes: 4 dtype: INT32 }
  buffers { name: "pick" size_bytes: 8 dtype: INT64 }
  buffers { name: "f" size_bytes: 4 dtype: FLOAT32 }
)pb";

weft::v1::Graph Loop() {
  return Parse(std::string(kBuffers) + R"pb(
    name: "loop"
    nodes {
      name: "init"
      op: "fill"
      args { buffer { name: "go" access: WRITE } }
      args { i32: 1 }
    }
    nodes {
      name: "L"
      while_loop {
        condition: "go"
        max_iterations: 10
        body {
          name: "step"
          op: "scale"
          args { f32: 2 }
          args { buffer { name: "x" access: READ_WRITE } }
          cost { estimated_us: 5 }
        }
        body {
          name: "test"
          op: "greater"
          args { buffer { name: "y" access: READ } }
          args { f32: 100 }
          args { buffer { name: "go" access: WRITE } }
          cost { estimated_us: 1 }
        }
      }
    }
    nodes {
      name: "after"
      op: "copy"
      args { buffer { name: "x" access: READ } }
      args { buffer { name: "y" access: WRITE } }
    }
  )pb");
}

TEST(GraphBuilderControlTest, LoopIsOneNodeWithTheUnionOfItsBodysAccesses) {
  absl::StatusOr<Graph> graph = BuildGraph(Loop(), GraphLimits{});
  ASSERT_OK(graph.status());
  ASSERT_EQ(graph->num_nodes(), 3);
  EXPECT_TRUE(graph->has_control());
  const NodeSpec& loop = graph->node(1);
  EXPECT_EQ(loop.op, kWhileOp);
  ASSERT_NE(loop.control, nullptr);
  EXPECT_EQ(loop.control->kind, ControlSpec::Kind::kWhile);
  EXPECT_EQ(loop.control->condition, graph->FindBuffer("go"));
  EXPECT_EQ(loop.control->max_iterations, 10u);
  EXPECT_EQ(loop.engine, Engine::kHost);
  EXPECT_DOUBLE_EQ(loop.cost_us, 6);
  // x read-write, y read, go written by the body and read as condition.
  std::vector<std::pair<std::string, Access>> uses;
  for (const BufferUse& use : graph->Uses(1)) {
    uses.emplace_back(graph->buffer(use.buffer).name, use.access);
  }
  EXPECT_THAT(uses, ElementsAre(std::make_pair("x", Access::kReadWrite),
                                std::make_pair("y", Access::kRead),
                                std::make_pair("go", Access::kReadWrite)));
  ASSERT_EQ(loop.control->bodies.size(), 1u);
  const Graph& body = *loop.control->bodies[0];
  EXPECT_EQ(body.num_nodes(), 2);
  EXPECT_EQ(body.num_buffers(), graph->num_buffers());
  EXPECT_EQ(body.FindBuffer("go"), graph->FindBuffer("go"));
  // Bodies carry no initial data: the enclosing graph made it.
  EXPECT_EQ(body.buffer(body.FindBuffer("x")).init, BufferSpec::Init::kZero);
  EXPECT_FALSE(body.has_control());
}

TEST(GraphBuilderControlTest, CaseOfTakesTheCostliestBranchAndNests) {
  absl::StatusOr<Graph> graph =
      BuildGraph(Parse(std::string(kBuffers) + R"pb(
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
                           cost { estimated_us: 3 }
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
                               op: "fill"
                               args { buffer { name: "go" access: WRITE } }
                               args { i32: 0 }
                               cost { estimated_us: 7 }
                             }
                           }
                         }
                       }
                     }
                   }
                 )pb"),
                 GraphLimits{});
  ASSERT_OK(graph.status());
  const NodeSpec& c = graph->node(0);
  EXPECT_EQ(c.op, kCaseOp);
  ASSERT_EQ(c.control->bodies.size(), 2u);
  EXPECT_EQ(c.control->depth, 2);
  EXPECT_DOUBLE_EQ(c.cost_us, 7);
  EXPECT_TRUE(c.control->bodies[1]->has_control());
  EXPECT_EQ(c.control->bodies[1]->node(0).control->kind,
            ControlSpec::Kind::kWhile);
}

struct Rejection {
  std::string name;
  std::string graph;  // appended to kBuffers
  std::string field;  // the message starts with it
  std::string why;    // and contains this
};

class GraphBuilderControlRejectionTest
    : public ::testing::TestWithParam<Rejection> {};

TEST_P(GraphBuilderControlRejectionTest, NamesTheFieldAndWhy) {
  absl::StatusOr<Graph> graph = BuildGraph(
      Parse(std::string(kBuffers) + GetParam().graph), GraphLimits{});
  EXPECT_THAT(graph.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr(GetParam().field + ": ")));
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr(GetParam().why));
  EXPECT_EQ(graph.status().message().rfind(GetParam().field, 0), 0u)
      << graph.status();
}

constexpr char kStep[] = R"pb(
  name: "s"
  op: "scale"
  args { f32: 2 }
  args { buffer { name: "x" access: READ_WRITE } })pb";

INSTANTIATE_TEST_SUITE_P(
    Rejections, GraphBuilderControlRejectionTest,
    ::testing::Values(
        Rejection{"UnknownCondition",
                  absl::StrCat(R"pb(nodes { name: "L"
                                            while_loop { condition: "nope"
                                                         max_iterations: 2
                                                         body {)pb",
                               kStep, "} } }"),
                  "graph.nodes[0].while_loop.condition", "unknown buffer"},
        Rejection{"EmptyCondition",
                  absl::StrCat(
                      R"pb(nodes { name: "L"
                                   while_loop { max_iterations: 2 body {)pb",
                      kStep, "} } }"),
                  "graph.nodes[0].while_loop.condition", "empty buffer name"},
        Rejection{
            "ZeroIterations",
            absl::StrCat(R"pb(nodes { name: "L"
                                      while_loop { condition: "go" body {)pb",
                         kStep, "} } }"),
            "graph.nodes[0].while_loop.max_iterations", "> 0"},
        Rejection{"EmptyBody",
                  R"pb(nodes {
                         name: "L"
                         while_loop { condition: "go" max_iterations: 2 }
                       })pb",
                  "graph.nodes[0].while_loop.body", "at least one node"},
        Rejection{"UnknownSelector",
                  absl::StrCat(R"pb(nodes { name: "C"
                                            case_of { selector: "zz"
                                                      branches { nodes {)pb",
                               kStep, "} } } }"),
                  "graph.nodes[0].case_of.selector", "unknown buffer"},
        Rejection{"FloatSelector",
                  absl::StrCat(R"pb(nodes { name: "C"
                                            case_of { selector: "f"
                                                      branches { nodes {)pb",
                               kStep, "} } } }"),
                  "graph.nodes[0].case_of.selector", "INT32 or INT64"},
        Rejection{"NoBranches",
                  R"pb(nodes {
                         name: "C"
                         case_of { selector: "pick" }
                       })pb",
                  "graph.nodes[0].case_of.branches", "at least one branch"},
        Rejection{"EmptyBranch",
                  R"pb(nodes {
                         name: "C"
                         case_of {
                           selector: "pick"
                           branches {}
                         }
                       })pb",
                  "graph.nodes[0].case_of.branches[0].nodes",
                  "at least one node"},
        Rejection{"BodyNamesUnknownBuffer",
                  R"pb(nodes {
                         name: "L"
                         while_loop {
                           condition: "go"
                           max_iterations: 2
                           body { name: "a" op: "spin" }
                           body {
                             name: "b"
                             op: "scale"
                             args { f32: 1 }
                             args { buffer { name: "q" access: READ_WRITE } }
                           }
                         }
                       })pb",
                  "graph.nodes[0].while_loop.body[1].args[1].buffer.name",
                  "unknown buffer"},
        Rejection{"ControlWithOp",
                  absl::StrCat(R"pb(nodes { name: "L" op: "spin"
                                            while_loop { condition: "go"
                                                         max_iterations: 2
                                                         body {)pb",
                               kStep, "} } }"),
                  "graph.nodes[0].op", "control node"},
        Rejection{"ControlWithArgs",
                  absl::StrCat(
                      R"pb(nodes {
                             name: "L"
                             args { i32: 1 }
                             while_loop { condition: "go" max_iterations: 2
                                          body {)pb",
                      kStep, "} } }"),
                  "graph.nodes[0].args", "no args"},
        Rejection{"ControlWithDevice",
                  absl::StrCat(R"pb(nodes { name: "L" device: 0
                                            while_loop { condition: "go"
                                                         max_iterations: 2
                                                         body {)pb",
                               kStep, "} } }"),
                  "graph.nodes[0].device", "no device"},
        Rejection{"DuplicateNameAcrossBodies",
                  absl::StrCat(R"pb(nodes { name: "s" op: "spin" }
                                    nodes { name: "L"
                                            while_loop { condition: "go"
                                                         max_iterations: 2
                                                         body {)pb",
                               kStep, "} } }"),
                  "graph.nodes[1].while_loop.body[0].name",
                  "first used by graph.nodes[0]"},
        Rejection{"AfterOutsideTheBody",
                  R"pb(nodes { name: "top" op: "spin" }
                       nodes {
                         name: "L"
                         while_loop {
                           condition: "go"
                           max_iterations: 2
                           body { name: "a" op: "spin" after: "top" }
                         }
                       })pb",
                  "graph.nodes[1].while_loop.body[0].after[0]",
                  "unknown node"}),
    [](const ::testing::TestParamInfo<Rejection>& info) {
      return info.param.name;
    });

TEST(GraphBuilderControlTest, NestingDeeperThanTheLimitIsRefused) {
  // Three loops inside each other, with a limit of two.
  const std::string text = std::string(kBuffers) + R"pb(
    nodes {
      name: "L1"
      while_loop {
        condition: "go"
        max_iterations: 2
        body {
          name: "L2"
          while_loop {
            condition: "go"
            max_iterations: 2
            body {
              name: "L3"
              while_loop {
                condition: "go"
                max_iterations: 2
                body { name: "a" op: "spin" }
              }
            }
          }
        }
      }
    })pb";
  GraphLimits limits;
  ASSERT_OK(BuildGraph(Parse(text), limits).status());
  limits.max_control_depth = 2;
  EXPECT_THAT(
      BuildGraph(Parse(text), limits).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("graph.nodes[0].while_loop.body[0].while_loop.body[0]"
                         ".while_loop: control nodes nest deeper than the "
                         "limit of 2")));
}

TEST(GraphBuilderControlTest, BodiesCountAgainstTheNodeLimit) {
  GraphLimits limits;
  limits.max_nodes = 4;
  EXPECT_THAT(
      BuildGraph(Loop(), limits).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("graph.nodes[1].while_loop.body: 5 nodes (bodies "
                         "included) exceed the limit of 4")));
}

}  // namespace
}  // namespace weft::scheduler
