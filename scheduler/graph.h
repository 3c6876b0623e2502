// The validated, immutable graph model the planner works on.
//
// A Graph holds buffers and nodes with dense ids (their index in the
// submitted order). It is built only by GraphBuilder (graph_builder.h), which
// validates everything a client can get wrong, so code downstream may assume:
// names are unique and non-empty, every reference resolves, every op is
// known and its arguments match the op's signature (or the node launches a
// kernel of one of the graph's modules with a valid shape), explicit `after`
// edges form no cycle, and device pins are within the machine. A Graph never
// changes after construction and is safe to share between threads.
#ifndef WEFT_SCHEDULER_GRAPH_H_
#define WEFT_SCHEDULER_GRAPH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "scheduler/occupancy.h"

namespace weft::scheduler {

using NodeId = int32_t;
using BufferId = int32_t;

enum class DType { kBytes, kFloat32, kFloat64, kInt32, kInt64 };
enum class Access { kRead, kWrite, kReadWrite };
enum class Engine { kCompute, kCopy, kCollective, kHost };

// Size in bytes of one element of `dtype` (1 for kBytes).
int DTypeSize(DType dtype);
absl::string_view DTypeName(DType dtype);
absl::string_view AccessName(Access access);
absl::string_view EngineName(Engine engine);
inline bool Reads(Access a) { return a != Access::kWrite; }
inline bool Writes(Access a) { return a != Access::kRead; }

struct BufferSpec {
  enum class Init { kZero, kData, kFill };

  std::string name;
  uint64_t size_bytes = 0;
  DType dtype = DType::kBytes;
  Init init = Init::kZero;
  std::string data;  // kData: initial bytes (at most size_bytes, zero padded)
  double fill = 0;   // kFill: every element set to this value
  bool output = false;
};

struct BufferUse {
  BufferId buffer = -1;
  Access access = Access::kRead;
};

// One node argument: a buffer use or a typed scalar.
using Arg = std::variant<BufferUse, float, double, int32_t, int64_t>;

// Device code a graph's user kernels come from (weft.v1.Module).
struct ModuleSpec {
  enum class Kind { kCudaSource, kPtx };

  std::string name;
  Kind kind = Kind::kCudaSource;
  std::string code;                        // CUDA C++ source or PTX text
  std::vector<std::string> nvrtc_options;  // kCudaSource only
};

using ModuleId = int32_t;

// A user kernel launch (weft.v1.KernelLaunch), validated: every extent is at
// least 1 and within CUDA's limits.
struct KernelSpec {
  ModuleId module = -1;
  std::string kernel;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_memory_bytes = 0;
};

// NodeSpec::op of nodes that launch a user kernel (not a built-in op name;
// the wire form leaves Node.op empty for them).
inline constexpr absl::string_view kUserKernelOp = "kernel";

class Graph;

// NodeSpec::op of control nodes (weft.v1.WhileLoop, weft.v1.CaseOf).
inline constexpr absl::string_view kWhileOp = "while";
inline constexpr absl::string_view kCaseOp = "case";

// NodeSpec::op of the nodes the planner adds to fit a memory budget
// (scheduler/spill_fitting.h); clients cannot submit them. Each has one
// argument, the buffer it moves (READ_WRITE, so that it is ordered with
// every other use), runs on a COPY engine of its pinned device and is named
// "spill:<buffer>:<k>" or "fill:<buffer>:<k>". A spill copies the buffer's
// latest version to host memory, after which the device copy's memory may
// be reused; a fill makes the device copy current again, at the place the
// memory plan gives its next residency there (from the host, another
// device, or its initial contents). Neither changes the buffer's contents.
inline constexpr absl::string_view kSpillOp = "memory.spill";
inline constexpr absl::string_view kFillOp = "memory.fill";
enum class MemoryMove : uint8_t { kNone, kSpill, kFill };

// What a control node runs instead of an op. Each body is a Graph of its
// own over the enclosing graph's buffers (the same list, so buffer ids
// agree; without initial data, which only the outermost graph provides)
// and the same modules; it is planned once and its plan reused every
// iteration. Bodies may hold control nodes themselves.
struct ControlSpec {
  enum class Kind { kWhile, kCase };

  Kind kind = Kind::kWhile;
  // kWhile: the condition, element 0 read before every iteration (nonzero
  // runs the body again). kCase: the selector (INT32 or INT64).
  BufferId condition = -1;
  uint32_t max_iterations = 0;  // kWhile: > 0
  // kWhile: one body. kCase: the branches, in order.
  std::vector<std::shared_ptr<const Graph>> bodies;
  // Nesting depth of the deepest control node inside the bodies, plus one.
  int depth = 1;
};

struct NodeSpec {
  std::string name;
  std::string op;  // a built-in op, or kUserKernelOp
  // Set exactly when op == kUserKernelOp; `args` are then the kernel's
  // parameters in order.
  std::optional<KernelSpec> kernel;
  std::vector<Arg> args;
  std::vector<NodeId> after;  // explicit control predecessors
  std::string stream_label;
  Engine engine = Engine::kCompute;
  double cost_us = 0;
  // Fraction of its device the node fills while it runs, in (0, 1]
  // (weft.v1.Cost.occupancy; 1 when unset).
  double occupancy = 1.0;
  std::optional<int> device;  // pinned device
  // Set exactly for control nodes (op kWhileOp or kCaseOp). `args` then
  // hold every buffer the bodies use, with the union of their accesses,
  // plus the condition (READ); the engine is kHost (the loop is driven
  // from the host side of the executor) and cost_us is one iteration's
  // (a case..of's costliest branch).
  std::shared_ptr<const ControlSpec> control;
};

// Not copyable (graphs can be large); movable. Thread-compatible and, once
// built, only read.
class Graph {
 public:
  Graph(std::string name, std::vector<BufferSpec> buffers,
        std::vector<NodeSpec> nodes, std::vector<ModuleSpec> modules = {});
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  const std::vector<BufferSpec>& buffers() const { return buffers_; }
  const std::vector<NodeSpec>& nodes() const { return nodes_; }
  const BufferSpec& buffer(BufferId id) const { return buffers_[id]; }
  const NodeSpec& node(NodeId id) const { return nodes_[id]; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  int num_buffers() const { return static_cast<int>(buffers_.size()); }
  // Modules of user kernels (NodeSpec::kernel refers to them by index).
  const std::vector<ModuleSpec>& modules() const { return modules_; }
  const ModuleSpec& module(ModuleId id) const { return modules_[id]; }
  // Whether any node is a control node, and whether node `id` is (read
  // without touching its NodeSpec in graphs that have none).
  bool has_control() const { return has_control_; }
  bool is_control(NodeId id) const {
    return has_control_ && nodes_[id].control != nullptr;
  }
  // Whether any node is a spill or fill (kSpillOp, kFillOp), and which
  // node `id` is.
  bool has_memory_moves() const { return !moves_.empty(); }
  MemoryMove memory_move(NodeId id) const {
    return moves_.empty() ? MemoryMove::kNone
                          : static_cast<MemoryMove>(moves_[id]);
  }

  // -1 when absent.
  NodeId FindNode(absl::string_view name) const;
  BufferId FindBuffer(absl::string_view name) const;

  // Buffer uses of node `id`, in argument order.
  std::vector<BufferUse> BufferUses(NodeId id) const;

  // Compact copies of what the planner reads for every node, laid out for
  // its loops over millions of nodes (a NodeSpec is large):
  // the buffer uses of node `id` in argument order (the same as
  // BufferUses, without allocating), its `after` edges, its engine, its cost,
  // whether it has a stream label, and its op numbered by first appearance in
  // node order.
  absl::Span<const BufferUse> Uses(NodeId id) const {
    return absl::Span<const BufferUse>(uses_.data() + use_offsets_[id],
                                       use_offsets_[id + 1] - use_offsets_[id]);
  }
  // Buffer uses and `after` edges of all nodes together.
  int64_t num_uses() const { return static_cast<int64_t>(uses_.size()); }
  int64_t num_after_edges() const {
    return static_cast<int64_t>(after_.size());
  }
  absl::Span<const NodeId> After(NodeId id) const {
    return absl::Span<const NodeId>(
        after_.data() + after_offsets_[id],
        after_offsets_[id + 1] - after_offsets_[id]);
  }
  Engine engine(NodeId id) const { return engines_[id]; }
  double cost_us(NodeId id) const { return costs_[id]; }
  // Device share of node `id` in units of kOccupancyUnits (occupancy.h):
  // at least 1, kOccupancyUnits for a node that fills its device.
  int32_t occupancy_units(NodeId id) const { return occupancy_units_[id]; }
  bool has_label(NodeId id) const { return labelled_[id] != 0; }
  // The device `id` is pinned to, or -1.
  int pin(NodeId id) const { return pins_[id]; }
  int32_t op_id(NodeId id) const { return op_ids_[id]; }
  int num_ops() const { return num_ops_; }
  // Per buffer: its size, and whether it starts with data from the host
  // (BufferSpec::Init::kData).
  uint64_t buffer_bytes(BufferId id) const { return buffer_bytes_[id]; }
  bool has_initial_data(BufferId id) const { return initial_data_[id] != 0; }

 private:
  std::string name_;
  std::vector<BufferSpec> buffers_;
  std::vector<NodeSpec> nodes_;
  std::vector<ModuleSpec> modules_;
  absl::flat_hash_map<std::string, NodeId> node_index_;
  absl::flat_hash_map<std::string, BufferId> buffer_index_;
  std::vector<int32_t> use_offsets_;
  std::vector<BufferUse> uses_;
  std::vector<int32_t> after_offsets_;
  std::vector<NodeId> after_;
  std::vector<Engine> engines_;
  std::vector<double> costs_;
  std::vector<int32_t> occupancy_units_;
  std::vector<uint8_t> labelled_;
  std::vector<int32_t> pins_;
  std::vector<int32_t> op_ids_;
  int num_ops_ = 0;
  bool has_control_ = false;
  std::vector<uint8_t> moves_;  // MemoryMove by node; empty: none
  std::vector<uint64_t> buffer_bytes_;
  std::vector<uint8_t> initial_data_;
};

// Whether control node `v` of `graph` runs its bodies on its own device
// when the planner plans bodies on one device (PlannerOptions::
// bodies_on_one_device): unless one of its bodies pins a node of its own
// to a device, and then those bodies are planned over every device. False
// for a node that is not a control node.
bool BodiesRunOnItsDevice(const Graph& graph, NodeId v);

}  // namespace weft::scheduler

#endif  // WEFT_SCHEDULER_GRAPH_H_
