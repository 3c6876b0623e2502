#include "scheduler/passes/pass_test_util.h"

#include <cstdlib>
#include <set>

namespace weft::scheduler::testing {

PassFixture::PassFixture(Graph graph, StreamOptions options)
    : graph_(std::move(graph)), options_(options) {
  absl::StatusOr<Dag> dag = InferDependencies(graph_);
  if (!dag.ok()) std::abort();  // a broken test graph
  dag_ = std::move(dag).value();
  levels_ = ComputeCostLevels(graph_, dag_);
  std::vector<int> device(graph_.num_nodes(), 0);
  for (NodeId v = 0; v < graph_.num_nodes(); ++v) {
    device[v] = graph_.node(v).device.value_or(0);
  }
  context_ = std::make_unique<StreamContext>(graph_, dag_, levels_,
                                             std::move(device), options_);
}

void PassFixture::SetStreams(
    const std::vector<std::pair<std::string, int>>& streams) {
  for (const auto& [name, s] : streams) {
    const NodeId v = id(name);
    while (static_cast<int>(context_->streams.size()) <= s) {
      context_->NewStream(context_->device[v], graph_.node(v).engine,
                          LogicalStream::Kind::kShared);
    }
    context_->stream_of[v] = s;
  }
}

void PassFixture::SetPeerDevices(
    const std::vector<std::pair<std::string, int>>& peers) {
  context_->peer_device.assign(graph_.num_nodes(), -1);
  for (const auto& [name, d] : peers) context_->peer_device[id(name)] = d;
}

void PassFixture::SetPeerStreams(
    const std::vector<std::pair<std::string, int>>& peers) {
  if (context_->peer_device.empty()) {
    context_->peer_device.assign(graph_.num_nodes(), -1);
  }
  context_->peer_stream.assign(graph_.num_nodes(), -1);
  for (const auto& [name, s] : peers) {
    const NodeId v = id(name);
    context_->peer_stream[v] = s;
    context_->peer_device[v] = context_->streams[s].device;
  }
}

int PassFixture::peer(const std::string& name) const {
  return context_->peer_of(id(name));
}

NodeId PassFixture::id(const std::string& name) const {
  const NodeId v = graph_.FindNode(name);
  if (v < 0) std::abort();  // a typo in a test
  return v;
}

int PassFixture::stream(const std::string& name) const {
  return context_->stream_of[id(name)];
}

StreamChoice PassFixture::choice(const std::string& name) const {
  return context_->choice[id(name)];
}

std::vector<int> PassFixture::waits(const std::string& name) const {
  auto row = context_->waits.Row(dag_.pos(id(name)));
  return std::vector<int>(row.begin(), row.end());
}

int PassFixture::signal(const std::string& name) const {
  return context_->signal[id(name)];
}

int PassFixture::streams_used() const {
  std::set<int> used(context_->stream_of.begin(), context_->stream_of.end());
  used.erase(-1);
  return static_cast<int>(used.size());
}

}  // namespace weft::scheduler::testing
