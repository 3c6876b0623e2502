#include "scheduler/op_signatures.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace weft::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class OpSignaturesTest : public ::testing::Test {
 protected:
  OpSignaturesTest() {
    // 0: f32 16 bytes, 1: f32 16 bytes, 2: i32 16 bytes, 3: f32 8 bytes
    buffers_.resize(4);
    const DType types[] = {DType::kFloat32, DType::kFloat32, DType::kInt32,
                           DType::kFloat32};
    const uint64_t sizes[] = {16, 16, 16, 8};
    const char* names[] = {"x", "y", "ints", "small"};
    for (int i = 0; i < 4; ++i) {
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
  EXPECT_THAT(BuiltinOpNames(), ElementsAre("add", "axpy", "copy", "fill",
                                            "reduce_sum", "scale", "spin"));
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
}

TEST_F(OpSignaturesTest, RejectsUnknownOp) {
  absl::Status s = Check("gemm", {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].op: unknown op 'gemm'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("axpy"));
}

TEST_F(OpSignaturesTest, RejectsWrongArgumentCount) {
  absl::Status s = Check("axpy", {2.0f, R(0)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args: op 'axpy' takes 3"
                         " arguments, got 2"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("x: FLOAT32 buffer READ"));
}

TEST_F(OpSignaturesTest, RejectsScalarWhereBufferExpected) {
  absl::Status s = Check("copy", {R(0), 1.0f});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[1]: op 'copy' "
                         "argument 'dst' must be a buffer"));
}

TEST_F(OpSignaturesTest, RejectsBufferWhereScalarExpected) {
  absl::Status s = Check("scale", {R(1), RW(0)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[0]: op 'scale' "
                         "argument 'a' must be a scalar"));
}

TEST_F(OpSignaturesTest, RejectsWrongDType) {
  absl::Status s = Check("axpy", {1.0f, R(2), RW(1)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[1].buffer.name: op 'axpy' "
                         "argument 'x' must be a FLOAT32 buffer"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("'ints' is INT32"));
}

TEST_F(OpSignaturesTest, RejectsWrongAccess) {
  absl::Status s = Check("axpy", {1.0f, R(0), W(1)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[2].buffer.access: op 'axpy' "
                         "argument 'y' must be accessed READ_WRITE, got "
                         "WRITE"));
  s = Check("fill", {R(0), 1.0f});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("args[0].buffer.access"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("WRITE or READ_WRITE, got READ"));
  s = Check("add", {R(0), RW(1), W(3)});
  EXPECT_THAT(std::string(s.message()), HasSubstr("args[1].buffer.access"));
}

TEST_F(OpSignaturesTest, RejectsCopyIntoSmallerBuffer) {
  absl::Status s = Check("copy", {R(0), W(3)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[1].buffer.name: op 'copy' "
                         "destination 'small' (8 bytes) is smaller than "
                         "source 'x' (16 bytes)"));
}

TEST_F(OpSignaturesTest, SpinTakesOnlyBuffers) {
  absl::Status s = Check("spin", {R(0), 3.0f});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].args[1]: op 'spin' "
                         "takes only buffer arguments"));
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
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("graph.nodes[7].op: a node that launches a user "
                         "kernel has op 'kernel', got 'spin'"));
}

}  // namespace
}  // namespace weft::scheduler
