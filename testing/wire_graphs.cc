#include "testing/wire_graphs.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace weft::testing {
namespace {

weft::v1::Arg BufferArg(const std::string& name, weft::v1::Access access) {
  weft::v1::Arg arg;
  arg.mutable_buffer()->set_name(name);
  arg.mutable_buffer()->set_access(access);
  return arg;
}

weft::v1::Arg F32(float value) {
  weft::v1::Arg arg;
  arg.set_f32(value);
  return arg;
}

void AddBuffer(weft::v1::Graph& graph, const std::string& name,
               int64_t size_bytes, weft::v1::DType dtype, float fill,
               bool output = false) {
  weft::v1::Buffer* b = graph.add_buffers();
  b->set_name(name);
  b->set_size_bytes(size_bytes);
  b->set_dtype(dtype);
  b->set_fill(fill);
  b->set_output(output);
}

// `node` runs `op` over `args`.
void SetOp(weft::v1::Node* node, const std::string& name, const std::string& op,
           std::initializer_list<weft::v1::Arg> args) {
  node->set_name(name);
  node->set_op(op);
  for (const weft::v1::Arg& arg : args) *node->add_args() = arg;
}

}  // namespace

weft::v1::Graph LoopBetweenTensors(int64_t tensor_bytes) {
  using weft::v1::READ;
  using weft::v1::READ_WRITE;
  using weft::v1::WRITE;
  weft::v1::Graph g;
  g.set_name("loop_between_tensors");
  AddBuffer(g, "a", tensor_bytes, weft::v1::FLOAT32, 1);
  AddBuffer(g, "b", tensor_bytes, weft::v1::FLOAT32, 2, /*output=*/true);
  AddBuffer(g, "c", tensor_bytes, weft::v1::FLOAT32, 3);
  AddBuffer(g, "go", 4, weft::v1::INT32, 1);
  SetOp(g.add_nodes(), "scale_c", "scale",
        {F32(2), BufferArg("c", READ_WRITE)});
  SetOp(g.add_nodes(), "a_into_b", "axpy",
        {F32(1), BufferArg("a", READ), BufferArg("b", READ_WRITE)});
  weft::v1::Node* loop = g.add_nodes();
  loop->set_name("loop");
  weft::v1::WhileLoop* w = loop->mutable_while_loop();
  w->set_condition("go");
  w->set_max_iterations(8);
  SetOp(w->add_body(), "double_b", "scale",
        {F32(2), BufferArg("b", READ_WRITE)});
  SetOp(w->add_body(), "test", "less",
        {BufferArg("b", READ), F32(40), BufferArg("go", WRITE)});
  SetOp(g.add_nodes(), "c_into_b", "axpy",
        {F32(1), BufferArg("c", READ), BufferArg("b", READ_WRITE)});
  return g;
}

weft::v1::Graph LoopWithABodyNodeElsewhere() {
  using weft::v1::READ;
  using weft::v1::READ_WRITE;
  using weft::v1::WRITE;
  weft::v1::Graph g;
  g.set_name("loop_with_a_body_node_elsewhere");
  AddBuffer(g, "x", 1000000, weft::v1::FLOAT32, 0);
  AddBuffer(g, "y", 1000, weft::v1::FLOAT32, 0, /*output=*/true);
  AddBuffer(g, "go", 4, weft::v1::INT32, 0);
  weft::v1::Node* make = g.add_nodes();
  SetOp(make, "make", "fill", {BufferArg("x", WRITE), F32(1)});
  make->set_device(0);
  weft::v1::Node* loop = g.add_nodes();
  loop->set_name("loop");
  weft::v1::WhileLoop* w = loop->mutable_while_loop();
  w->set_condition("go");
  w->set_max_iterations(2);
  weft::v1::Node* step = w->add_body();
  SetOp(step, "step", "axpy",
        {F32(1), BufferArg("x", READ), BufferArg("y", READ_WRITE)});
  step->set_device(1);
  weft::v1::Node* stop = w->add_body();
  weft::v1::Arg zero;
  zero.set_i32(0);
  SetOp(stop, "stop", "fill", {BufferArg("go", WRITE), zero});
  stop->set_device(0);
  return g;
}

weft::v1::Graph AddChain(int n) {
  weft::v1::Graph g;
  g.set_name("add_chain");
  auto buffer = [&](const std::string& name, bool output) {
    weft::v1::Buffer* b = g.add_buffers();
    b->set_name(name);
    b->set_size_bytes(4096);
    b->set_dtype(weft::v1::FLOAT32);
    b->set_output(output);
    return b;
  };
  buffer("one", false)->set_fill(1.0);
  buffer("b0", false)->set_fill(1.0);
  for (int i = 1; i <= n; ++i) {
    buffer(absl::StrCat("b", i), i == n);
    weft::v1::Node* node = g.add_nodes();
    node->set_name(absl::StrCat("add", i));
    node->set_op("add");
    for (const auto& [name, access] :
         {std::pair{absl::StrCat("b", i - 1), weft::v1::READ},
          std::pair{std::string("one"), weft::v1::READ},
          std::pair{absl::StrCat("b", i), weft::v1::WRITE}}) {
      weft::v1::BufferArg* arg = node->add_args()->mutable_buffer();
      arg->set_name(name);
      arg->set_access(access);
    }
  }
  return g;
}

}  // namespace weft::testing
