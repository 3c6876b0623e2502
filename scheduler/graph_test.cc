#include "scheduler/graph.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace weft::scheduler {
namespace {

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kBytes), 1);
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4);
  EXPECT_EQ(DTypeSize(DType::kInt32), 4);
  EXPECT_EQ(DTypeSize(DType::kFloat64), 8);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8);
  EXPECT_EQ(DTypeName(DType::kFloat32), "FLOAT32");
  EXPECT_EQ(DTypeName(DType::kBytes), "BYTES");
  EXPECT_EQ(AccessName(Access::kReadWrite), "READ_WRITE");
  EXPECT_EQ(EngineName(Engine::kCollective), "COLLECTIVE");
}

TEST(AccessTest, ReadsAndWrites) {
  EXPECT_TRUE(Reads(Access::kRead));
  EXPECT_FALSE(Writes(Access::kRead));
  EXPECT_FALSE(Reads(Access::kWrite));
  EXPECT_TRUE(Writes(Access::kWrite));
  EXPECT_TRUE(Reads(Access::kReadWrite));
  EXPECT_TRUE(Writes(Access::kReadWrite));
}

Graph TwoNodeGraph() {
  std::vector<BufferSpec> buffers(2);
  buffers[0].name = "x";
  buffers[0].size_bytes = 16;
  buffers[1].name = "y";
  buffers[1].size_bytes = 16;
  std::vector<NodeSpec> nodes(2);
  nodes[0].name = "a";
  nodes[0].op = "fill";
  nodes[0].args = {BufferUse{0, Access::kWrite}, 1.0f};
  nodes[1].name = "b";
  nodes[1].op = "copy";
  nodes[1].args = {BufferUse{0, Access::kRead}, BufferUse{1, Access::kWrite}};
  return Graph("g", std::move(buffers), std::move(nodes));
}

TEST(GraphTest, LooksUpNamesAndUses) {
  Graph g = TwoNodeGraph();
  EXPECT_EQ(g.name(), "g");
  EXPECT_EQ(g.num_nodes(), 2);
  EXPECT_EQ(g.num_buffers(), 2);
  EXPECT_EQ(g.FindNode("b"), 1);
  EXPECT_EQ(g.FindNode("zz"), -1);
  EXPECT_EQ(g.FindBuffer("y"), 1);
  EXPECT_EQ(g.FindBuffer(""), -1);
  std::vector<BufferUse> uses = g.BufferUses(0);
  ASSERT_EQ(uses.size(), 1u);  // the scalar is skipped
  EXPECT_EQ(uses[0].buffer, 0);
  EXPECT_EQ(uses[0].access, Access::kWrite);
  uses = g.BufferUses(1);
  ASSERT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses[1].buffer, 1);
}

TEST(GraphTest, MovesKeepIndexes) {
  Graph g = TwoNodeGraph();
  Graph moved = std::move(g);
  EXPECT_EQ(moved.FindNode("a"), 0);
  EXPECT_EQ(moved.buffer(1).name, "y");
}

}  // namespace
}  // namespace weft::scheduler
