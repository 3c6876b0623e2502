#include "scheduler/op_signatures.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace weft::scheduler {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::weft::testing::StatusIs;

class OpSignaturesTest : public ::testing::Test {
 protected:
  OpSignaturesTest() {
    // 0: f32 16 bytes, 1: f32 16 bytes, 2: i32 16 bytes, 3: f32 8 bytes,
    // 4: f32 4 bytes
    buffers_.resize(5);
    const DType types[] = {DType::kFloat32, DType::kFloat32, DType::kInt32,
                           DType::kFloat32, DType::kFloat32};
    const uint64_t sizes[] = {16, 16, 16, 8, 4};
    const char* names[] = {"x", "y", "ints", "small", "one"};
    for (int i = 0; i < 5; ++i) {
      buffers_[i].name = names[i];
      buffers_[i].dtype = types[i];
      buffers_[i].size_bytes = sizes[i];
    }
  }

  absl::Status Check(const char* op, std::vector<Arg> args) {
    NodeSpec node;
    node.name = "n";
    node.op = op;
    node.args = std::move(args);
    return CheckOpSignature(node, buffers_, "graph.nodes[7]");
  }

  std::vector<BufferSpec> buffers_;
};

BufferUse R(BufferId b) { return {b, Access::kRead}; }
BufferUse W(BufferId b) { return {b, Access::kWrite}; }
BufferUse RW(BufferId b) { return {b, Access::kReadWrite}; }

TEST_F(OpSignaturesTest, KnowsTheBuiltins) {
  EXPECT_THAT(BuiltinOpNames(),
              ElementsAre("add", "axpy", "copy", "div", "dot", "fill", "gemv",
                          "greater", "less", "mul", "reduce_sum", "scale",
                          "spin", "sub"));
  EXPECT_TRUE(IsBuiltinOp("axpy"));
  EXPECT_FALSE(IsBuiltinOp("gemm"));
  EXPECT_FALSE(IsBuiltinOp(""));
}

TEST_F(OpSignaturesTest, AcceptsValidCalls) {
  EXPECT_TRUE(Check("fill", {W(2), int32_t{3}}).ok());
  EXPECT_TRUE(Check("fill", {RW(0), 2.5}).ok());
  EXPECT_TRUE(Check("copy", {R(3), W(0)}).ok());
  EXPECT_TRUE(Check("copy", {R(2), RW(0)}).ok());  // any dtype
  EXPECT_TRUE(Check("axpy", {2.0f, R(0), RW(1)}).ok());
  EXPECT_TRUE(Check("axpy", {int64_t{2}, R(0), RW(1)}).ok());  // converted
  EXPECT_TRUE(Check("scale", {0.5, RW(0)}).ok());
  EXPECT_TRUE(Check("add", {R(0), R(1), W(3)}).ok());
  EXPECT_TRUE(Check("reduce_sum", {R(0), W(3)}).ok());
  EXPECT_TRUE(Check("spin", {}).ok());
  EXPECT_TRUE(Check("spin", {R(0), W(2), RW(3)}).ok());
  for (const char* op : {"sub", "mul", "div"}) {
    EXPECT_TRUE(Check(op, {R(0), R(1), W(1)}).ok()) << op;
    EXPECT_TRUE(Check(op, {R(0), R(4), RW(0)}).ok()) << op;  // broadcast
  }
  EXPECT_TRUE(Check("dot", {R(0), R(1), W(3)}).ok());
  EXPECT_TRUE(Check("gemv", {int32_t{2}, int64_t{2}, R(0), R(3), W(1)}).ok());
  EXPECT_TRUE(Check("less", {R(0), 0.5f, W(2)}).ok());
  EXPECT_TRUE(Check("greater", {R(3), int32_t{1}, RW(2)}).ok());
}

TEST_F(OpSignaturesTest, RejectsUnknownOp) {
  absl::Status s = Check("gemm", {});
  EXPECT_THAT(s,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("graph.nodes[7].op: unknown op 'gemm'"),
                             HasSubstr("axpy"))));
}

TEST_F(OpSignaturesTest, RejectsWrongArgumentCount) {
  absl::Status s = Check("axpy", {2.0f, R(0)});
  EXPECT_THAT(
      s,
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          AllOf(StartsWith(
                    "graph.nodes[7].args: op 'axpy' takes 3 arguments, got 2"),
                HasSubstr("x: FLOAT32 buffer READ"))));
}

TEST_F(OpSignaturesTest, RejectsScalarWhereBufferExpected) {
  absl::Status s = Check("copy", {R(0), 1.0f});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          StartsWith("graph.nodes[7].args[1]: op 'copy' "
                                     "argument 'dst' must be a buffer")));
}

TEST_F(OpSignaturesTest, RejectsBufferWhereScalarExpected) {
  absl::Status s = Check("scale", {R(1), RW(0)});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          StartsWith("graph.nodes[7].args[0]: op 'scale' "
                                     "argument 'a' must be a scalar")));
}

TEST_F(OpSignaturesTest, RejectsWrongDType) {
  absl::Status s = Check("axpy", {1.0f, R(2), RW(1)});
  EXPECT_THAT(
      s,
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(StartsWith("graph.nodes[7].args[1].buffer.name: op 'axpy' "
                                "argument 'x' must be a FLOAT32 buffer"),
                     HasSubstr("'ints' is INT32"))));
}

TEST_F(OpSignaturesTest, RejectsWrongAccess) {
  absl::Status s = Check("axpy", {1.0f, R(0), W(1)});
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInvalidArgument,
                  StartsWith(
                      "graph.nodes[7].args[2].buffer.access: op 'axpy' "
                      "argument 'y' must be accessed READ_WRITE, got WRITE")));
  s = Check("fill", {R(0), 1.0f});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          AllOf(HasSubstr("args[0].buffer.access"),
                                HasSubstr("WRITE or READ_WRITE, got READ"))));
  s = Check("add", {R(0), RW(1), W(3)});
  EXPECT_THAT(std::string(s.message()), HasSubstr("args[1].buffer.access"));
}

TEST_F(OpSignaturesTest, RejectsCopyIntoSmallerBuffer) {
  absl::Status s = Check("copy", {R(0), W(3)});
  EXPECT_THAT(
      s,
      StatusIs(absl::StatusCode::kInvalidArgument,
               StartsWith(
                   "graph.nodes[7].args[1].buffer.name: op 'copy' destination "
                   "'small' (8 bytes) is smaller than source 'x' (16 bytes)")));
}

TEST_F(OpSignaturesTest, SpinTakesOnlyBuffers) {
  absl::Status s = Check("spin", {R(0), 3.0f});
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          StartsWith("graph.nodes[7].args[1]: op 'spin' takes "
                                     "only buffer arguments")));
}

TEST_F(OpSignaturesTest, ElementwiseOpsBroadcastOnlyOneElement) {
  // n = min(len(a), len(out)) = 4; b of 2 elements is neither 1 nor >= 4.
  absl::Status s = Check("sub", {R(0), R(3), W(1)});
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInvalidArgument,
                  StartsWith("graph.nodes[7].args[1].buffer.name: op 'sub' "
                             "argument 'b' ('small', 2 elements) must hold one "
                             "element (broadcast) or at least 4")));
  // With a 2-element output, n = 2 and the same b is fine.
  EXPECT_TRUE(Check("mul", {R(0), R(3), W(3)}).ok());
  s = Check("div", {R(4), R(1), W(2)});
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("'out' must be a FLOAT32 buffer, but buffer 'ints'"));
}

TEST_F(OpSignaturesTest, ElementwiseOpsMayWriteAnInput) {
  EXPECT_TRUE(Check("sub", {R(0), R(1), RW(0)}).ok());
  EXPECT_TRUE(Check("mul", {R(0), R(0), W(0)}).ok());
  EXPECT_TRUE(Check("div", {R(1), R(0), W(0)}).ok());
  EXPECT_TRUE(Check("add", {R(0), R(1), W(1)}).ok());
  EXPECT_TRUE(Check("axpy", {1.0f, R(1), RW(1)}).ok());
}

TEST_F(OpSignaturesTest, GemvChecksDimensionsAndSizes) {
  // A = x holds 4 elements: 2 x 2 fits, 2 x 3 does not.
  absl::Status s = Check("gemv", {int32_t{2}, int32_t{3}, R(0), R(1), W(1)});
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInvalidArgument,
                  StartsWith("graph.nodes[7].args[2].buffer.name: op 'gemv' "
                             "argument 'A' (buffer 'x', 4 elements) must hold "
                             "at least rows * cols = 6 elements")));
  s = Check("gemv", {int32_t{1}, int32_t{4}, R(0), R(3), W(1)});
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[3].buffer.name: op 'gemv' "
                         "argument 'x' (buffer 'small', 2 elements) must "
                         "hold at least cols = 4 elements"));
  s = Check("gemv", {int32_t{2}, int32_t{1}, R(0), R(1), W(4)});
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[4].buffer.name: op 'gemv' "
                         "argument 'y' (buffer 'one', 1 elements) must hold "
                         "at least rows = 2 elements"));
  s = Check("gemv", {int32_t{0}, int32_t{1}, R(0), R(1), W(1)});
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[0]: op 'gemv' argument 'rows' "
                         "must be at least 1, got 0"));
  s = Check("gemv", {int32_t{1}, int64_t{-2}, R(0), R(1), W(1)});
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[1]: op 'gemv' argument 'cols' "
                         "must be at least 1, got -2"));
}

TEST_F(OpSignaturesTest, GemvTakesIntegerDimensions) {
  absl::Status s = Check("gemv", {2.0f, int32_t{2}, R(0), R(1), W(3)});
  EXPECT_THAT(
      s, StatusIs(
             absl::StatusCode::kInvalidArgument,
             AllOf(StartsWith("graph.nodes[7].args[0]: op 'gemv' argument "
                              "'rows' must be an integer scalar (i32 or i64)"),
                   HasSubstr("rows: i32, cols: i32"))));
  s = Check("gemv", {int32_t{2}, int64_t{1} << 40, R(0), R(1), W(3)});
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[1]: op 'gemv' argument 'cols' "
                         "(1099511627776) does not fit in i32"));
}

TEST_F(OpSignaturesTest, GemvAndDotRejectAnOutputThatIsAnInput) {
  absl::Status s = Check("gemv", {int32_t{2}, int32_t{2}, R(0), R(3), W(0)});
  EXPECT_THAT(
      s, StatusIs(
             absl::StatusCode::kInvalidArgument,
             StartsWith("graph.nodes[7].args[4].buffer.name: op 'gemv' cannot "
                        "write its result into its input 'A' (buffer 'x')")));
  s = Check("gemv", {int32_t{2}, int32_t{2}, R(0), R(1), RW(1)});
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("its input 'x' (buffer 'y')"));
  s = Check("dot", {R(0), R(1), W(1)});
  EXPECT_THAT(
      s, StatusIs(absl::StatusCode::kInvalidArgument,
                  StartsWith("graph.nodes[7].args[2].buffer.name: op 'dot' "
                             "cannot write its result into its input 'y'")));
}

TEST_F(OpSignaturesTest, ComparisonsWriteAnInt32Flag) {
  absl::Status s = Check("less", {R(0), 1.0f, W(1)});
  EXPECT_THAT(
      s, StatusIs(
             absl::StatusCode::kInvalidArgument,
             StartsWith(
                 "graph.nodes[7].args[2].buffer.name: op 'less' argument "
                 "'flag' must be an INT32 buffer, but buffer 'y' is FLOAT32")));
  s = Check("greater", {R(0), R(1), W(2)});
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[1]: op 'greater' argument 't' "
                         "must be a scalar"));
  s = Check("greater", {R(2), 1.0f, W(2)});
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("argument 'x' must be a FLOAT32 buffer"));
}

TEST_F(OpSignaturesTest, UserKernelsTakeAnyArguments) {
  NodeSpec node;
  node.name = "k";
  node.op = std::string(kUserKernelOp);
  node.kernel = KernelSpec{};
  node.args = {2.0f, R(0), W(3), int64_t{5}, 1.0, int32_t{2}};
  EXPECT_TRUE(CheckOpSignature(node, buffers_, "graph.nodes[7]").ok());
  EXPECT_FALSE(IsBuiltinOp(kUserKernelOp));

  node.op = "spin";  // a kernel node must carry the reserved op
  absl::Status s = CheckOpSignature(node, buffers_, "graph.nodes[7]");
  EXPECT_THAT(s,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       StartsWith("graph.nodes[7].op: a node that launches a "
                                  "user kernel has op 'kernel', got 'spin'")));
}

}  // namespace
}  // namespace weft::scheduler
