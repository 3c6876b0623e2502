#include "scheduler/graph_builder.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace weft::scheduler {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

weft::v1::Graph Parse(const std::string& text) {
  weft::v1::Graph g;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &g)) << text;
  return g;
}

// A valid two-buffer, three-node graph that tests then break.
weft::v1::Graph ValidGraph() {
  return Parse(R"pb(
    name: "pipeline"
    buffers { name: "x" size_bytes: 16 dtype: FLOAT32 fill: 1.5 }
    buffers {
      name: "y"
      size_bytes: 16
      dtype: FLOAT32
      data: "abcd"
      output: true
    }
    nodes {
      name: "scale_x"
      op: "scale"
      args { f32: 2 }
      args { buffer { name: "x" access: READ_WRITE } }
      cost { estimated_us: 3 }
    }
    nodes {
      name: "axpy"
      op: "axpy"
      args { f64: 0.5 }
      args { buffer { name: "x" access: READ } }
      args { buffer { name: "y" access: READ_WRITE } }
      stream_label: "main"
      device: 1
    }
    nodes {
      name: "spin"
      op: "spin"
      args { buffer { name: "y" access: READ } }
      after: "scale_x"
      engine: HOST
    }
  )pb");
}

GraphLimits TwoDevices() {
  GraphLimits limits;
  limits.num_devices = 2;
  return limits;
}

void ExpectInvalid(const weft::v1::Graph& proto, const GraphLimits& limits,
                   const std::string& field, const std::string& why) {
  absl::StatusOr<Graph> g = BuildGraph(proto, limits);
  ASSERT_FALSE(g.ok()) << "expected an error at " << field;
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()), StartsWith(field + ": "));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr(why));
}

TEST(GraphBuilderTest, BuildsAValidGraph) {
  absl::StatusOr<Graph> g = BuildGraph(ValidGraph(), TwoDevices());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->name(), "pipeline");
  ASSERT_EQ(g->num_buffers(), 2);
  EXPECT_EQ(g->buffer(0).init, BufferSpec::Init::kFill);
  EXPECT_EQ(g->buffer(0).fill, 1.5);
  EXPECT_EQ(g->buffer(1).init, BufferSpec::Init::kData);
  EXPECT_EQ(g->buffer(1).data, "abcd");
  EXPECT_TRUE(g->buffer(1).output);
  EXPECT_EQ(g->buffer(1).dtype, DType::kFloat32);
  ASSERT_EQ(g->num_nodes(), 3);
  const NodeSpec& axpy = g->node(1);
  EXPECT_EQ(axpy.op, "axpy");
  ASSERT_EQ(axpy.args.size(), 3u);
  EXPECT_EQ(std::get<double>(axpy.args[0]), 0.5);
  EXPECT_EQ(std::get<BufferUse>(axpy.args[2]).buffer, 1);
  EXPECT_EQ(std::get<BufferUse>(axpy.args[2]).access, Access::kReadWrite);
  EXPECT_EQ(axpy.stream_label, "main");
  EXPECT_EQ(axpy.device, 1);
  EXPECT_EQ(g->node(0).cost_us, 3);
  EXPECT_FALSE(g->node(0).device.has_value());
  EXPECT_EQ(g->node(2).engine, Engine::kHost);
  ASSERT_EQ(g->node(2).after.size(), 1u);
  EXPECT_EQ(g->node(2).after[0], 0);
}

TEST(GraphBuilderTest, AcceptsAnEmptyGraph) {
  absl::StatusOr<Graph> g = BuildGraph(weft::v1::Graph(), GraphLimits());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_nodes(), 0);
}

TEST(GraphBuilderTest, RejectsTooManyNodes) {
  GraphLimits limits = TwoDevices();
  limits.max_nodes = 2;
  ExpectInvalid(ValidGraph(), limits, "graph.nodes",
                "3 nodes exceed the limit of 2");
}

TEST(GraphBuilderTest, RejectsTooManyBuffers) {
  GraphLimits limits = TwoDevices();
  limits.max_buffers = 1;
  ExpectInvalid(ValidGraph(), limits, "graph.buffers",
                "2 buffers exceed the limit of 1");
}

TEST(GraphBuilderTest, RejectsEmptyBufferName) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_buffers(1)->clear_name();
  ExpectInvalid(g, TwoDevices(), "graph.buffers[1].name", "empty");
}

TEST(GraphBuilderTest, RejectsDuplicateBufferName) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_buffers(1)->set_name("x");
  ExpectInvalid(g, TwoDevices(), "graph.buffers[1].name",
                "duplicate buffer name 'x' (first used by graph.buffers[0])");
}

TEST(GraphBuilderTest, RejectsUnknownDType) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_buffers(0)->set_dtype(static_cast<weft::v1::DType>(42));
  ExpectInvalid(g, TwoDevices(), "graph.buffers[0].dtype", "unknown dtype 42");
}

TEST(GraphBuilderTest, RejectsZeroSize) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_buffers(0)->set_size_bytes(0);
  ExpectInvalid(g, TwoDevices(), "graph.buffers[0].size_bytes",
                "must be positive");
}

TEST(GraphBuilderTest, RejectsAbsurdSize) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_buffers(1)->set_size_bytes(uint64_t{1} << 62);
  ExpectInvalid(g, TwoDevices(), "graph.buffers[1].size_bytes",
                "exceed the per-buffer limit");
}

TEST(GraphBuilderTest, RejectsSizeNotAMultipleOfTheElement) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_buffers(0)->set_size_bytes(10);
  ExpectInvalid(g, TwoDevices(), "graph.buffers[0].size_bytes",
                "10 is not a multiple of the FLOAT32 element size (4 bytes)");
}

TEST(GraphBuilderTest, RejectsTotalSizeOverTheLimit) {
  GraphLimits limits = TwoDevices();
  limits.max_total_bytes = 24;
  ExpectInvalid(ValidGraph(), limits, "graph.buffers[1].size_bytes",
                "total 32 bytes, over the per-graph limit of 24 bytes");
}

TEST(GraphBuilderTest, RejectsDataLongerThanTheBuffer) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_buffers(1)->set_data(std::string(17, 'z'));
  ExpectInvalid(g, TwoDevices(), "graph.buffers[1].data",
                "17 bytes of initial data do not fit in the buffer's 16 "
                "bytes");
}

TEST(GraphBuilderTest, RejectsNonFiniteFillOfAnIntegerBuffer) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_buffers(0)->set_dtype(weft::v1::INT32);
  g.mutable_buffers(0)->set_fill(std::numeric_limits<double>::infinity());
  ExpectInvalid(g, TwoDevices(), "graph.buffers[0].fill",
                "non-finite fill value for a INT32 buffer");
}

TEST(GraphBuilderTest, RejectsEmptyNodeName) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(2)->clear_name();
  ExpectInvalid(g, TwoDevices(), "graph.nodes[2].name", "empty node name");
}

TEST(GraphBuilderTest, RejectsDuplicateNodeName) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(2)->set_name("axpy");
  ExpectInvalid(g, TwoDevices(), "graph.nodes[2].name",
                "duplicate node name 'axpy' (first used by graph.nodes[1])");
}

TEST(GraphBuilderTest, RejectsEmptyOp) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(0)->clear_op();
  ExpectInvalid(g, TwoDevices(), "graph.nodes[0].op", "empty op");
}

TEST(GraphBuilderTest, RejectsUnknownOp) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(1)->set_op("gemm");
  ExpectInvalid(g, TwoDevices(), "graph.nodes[1].op",
                "unknown op 'gemm' (built-in ops: add, axpy");
}

TEST(GraphBuilderTest, RejectsTooManyArguments) {
  GraphLimits limits = TwoDevices();
  limits.max_args_per_node = 2;
  ExpectInvalid(ValidGraph(), limits, "graph.nodes[1].args",
                "3 arguments exceed the limit of 2");
}

TEST(GraphBuilderTest, RejectsArgumentWithoutValue) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(1)->mutable_args(1)->Clear();
  ExpectInvalid(g, TwoDevices(), "graph.nodes[1].args[1]", "no value set");
}

TEST(GraphBuilderTest, RejectsEmptyBufferReference) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(1)->mutable_args(1)->mutable_buffer()->clear_name();
  ExpectInvalid(g, TwoDevices(), "graph.nodes[1].args[1].buffer.name",
                "empty buffer name");
}

TEST(GraphBuilderTest, RejectsUnknownBuffer) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(1)->mutable_args(2)->mutable_buffer()->set_name("nope");
  ExpectInvalid(g, TwoDevices(), "graph.nodes[1].args[2].buffer.name",
                "unknown buffer 'nope'");
}

TEST(GraphBuilderTest, RejectsMissingAccess) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(2)->mutable_args(0)->mutable_buffer()->clear_access();
  ExpectInvalid(g, TwoDevices(), "graph.nodes[2].args[0].buffer.access",
                "missing access mode (READ, WRITE or READ_WRITE)");
}

TEST(GraphBuilderTest, RejectsUnknownAccess) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(2)->mutable_args(0)->mutable_buffer()->set_access(
      static_cast<weft::v1::Access>(9));
  ExpectInvalid(g, TwoDevices(), "graph.nodes[2].args[0].buffer.access",
                "unknown access mode 9");
}

TEST(GraphBuilderTest, RejectsEmptyAfter) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(2)->set_after(0, "");
  ExpectInvalid(g, TwoDevices(), "graph.nodes[2].after[0]", "empty node name");
}

TEST(GraphBuilderTest, RejectsUnknownAfter) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(2)->add_after("ghost");
  ExpectInvalid(g, TwoDevices(), "graph.nodes[2].after[1]",
                "unknown node 'ghost'");
}

TEST(GraphBuilderTest, RejectsAfterItself) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(2)->add_after("spin");
  ExpectInvalid(g, TwoDevices(), "graph.nodes[2].after[1]",
                "node 'spin' cannot run after itself");
}

TEST(GraphBuilderTest, RejectsCycleOfAfterEdges) {
  weft::v1::Graph g = ValidGraph();
  // spin runs after scale_x; make scale_x run after spin.
  g.mutable_nodes(0)->add_after("spin");
  ExpectInvalid(g, TwoDevices(), "graph.nodes[0].after[0]",
                "'spin' closes a dependency cycle");
}

TEST(GraphBuilderTest, RejectsCycleThroughInferredEdges) {
  // scale_x writes x, axpy reads it (inferred scale_x -> axpy); asking
  // scale_x to run after axpy closes a cycle.
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(0)->add_after("axpy");
  absl::StatusOr<Graph> built = BuildGraph(g, TwoDevices());
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(built.status().message()),
              StartsWith("graph.nodes[0].after[0]: 'axpy' closes a dependency "
                         "cycle"));
  EXPECT_THAT(std::string(built.status().message()),
              HasSubstr("'scale_x' -> 'axpy' -> 'scale_x'"));
}

TEST(GraphBuilderTest, AcceptsAfterPointingToALaterNode) {
  // a and b touch different buffers, so a may wait for the later b.
  weft::v1::Graph g = Parse(R"pb(
    buffers { name: "x" size_bytes: 4 }
    buffers { name: "y" size_bytes: 4 }
    nodes {
      name: "a"
      op: "spin"
      args { buffer { name: "x" access: WRITE } }
      after: "b"
    }
    nodes {
      name: "b"
      op: "spin"
      args { buffer { name: "y" access: WRITE } }
    }
  )pb");
  absl::StatusOr<Graph> built = BuildGraph(g, GraphLimits());
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->node(0).after, std::vector<NodeId>{1});
}

TEST(GraphBuilderTest, FindsLongCyclesWithoutRecursion) {
  weft::v1::Graph g;
  const int n = 300000;
  for (int i = 0; i < n; ++i) {
    weft::v1::Node* node = g.add_nodes();
    node->set_name(absl::StrCat("n", i));
    node->set_op("spin");
    if (i > 0) node->add_after(absl::StrCat("n", i - 1));
  }
  g.mutable_nodes(0)->add_after(absl::StrCat("n", n - 1));
  absl::StatusOr<Graph> built = BuildGraph(g, GraphLimits());
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(built.status().message()),
              StartsWith("graph.nodes[0].after[0]: 'n299999' closes a "
                         "dependency cycle"));
  EXPECT_THAT(std::string(built.status().message()), HasSubstr("..."));
}

TEST(GraphBuilderTest, RejectsUnknownEngine) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(0)->set_engine(static_cast<weft::v1::Engine>(11));
  ExpectInvalid(g, TwoDevices(), "graph.nodes[0].engine", "unknown engine 11");
}

TEST(GraphBuilderTest, RejectsNegativeCost) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(0)->mutable_cost()->set_estimated_us(-1);
  ExpectInvalid(g, TwoDevices(), "graph.nodes[0].cost.estimated_us",
                "must not be negative");
}

TEST(GraphBuilderTest, RejectsNonFiniteCost) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(0)->mutable_cost()->set_estimated_us(std::nan(""));
  ExpectInvalid(g, TwoDevices(), "graph.nodes[0].cost.estimated_us",
                "must be finite");
  g.mutable_nodes(0)->mutable_cost()->set_estimated_us(
      std::numeric_limits<double>::infinity());
  ExpectInvalid(g, TwoDevices(), "graph.nodes[0].cost.estimated_us",
                "must be finite");
}

TEST(GraphBuilderTest, RejectsPinOutsideTheMachine) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(1)->set_device(2);
  ExpectInvalid(g, TwoDevices(), "graph.nodes[1].device",
                "device 2 is outside [0, 2)");
  g.mutable_nodes(1)->set_device(-1);
  ExpectInvalid(g, TwoDevices(), "graph.nodes[1].device",
                "device -1 is outside [0, 2)");
  g.mutable_nodes(1)->set_device(1);
  ExpectInvalid(g, GraphLimits(), "graph.nodes[1].device",
                "device 1 is outside [0, 1)");
}

TEST(GraphBuilderTest, RejectsSignatureMismatch) {
  weft::v1::Graph g = ValidGraph();
  g.mutable_nodes(1)->mutable_args(2)->mutable_buffer()->set_access(
      weft::v1::WRITE);
  ExpectInvalid(g, TwoDevices(), "graph.nodes[1].args[2].buffer.access",
                "op 'axpy' argument 'y' must be accessed READ_WRITE");
  g = ValidGraph();
  g.mutable_nodes(0)->mutable_args()->RemoveLast();
  ExpectInvalid(g, TwoDevices(), "graph.nodes[0].args",
                "op 'scale' takes 2 arguments, got 1");
}

}  // namespace
}  // namespace weft::scheduler
