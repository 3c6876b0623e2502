#include "scheduler/memory/dnn_graphs.h"

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace weft::scheduler::memory {
namespace {

// Appends tensors and layers; a layer reads some tensors and writes one.
class Builder {
 public:
  explicit Builder(std::string name) : name_(std::move(name)) {}

  BufferId Tensor(int64_t bytes) {
    BufferSpec spec;
    spec.name = absl::StrCat("t", buffers_.size());
    spec.size_bytes = static_cast<uint64_t>(std::max<int64_t>(bytes, 4));
    spec.dtype = DType::kFloat32;
    if (buffers_.empty()) spec.init = BufferSpec::Init::kData;
    buffers_.push_back(std::move(spec));
    return static_cast<BufferId>(buffers_.size() - 1);
  }
  // A layer reading `inputs` into a new tensor of `bytes`.
  BufferId Layer(std::initializer_list<BufferId> inputs, int64_t bytes) {
    return Layer(std::vector<BufferId>(inputs), bytes);
  }
  BufferId Layer(const std::vector<BufferId>& inputs, int64_t bytes) {
    const BufferId out = Tensor(bytes);
    NodeSpec node;
    node.name = absl::StrCat("n", nodes_.size());
    node.op = "spin";
    int64_t streamed = bytes;
    for (const BufferId b : inputs) {
      node.args.push_back(BufferUse{b, Access::kRead});
      streamed += static_cast<int64_t>(buffers_[b].size_bytes);
    }
    node.args.push_back(BufferUse{out, Access::kWrite});
    node.cost_us = 5 + static_cast<double>(streamed) / 900e3;
    nodes_.push_back(std::move(node));
    return out;
  }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  int64_t bytes(BufferId b) const {
    return static_cast<int64_t>(buffers_[b].size_bytes);
  }
  Graph Build(BufferId output) {
    buffers_[output].output = true;
    return Graph(name_, std::move(buffers_), std::move(nodes_));
  }

 private:
  std::string name_;
  std::vector<BufferSpec> buffers_;
  std::vector<NodeSpec> nodes_;
};

}  // namespace

Graph MobileNetLike(int nodes) {
  Builder g("mobilenet");
  const int blocks = std::max(1, (nodes - 1) / 4);
  const int stage = std::max(1, blocks / 5);
  BufferId x = g.Tensor(224 * 224 * 3 * 4);
  int64_t side = 112, channels = 16;
  x = g.Layer({x}, side * side * channels * 4);  // stem
  for (int k = 0; k < blocks && g.num_nodes() + 4 <= std::max(nodes, 5); ++k) {
    const bool down = k > 0 && k % stage == 0 && side > 7;
    const int64_t in = g.bytes(x);
    const BufferId e = g.Layer({x}, in * 6);
    if (down) {
      side /= 2;
      channels = std::min<int64_t>(channels * 2, 320);
    }
    const int64_t out = side * side * channels * 4;
    const BufferId d = g.Layer({e}, out * 6);
    const BufferId p = g.Layer({d}, out);
    x = down ? g.Layer({p}, out) : g.Layer({x, p}, out);
  }
  return g.Build(x);
}

Graph NasLike(int nodes, uint32_t seed) {
  std::mt19937 rng(seed);
  Builder g("nas");
  const int64_t base = 32 * 32 * 64 * 4;
  BufferId input = g.Tensor(base);
  BufferId prev2 = g.Layer({input}, base);
  BufferId prev1 = g.Layer({prev2}, base);
  const int per_cell = 5;
  while (g.num_nodes() + 2 * per_cell + 1 <=
         std::max(nodes, 2 * per_cell + 3)) {
    std::vector<BufferId> states = {prev2, prev1};
    std::vector<int> reads(2, 0);
    for (int i = 0; i < per_cell; ++i) {
      // Two ops on two earlier states, then their sum.
      const int a = static_cast<int>(rng() % states.size());
      const int b = static_cast<int>(rng() % states.size());
      const int64_t scale = 1 + static_cast<int64_t>(rng() % 3);
      const BufferId oa = g.Layer({states[a]}, base * scale);
      const BufferId ob = g.Layer({states[b]}, base * scale);
      ++reads[a];
      ++reads[b];
      // Sum into a state (approximating a node of the cell).
      const BufferId s = g.Layer({oa, ob}, base);
      states.push_back(s);
      reads.push_back(0);
    }
    std::vector<BufferId> unused;
    for (size_t i = 2; i < states.size(); ++i) {
      if (reads[i] == 0) unused.push_back(states[i]);
    }
    if (unused.empty()) unused.push_back(states.back());
    const BufferId out =
        g.Layer(unused, base * static_cast<int64_t>(unused.size()));
    prev2 = prev1;
    prev1 = g.Layer({out}, base);  // 1x1 back to the cell width
  }
  return g.Build(prev1);
}

Graph TransformerStack(int nodes) {
  Builder g("transformer");
  const int64_t seq = 512, dim = 1024, heads = 16;
  const int64_t act = seq * dim * 4;
  const int64_t scores = seq * seq * 4;  // one head
  BufferId x = g.Tensor(act);
  x = g.Layer({x}, act);  // embedding
  const int per_block = 7 + 4 * static_cast<int>(heads);
  while (g.num_nodes() + per_block <= std::max(nodes, per_block + 1)) {
    const BufferId n1 = g.Layer({x}, act);
    const BufferId q = g.Layer({n1}, act);
    const BufferId k = g.Layer({n1}, act);
    const BufferId v = g.Layer({n1}, act);
    std::vector<BufferId> contexts;
    for (int h = 0; h < heads; ++h) {
      const BufferId s = g.Layer({q, k}, scores);
      const BufferId p = g.Layer({s}, scores);
      const BufferId c = g.Layer({p, v}, act / heads);
      contexts.push_back(g.Layer({c}, act / heads));  // head output
    }
    const BufferId attn = g.Layer(contexts, act);
    x = g.Layer({x, attn}, act);  // projection + residual
    const BufferId n2 = g.Layer({x}, act);
    const BufferId up = g.Layer({n2}, act * 4);
    const BufferId down = g.Layer({up}, act);
    x = g.Layer({x, down}, act);
  }
  return g.Build(x);
}

Graph UNet(int nodes) {
  Builder g("unet");
  const int depth = 5;
  const int64_t side0 = 256, ch0 = 32;
  BufferId x = g.Tensor(side0 * side0 * 3 * 4);
  BufferId out = x;
  // One U is 2 + depth * 3 + depth * 4 nodes; repeat Us in sequence.
  const int per_u = 2 + depth * 7;
  while (g.num_nodes() + per_u <= std::max(nodes, per_u + 1)) {
    int64_t side = side0, ch = ch0;
    x = g.Layer({out}, side * side * ch * 4);
    std::vector<BufferId> skips;
    for (int l = 0; l < depth; ++l) {
      const int64_t bytes = side * side * ch * 4;
      const BufferId a = g.Layer({x}, bytes);
      const BufferId b = g.Layer({a}, bytes);
      skips.push_back(b);
      side /= 2;
      ch *= 2;
      x = g.Layer({b}, side * side * ch * 4);  // downsample
    }
    for (int l = depth - 1; l >= 0; --l) {
      side *= 2;
      ch /= 2;
      const int64_t bytes = side * side * ch * 4;
      const BufferId up = g.Layer({x}, bytes);
      const BufferId cat = g.Layer({up, skips[l]}, 2 * bytes);
      const BufferId a = g.Layer({cat}, bytes);
      x = g.Layer({a}, bytes);
    }
    out = g.Layer({x}, side0 * side0 * 4);
  }
  return g.Build(out);
}

Graph RandomDag(int nodes, uint32_t seed) {
  std::mt19937 rng(seed);
  Builder g("random");
  const int width = 16;
  std::vector<BufferId> made = {g.Tensor(64 * 1024)};
  std::uniform_int_distribution<int> fan_in(1, 3);
  while (g.num_nodes() < std::max(nodes, 1)) {
    const int i = g.num_nodes();
    const int lo = std::max(0, i - 2 * width);
    std::vector<BufferId> inputs;
    const int k = fan_in(rng);
    for (int a = 0; a < k; ++a) {
      const int pick = lo + static_cast<int>(rng() % (made.size() - lo));
      if (std::find(inputs.begin(), inputs.end(), made[pick]) == inputs.end()) {
        inputs.push_back(made[pick]);
      }
    }
    const int64_t bytes = int64_t{4096} << (rng() % 9);  // 4 KiB .. 1 MiB
    made.push_back(g.Layer(inputs, bytes));
  }
  return g.Build(made.back());
}

}  // namespace weft::scheduler::memory
