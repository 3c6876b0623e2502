#include "scheduler/graph_builder.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "scheduler/dependency_inference.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::weft::testing::StatusIs;

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
  EXPECT_THAT(g.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith(field + ": "), HasSubstr(why))));
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

TEST(GraphBuilderTest, RejectsAnEmptyGraph) {
  absl::StatusOr<Graph> g = BuildGraph(weft::v1::Graph(), GraphLimits());
  ASSERT_THAT(g.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("graph.nodes")));
}

TEST(GraphBuilderTest, RejectsNamesOverTheLimitWithoutEchoingThem) {
  GraphLimits limits;
  limits.max_name_bytes = 8;
  const std::string huge(1 << 20, 'n');
  struct Case {
    std::string text;
    std::string field;
  };
  const Case cases[] = {
      {R"pb(name: "NAME"
            nodes { name: "a" op: "spin" })pb",
       "graph.name"},
      {R"pb(nodes { name: "NAME" op: "spin" })pb", "graph.nodes[0].name"},
      {R"pb(buffers { name: "NAME" size_bytes: 4 }
            nodes { name: "a" op: "spin" })pb",
       "graph.buffers[0].name"},
      {R"pb(nodes { name: "a" op: "spin" stream_label: "NAME" })pb",
       "graph.nodes[0].stream_label"},
  };
  for (const Case& c : cases) {
    std::string text = c.text;
    text.replace(text.find("NAME"), 4, huge);
    weft::v1::Graph proto;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto));
    absl::StatusOr<Graph> g = BuildGraph(proto, limits);
    ASSERT_THAT(
        g.status(),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 HasSubstr(c.field + ": 1048576 bytes exceed the limit of 8")))
        << c.field;
    EXPECT_LT(g.status().message().size(), 200u);
  }
}

TEST(GraphBuilderTest, UnknownNamesAreQuotedBriefly) {
  const std::string huge(1 << 20, 'u');
  weft::v1::Graph proto;
  weft::v1::Node* node = proto.add_nodes();
  node->set_name("a");
  node->set_op(huge);
  absl::StatusOr<Graph> g = BuildGraph(proto, GraphLimits());
  ASSERT_THAT(g.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("graph.nodes[0].op: unknown op 'uuu")));
  EXPECT_LT(g.status().message().size(), 1000u);

  node->set_op("spin");
  node->add_after(huge);
  g = BuildGraph(proto, GraphLimits());
  ASSERT_THAT(
      g.status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("graph.nodes[0].after[0]: unknown node 'uuu")));
  EXPECT_LT(g.status().message().size(), 200u);
}

TEST(GraphBuilderTest, RejectsCostsOverTheLimit) {
  GraphLimits limits;
  limits.max_node_cost_us = 1e6;
  weft::v1::Graph proto;
  weft::v1::Node* node = proto.add_nodes();
  node->set_name("forever");
  node->set_op("spin");
  node->mutable_cost()->set_estimated_us(1e18);
  absl::StatusOr<Graph> g = BuildGraph(proto, limits);
  ASSERT_THAT(g.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("graph.nodes[0].cost.estimated_us"),
                             HasSubstr("--max_node_cost_seconds"))));
  node->mutable_cost()->set_estimated_us(1e6);
  EXPECT_TRUE(BuildGraph(proto, limits).ok());
}

TEST(GraphBuilderTest, RejectsTooManyAfterEntries) {
  GraphLimits limits;
  limits.max_after_per_node = 2;
  weft::v1::Graph proto;
  for (const char* name : {"a", "b", "c", "d"}) {
    weft::v1::Node* node = proto.add_nodes();
    node->set_name(name);
    node->set_op("spin");
  }
  for (const char* name : {"a", "b", "c"})
    proto.mutable_nodes(3)->add_after(name);
  absl::StatusOr<Graph> g = BuildGraph(proto, limits);
  ASSERT_THAT(
      g.status(),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("graph.nodes[3].after: 3 entries exceed the limit of 2")));
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
  EXPECT_THAT(
      built.status(),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          AllOf(
              StartsWith(
                  "graph.nodes[0].after[0]: 'axpy' closes a dependency cycle"),
              HasSubstr("'scale_x' -> 'axpy' -> 'scale_x'"))));
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
  EXPECT_THAT(built.status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("graph.nodes[0].after[0]: 'n299999' "
                                        "closes a dependency cycle"),
                             HasSubstr("..."))));
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

// --- User kernels.

// Two buffers, one CUDA module, one PTX module and two kernel nodes where
// the second reads what the first writes.
weft::v1::Graph KernelGraph() {
  return Parse(R"pb(
    name: "kernels"
    buffers { name: "x" size_bytes: 64 dtype: FLOAT32 fill: 1 }
    buffers { name: "y" size_bytes: 64 dtype: FLOAT32 output: true }
    modules {
      name: "saxpy"
      cuda_source: "extern \"C\" __global__ void k(float* y) {}"
      nvrtc_options: "-DN=16"
    }
    modules { name: "raw" ptx: ".version 8.0" }
    nodes {
      name: "produce"
      kernel {
        module: "saxpy"
        kernel: "k"
        grid { x: 4 }
        block { x: 128 y: 2 }
        shared_memory_bytes: 1024
      }
      args { buffer { name: "x" access: WRITE } }
      args { f32: 2 }
      args { i64: 16 }
      cost { estimated_us: 5 }
    }
    nodes {
      name: "consume"
      kernel {
        module: "raw"
        kernel: "entry"
        grid { x: 1 y: 2 z: 3 }
        block { x: 32 }
      }
      args { buffer { name: "x" access: READ } }
      args { buffer { name: "y" access: WRITE } }
    }
  )pb");
}

TEST(GraphBuilderKernelTest, BuildsModulesAndKernelNodes) {
  absl::StatusOr<Graph> g = BuildGraph(KernelGraph(), GraphLimits());
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->modules().size(), 2u);
  EXPECT_EQ(g->module(0).name, "saxpy");
  EXPECT_EQ(g->module(0).kind, ModuleSpec::Kind::kCudaSource);
  EXPECT_THAT(g->module(0).code, HasSubstr("__global__"));
  ASSERT_EQ(g->module(0).nvrtc_options.size(), 1u);
  EXPECT_EQ(g->module(0).nvrtc_options[0], "-DN=16");
  EXPECT_EQ(g->module(1).kind, ModuleSpec::Kind::kPtx);

  const NodeSpec& produce = g->node(0);
  EXPECT_EQ(produce.op, kUserKernelOp);
  ASSERT_TRUE(produce.kernel.has_value());
  EXPECT_EQ(produce.kernel->module, 0);
  EXPECT_EQ(produce.kernel->kernel, "k");
  EXPECT_EQ(produce.kernel->grid[0], 4u);
  EXPECT_EQ(produce.kernel->grid[1], 1u);  // unset means 1
  EXPECT_EQ(produce.kernel->grid[2], 1u);
  EXPECT_EQ(produce.kernel->block[0], 128u);
  EXPECT_EQ(produce.kernel->block[1], 2u);
  EXPECT_EQ(produce.kernel->shared_memory_bytes, 1024u);
  ASSERT_EQ(produce.args.size(), 3u);
  EXPECT_EQ(std::get<float>(produce.args[1]), 2.0f);
  EXPECT_EQ(std::get<int64_t>(produce.args[2]), 16);

  const NodeSpec& consume = g->node(1);
  EXPECT_EQ(consume.kernel->module, 1);
  EXPECT_EQ(consume.kernel->grid[2], 3u);
}

TEST(GraphBuilderKernelTest, BufferAccessOrdersKernelNodes) {
  absl::StatusOr<Graph> g = BuildGraph(KernelGraph(), GraphLimits());
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<Dag> dag = InferDependencies(*g);
  ASSERT_TRUE(dag.ok()) << dag.status();
  EXPECT_THAT(dag->Preds(1), ::testing::ElementsAre(0));  // RAW on x
  EXPECT_TRUE(dag->Preds(0).empty());
}

TEST(GraphBuilderKernelTest, RejectsBadModules) {
  weft::v1::Graph g = KernelGraph();
  g.mutable_modules(1)->set_name("saxpy");
  ExpectInvalid(g, GraphLimits(), "graph.modules[1].name",
                "duplicate module name 'saxpy' (first used by "
                "graph.modules[0])");

  g = KernelGraph();
  g.mutable_modules(0)->clear_name();
  ExpectInvalid(g, GraphLimits(), "graph.modules[0].name", "empty module name");

  g = KernelGraph();
  g.mutable_modules(0)->clear_code();
  ExpectInvalid(g, GraphLimits(), "graph.modules[0]",
                "module 'saxpy' has no code (set cuda_source or ptx)");

  g = KernelGraph();
  g.mutable_modules(1)->set_ptx("");
  ExpectInvalid(g, GraphLimits(), "graph.modules[1].ptx",
                "module 'raw' has empty code");

  g = KernelGraph();
  g.mutable_modules(0)->set_source_file("saxpy.cu");
  ExpectInvalid(g, GraphLimits(), "graph.modules[0].source_file",
                "read by the client");

  g = KernelGraph();
  g.mutable_modules(1)->add_nvrtc_options("-G");
  ExpectInvalid(g, GraphLimits(), "graph.modules[1].nvrtc_options",
                "only to cuda_source modules");

  g = KernelGraph();
  g.mutable_modules(0)->add_nvrtc_options("--gpu-architecture=sm_90");
  ExpectInvalid(g, GraphLimits(), "graph.modules[0].nvrtc_options[1]",
                "chosen per device");

  GraphLimits small;
  small.max_module_bytes = 8;
  ExpectInvalid(KernelGraph(), small, "graph.modules[0].cuda_source",
                "exceed the per-module limit of 8 bytes");
}

TEST(GraphBuilderKernelTest, RejectsBadLaunches) {
  weft::v1::Graph g = KernelGraph();
  g.mutable_nodes(0)->mutable_kernel()->set_module("nope");
  ExpectInvalid(g, GraphLimits(), "graph.nodes[0].kernel.module",
                "unknown module 'nope'");

  g = KernelGraph();
  g.mutable_nodes(1)->mutable_kernel()->clear_kernel();
  ExpectInvalid(g, GraphLimits(), "graph.nodes[1].kernel.kernel",
                "empty kernel name");

  g = KernelGraph();
  g.mutable_nodes(0)->set_op("spin");
  ExpectInvalid(g, GraphLimits(), "graph.nodes[0].op",
                "op 'spin' and kernel are both set");

  g = KernelGraph();
  g.mutable_nodes(0)->mutable_kernel()->mutable_grid()->set_x(0);
  ExpectInvalid(g, GraphLimits(), "graph.nodes[0].kernel.grid.x",
                "must be at least 1");

  g = KernelGraph();
  g.mutable_nodes(0)->mutable_kernel()->clear_block();
  ExpectInvalid(g, GraphLimits(), "graph.nodes[0].kernel.block",
                "missing block");

  g = KernelGraph();
  g.mutable_nodes(0)->mutable_kernel()->mutable_grid()->set_y(65536);
  ExpectInvalid(g, GraphLimits(), "graph.nodes[0].kernel.grid.y",
                "65536 exceeds the limit of 65535");

  g = KernelGraph();
  g.mutable_nodes(0)->mutable_kernel()->mutable_block()->set_x(1025);
  ExpectInvalid(g, GraphLimits(), "graph.nodes[0].kernel.block.x",
                "1025 exceeds the limit of 1024");

  g = KernelGraph();
  g.mutable_nodes(0)->mutable_kernel()->mutable_block()->set_z(65);
  ExpectInvalid(g, GraphLimits(), "graph.nodes[0].kernel.block.z",
                "65 exceeds the limit of 64");

  g = KernelGraph();
  g.mutable_nodes(0)->mutable_kernel()->mutable_block()->set_x(512);
  g.mutable_nodes(0)->mutable_kernel()->mutable_block()->set_y(4);
  ExpectInvalid(g, GraphLimits(), "graph.nodes[0].kernel.block",
                "512x4x1 = 2048 threads per block exceed the limit of 1024");

  g = KernelGraph();
  g.mutable_nodes(0)->mutable_kernel()->set_shared_memory_bytes(300 * 1024);
  ExpectInvalid(g, GraphLimits(), "graph.nodes[0].kernel.shared_memory_bytes",
                "307200 bytes exceed the limit of 232448 bytes");

  g = KernelGraph();
  g.mutable_nodes(1)->set_engine(weft::v1::HOST);
  ExpectInvalid(g, GraphLimits(), "graph.nodes[1].engine",
                "not on the HOST engine");

  g = KernelGraph();
  g.mutable_nodes(1)->mutable_args(1)->mutable_buffer()->set_name("zz");
  ExpectInvalid(g, GraphLimits(), "graph.nodes[1].args[1].buffer.name",
                "unknown buffer 'zz'");
}

TEST(GraphBuilderKernelTest, ReservedOpNameIsNotABuiltin) {
  weft::v1::Graph g = KernelGraph();
  g.mutable_nodes(1)->clear_kernel();
  g.mutable_nodes(1)->set_op("kernel");
  ExpectInvalid(g, GraphLimits(), "graph.nodes[1].op", "unknown op 'kernel'");
}

}  // namespace
}  // namespace weft::scheduler
