#include "scheduler/graph.h"

#include <utility>
#include <variant>

namespace weft::scheduler {

int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBytes:
      return 1;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
  }
  return 1;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBytes:
      return "BYTES";
    case DType::kFloat32:
      return "FLOAT32";
    case DType::kFloat64:
      return "FLOAT64";
    case DType::kInt32:
      return "INT32";
    case DType::kInt64:
      return "INT64";
  }
  return "UNKNOWN";
}

absl::string_view AccessName(Access access) {
  switch (access) {
    case Access::kRead:
      return "READ";
    case Access::kWrite:
      return "WRITE";
    case Access::kReadWrite:
      return "READ_WRITE";
  }
  return "UNKNOWN";
}

absl::string_view EngineName(Engine engine) {
  switch (engine) {
    case Engine::kCompute:
      return "COMPUTE";
    case Engine::kCopy:
      return "COPY";
    case Engine::kCollective:
      return "COLLECTIVE";
    case Engine::kHost:
      return "HOST";
  }
  return "UNKNOWN";
}

Graph::Graph(std::string name, std::vector<BufferSpec> buffers,
             std::vector<NodeSpec> nodes, std::vector<ModuleSpec> modules)
    : name_(std::move(name)),
      buffers_(std::move(buffers)),
      nodes_(std::move(nodes)),
      modules_(std::move(modules)) {
  node_index_.reserve(nodes_.size());
  for (NodeId i = 0; i < static_cast<NodeId>(nodes_.size()); ++i) {
    // First occurrence wins; GraphBuilder rejects duplicates anyway.
    node_index_.emplace(nodes_[i].name, i);
  }
  buffer_index_.reserve(buffers_.size());
  buffer_bytes_.reserve(buffers_.size());
  initial_data_.reserve(buffers_.size());
  for (BufferId i = 0; i < static_cast<BufferId>(buffers_.size()); ++i) {
    buffer_index_.emplace(buffers_[i].name, i);
    buffer_bytes_.push_back(buffers_[i].size_bytes);
    initial_data_.push_back(buffers_[i].init == BufferSpec::Init::kData);
  }
  const size_t n = nodes_.size();
  use_offsets_.reserve(n + 1);
  use_offsets_.push_back(0);
  after_offsets_.reserve(n + 1);
  after_offsets_.push_back(0);
  engines_.reserve(n);
  costs_.reserve(n);
  occupancy_units_.reserve(n);
  labelled_.reserve(n);
  pins_.reserve(n);
  op_ids_.reserve(n);
  absl::flat_hash_map<absl::string_view, int32_t> ops;
  absl::string_view last_op;
  int32_t last_id = -1;
  for (const NodeSpec& node : nodes_) {
    for (const Arg& arg : node.args) {
      if (const auto* use = std::get_if<BufferUse>(&arg)) uses_.push_back(*use);
    }
    use_offsets_.push_back(static_cast<int32_t>(uses_.size()));
    after_.insert(after_.end(), node.after.begin(), node.after.end());
    after_offsets_.push_back(static_cast<int32_t>(after_.size()));
    engines_.push_back(node.engine);
    costs_.push_back(node.cost_us);
    occupancy_units_.push_back(OccupancyUnits(node.occupancy));
    labelled_.push_back(node.stream_label.empty() ? 0 : 1);
    pins_.push_back(node.device.has_value() ? *node.device : -1);
    if (node.control != nullptr) has_control_ = true;
    if (node.op == kSpillOp || node.op == kFillOp) {
      moves_.resize(n, 0);
      moves_[op_ids_.size()] = static_cast<uint8_t>(
          node.op == kSpillOp ? MemoryMove::kSpill : MemoryMove::kFill);
    }
    // Neighbouring nodes often share an op: compare before hashing.
    if (last_id < 0 || node.op != last_op) {
      last_id =
          ops.emplace(node.op, static_cast<int32_t>(ops.size())).first->second;
      last_op = node.op;
    }
    op_ids_.push_back(last_id);
  }
  num_ops_ = static_cast<int>(ops.size());
}

NodeId Graph::FindNode(absl::string_view name) const {
  auto it = node_index_.find(name);
  return it == node_index_.end() ? -1 : it->second;
}

BufferId Graph::FindBuffer(absl::string_view name) const {
  auto it = buffer_index_.find(name);
  return it == buffer_index_.end() ? -1 : it->second;
}

std::vector<BufferUse> Graph::BufferUses(NodeId id) const {
  absl::Span<const BufferUse> uses = Uses(id);
  return std::vector<BufferUse>(uses.begin(), uses.end());
}

bool BodiesRunOnItsDevice(const Graph& graph, NodeId v) {
  if (!graph.is_control(v)) return false;
  for (const std::shared_ptr<const Graph>& body :
       graph.node(v).control->bodies) {
    for (NodeId u = 0; u < body->num_nodes(); ++u) {
      if (body->pin(u) >= 0) return false;
    }
  }
  return true;
}

}  // namespace weft::scheduler
