#include "scheduler/test_util.h"

#include <cstdlib>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_split.h"

namespace weft::scheduler::testing {

GraphMaker& GraphMaker::Buffer(std::string name, uint64_t size_bytes,
                               DType dtype) {
  BufferSpec spec;
  spec.name = std::move(name);
  spec.size_bytes = size_bytes;
  spec.dtype = dtype;
  buffers_.push_back(std::move(spec));
  return *this;
}

GraphMaker& GraphMaker::Node(std::string name, absl::string_view uses,
                             NodeOptions options) {
  nodes_.push_back({std::move(name), std::string(uses), std::move(options)});
  return *this;
}

Graph GraphMaker::Build() const {
  std::vector<BufferSpec> buffers = buffers_;
  // By name (the first of a name, as a search from the front finds it).
  absl::flat_hash_map<std::string, BufferId> buffer_ids;
  for (size_t i = 0; i < buffers.size(); ++i) {
    buffer_ids.emplace(buffers[i].name, static_cast<BufferId>(i));
  }
  absl::flat_hash_map<std::string, NodeId> node_ids;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    node_ids.emplace(nodes_[i].name, static_cast<NodeId>(i));
  }
  auto buffer_id = [&](absl::string_view name) {
    auto it = buffer_ids.find(name);
    if (it == buffer_ids.end()) std::abort();  // a typo in a test
    return it->second;
  };
  auto node_id = [&](absl::string_view name) {
    auto it = node_ids.find(name);
    if (it == node_ids.end()) std::abort();
    return it->second;
  };
  std::vector<NodeSpec> nodes;
  for (const PendingNode& p : nodes_) {
    NodeSpec spec;
    spec.name = p.name;
    spec.op = p.options.op;
    for (absl::string_view use :
         absl::StrSplit(p.uses, ' ', absl::SkipEmpty())) {
      std::pair<std::string, std::string> parts = absl::StrSplit(use, ':');
      BufferUse u;
      u.buffer = buffer_id(parts.first);
      if (parts.second == "r") {
        u.access = Access::kRead;
      } else if (parts.second == "w") {
        u.access = Access::kWrite;
      } else if (parts.second == "rw") {
        u.access = Access::kReadWrite;
      } else {
        std::abort();
      }
      spec.args.push_back(u);
    }
    for (const std::string& a : p.options.after) {
      spec.after.push_back(node_id(a));
    }
    spec.stream_label = p.options.label;
    spec.engine = p.options.engine;
    spec.cost_us = p.options.cost;
    spec.occupancy = p.options.occupancy;
    spec.device = p.options.device;
    nodes.push_back(std::move(spec));
  }
  return Graph("test", std::move(buffers), std::move(nodes));
}

std::vector<std::string> Names(const Graph& graph,
                               absl::Span<const NodeId> ids) {
  std::vector<std::string> names;
  for (NodeId v : ids) names.push_back(graph.node(v).name);
  return names;
}

std::vector<std::string> DepNames(const Graph& graph, const Dag& dag,
                                  absl::string_view name) {
  return Names(graph, dag.Preds(graph.FindNode(name)));
}

BufferSpec Buffer(const std::string& name, double mb, bool host_data,
                  bool output) {
  BufferSpec b;
  b.name = name;
  b.size_bytes = static_cast<uint64_t>(mb * 1e6);
  if (host_data) {
    b.init = BufferSpec::Init::kData;
    b.data = "x";
  }
  b.output = output;
  return b;
}

NodeSpec Kernel(const std::string& name, double cost,
                const std::vector<BufferUse>& args) {
  NodeSpec n;
  n.name = name;
  n.op = "spin";
  n.cost_us = cost;
  for (const BufferUse& use : args) n.args.push_back(use);
  return n;
}

}  // namespace weft::scheduler::testing
