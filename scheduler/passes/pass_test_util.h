// Runs stream passes on small graphs written with testing::GraphMaker.
//
//   PassFixture f(m.Build(), {.max_streams_per_device = 2});
//   f.SetStreams({{"a", 0}, {"b", 1}});  // or run earlier passes
//   ASSERT_TRUE(f.Run(InsertEventsPass()).ok());
//   EXPECT_EQ(f.stream("b"), 1);
//
// Each node's device is its pin (0 when unpinned).
#ifndef WEFT_SCHEDULER_PASSES_PASS_TEST_UTIL_H_
#define WEFT_SCHEDULER_PASSES_PASS_TEST_UTIL_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/cost_model.h"
#include "scheduler/dependency_inference.h"
#include "scheduler/graph.h"
#include "scheduler/passes/stream_context.h"
#include "scheduler/passes/stream_pass.h"

namespace weft::scheduler::testing {

// Not copyable or movable: the context refers to its members.
class PassFixture {
 public:
  explicit PassFixture(Graph graph, StreamOptions options = {});
  PassFixture(const PassFixture&) = delete;
  PassFixture& operator=(const PassFixture&) = delete;

  absl::Status Run(const StreamPass& pass) { return pass.Run(*context_); }

  // Puts the named nodes on the given logical streams, creating dependency
  // (kShared) streams on the nodes' devices as needed, ids in order.
  void SetStreams(const std::vector<std::pair<std::string, int>>& streams);

  // Marks the named nodes as copies between devices reading from the
  // given devices (StreamContext::peer_device).
  void SetPeerDevices(const std::vector<std::pair<std::string, int>>& peers);
  // Gives the named nodes these peer streams, which must exist.
  void SetPeerStreams(const std::vector<std::pair<std::string, int>>& peers);

  StreamContext& context() { return *context_; }
  const Graph& graph() const { return graph_; }
  const Dag& dag() const { return dag_; }
  NodeId id(const std::string& name) const;
  int stream(const std::string& name) const;
  // The node's peer stream, -1 if none.
  int peer(const std::string& name) const;
  StreamChoice choice(const std::string& name) const;
  // Event ids the node waits on, and the event it signals (-1: none).
  std::vector<int> waits(const std::string& name) const;
  int signal(const std::string& name) const;
  // Streams some node uses.
  int streams_used() const;

 private:
  Graph graph_;
  Dag dag_;
  CostLevels levels_;
  StreamOptions options_;
  std::unique_ptr<StreamContext> context_;
};

}  // namespace weft::scheduler::testing

#endif  // WEFT_SCHEDULER_PASSES_PASS_TEST_UTIL_H_
