// Helpers for scheduler tests: small graphs written compactly.
//
//   GraphMaker m;
//   m.Buffer("x").Buffer("y");
//   m.Node("a", "x:w").Node("b", "x:r y:w", {.cost = 5});
//   Graph g = m.Build();
//
// Uses are "buffer:r", "buffer:w" or "buffer:rw". Nodes run op "spin"
// unless told otherwise. Build() does not validate (GraphBuilder does).
#ifndef WEFT_SCHEDULER_TEST_UTIL_H_
#define WEFT_SCHEDULER_TEST_UTIL_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"

namespace weft::scheduler::testing {

struct NodeOptions {
  std::vector<std::string> after;
  std::string label;
  Engine engine = Engine::kCompute;
  double cost = 1;
  double occupancy = 1.0;
  std::optional<int> device;
  std::string op = "spin";
};

class GraphMaker {
 public:
  GraphMaker& Buffer(std::string name, uint64_t size_bytes = 64,
                     DType dtype = DType::kFloat32);
  GraphMaker& Node(std::string name, absl::string_view uses,
                   NodeOptions options = {});
  Graph Build() const;

 private:
  struct PendingNode {
    std::string name;
    std::string uses;
    NodeOptions options;
  };
  std::vector<BufferSpec> buffers_;
  std::vector<PendingNode> nodes_;
};

// A buffer of `mb` MB (40 us a MB over a 25 GB/s host link), with host
// data or not, an output or not, for graphs whose transfers matter.
BufferSpec Buffer(const std::string& name, double mb, bool host_data,
                  bool output = false);

// A "spin" COMPUTE node of `cost` us using `args` in order.
NodeSpec Kernel(const std::string& name, double cost,
                const std::vector<BufferUse>& args);

// Names of `ids`, in the given order.
std::vector<std::string> Names(const Graph& graph,
                               absl::Span<const NodeId> ids);

// Names of the reduced direct predecessors of the node called `name`.
std::vector<std::string> DepNames(const Graph& graph, const Dag& dag,
                                  absl::string_view name);

}  // namespace weft::scheduler::testing

#endif  // WEFT_SCHEDULER_TEST_UTIL_H_
