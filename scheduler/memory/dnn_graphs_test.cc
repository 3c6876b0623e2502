#include "scheduler/memory/dnn_graphs.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/dependency_inference.h"

namespace weft::scheduler::memory {
namespace {

TEST(DnnGraphsTest, SizesNearTheTargetWithOneInputAndOneOutput) {
  const std::vector<std::pair<std::string, std::function<Graph(int)>>>
      builders = {{"mobilenet", [](int n) { return MobileNetLike(n); }},
                  {"nas", [](int n) { return NasLike(n); }},
                  {"transformer", [](int n) { return TransformerStack(n); }},
                  {"unet", [](int n) { return UNet(n); }},
                  {"random", [](int n) { return RandomDag(n); }}};
  for (const auto& [name, build] : builders) {
    for (const int n : {200, 1000, 5000}) {
      const Graph g = build(n);
      EXPECT_GE(g.num_nodes(), n * 7 / 10) << name << " " << n;
      EXPECT_LE(g.num_nodes(), n * 11 / 10) << name << " " << n;
      int outputs = 0, inputs = 0;
      for (const BufferSpec& b : g.buffers()) {
        outputs += b.output;
        inputs += b.init == BufferSpec::Init::kData;
      }
      EXPECT_EQ(outputs, 1) << name;
      EXPECT_EQ(inputs, 1) << name;
      EXPECT_TRUE(InferDependencies(g).ok()) << name;
    }
  }
}

}  // namespace
}  // namespace weft::scheduler::memory
