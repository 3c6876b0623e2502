#include "scheduler/passes/assign_by_label_pass.h"

#include <tuple>

#include "absl/container/flat_hash_map.h"

namespace weft::scheduler {

absl::Status AssignByLabelPass::Run(StreamContext& context) const {
  absl::flat_hash_map<std::tuple<absl::string_view, int, int>, int> streams;
  for (NodeId v : context.dag.order) {
    if (!context.graph.has_label(v) || context.stream_of[v] >= 0) continue;
    const NodeSpec& node = context.graph.node(v);
    const int device = context.device[v];
    auto key = std::make_tuple(absl::string_view(node.stream_label), device,
                               static_cast<int>(node.engine));
    auto it = streams.find(key);
    if (it == streams.end()) {
      it = streams
               .emplace(key, context.NewStream(device, node.engine,
                                               LogicalStream::Kind::kLabel,
                                               node.stream_label))
               .first;
    }
    context.stream_of[v] = it->second;
    context.SetChoice(v, {StreamChoice::Why::kLabel, -1});
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
