// libFuzzer entry point: the input is a binary weft.v1.Graph. Every graph
// must be rejected with INVALID_ARGUMENT naming a field, or plan into a
// well-formed plan whose wire form round-trips. Build with
//   bazel build --config=clang --copt=-fsanitize=fuzzer,address \
//     --linkopt=-fsanitize=fuzzer,address //scheduler:graph_fuzzer
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "scheduler/graph_builder.h"
#include "scheduler/plan_proto.h"
#include "scheduler/planner.h"
#include "weft/v1/weft.pb.h"

namespace weft::scheduler {
namespace {

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "graph_fuzzer: violated: %s\n", what);
    std::abort();
  }
}

void CheckRejection(const absl::Status& status, const char* prefix) {
  Require(status.code() == absl::StatusCode::kInvalidArgument,
          "rejection is INVALID_ARGUMENT");
  Require(absl::StartsWith(status.message(), prefix) ||
              absl::StrContains(status.message(), "limit"),
          "rejection names its field");
}

void FuzzOne(const uint8_t* data, size_t size) {
  weft::v1::Graph proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return;
  GraphLimits limits;
  limits.num_devices = 1 + static_cast<int>(size % 4);
  limits.max_nodes = 256;
  limits.max_buffers = 256;
  limits.max_buffer_bytes = uint64_t{1} << 24;
  limits.max_total_bytes = uint64_t{1} << 26;
  limits.max_args_per_node = 64;
  absl::StatusOr<Graph> graph = BuildGraph(proto, limits);
  if (!graph.ok()) {
    CheckRejection(graph.status(), "graph.");
    return;
  }
  // Options drawn from the input's last bytes, out-of-range values included.
  const uint8_t a = size > 0 ? data[size - 1] : 0;
  const uint8_t b = size > 1 ? data[size - 2] : 0;
  weft::v1::ScheduleOptions options_proto;
  options_proto.set_device_policy(static_cast<weft::v1::DevicePolicy>(a % 8));
  options_proto.set_stream_mode(
      static_cast<weft::v1::StreamMode>((a >> 3) % 3));
  options_proto.set_max_streams_per_device(static_cast<int>(b % 6) - 1);
  options_proto.set_max_nodes_per_stream((b >> 3) % 8);
  options_proto.set_restrict_to_parent_devices((a >> 5) & 1);
  absl::StatusOr<PlannerOptions> options =
      PlannerOptionsFromProto(options_proto, limits.num_devices, 4);
  if (!options.ok()) {
    CheckRejection(options.status(), "options.");
    return;
  }
  options->explain = (a >> 6) & 1;
  absl::StatusOr<Plan> plan = PlanGraph(*graph, *options);
  if (!plan.ok()) {
    Require(plan.status().code() == absl::StatusCode::kInvalidArgument,
            "plan rejection is INVALID_ARGUMENT");
    return;
  }
  Require(plan->nodes.size() == static_cast<size_t>(graph->num_nodes()),
          "every node planned");
  std::vector<int> seen(graph->num_nodes(), 0);
  for (const PlannedNode& pn : plan->nodes) {
    Require(pn.node >= 0 && pn.node < graph->num_nodes(), "node id in range");
    Require(++seen[pn.node] == 1, "node planned once");
    Require(
        pn.stream >= 0 && pn.stream < static_cast<int>(plan->streams.size()),
        "stream id in range");
    Require(pn.device >= 0 && pn.device < limits.num_devices,
            "device in range");
  }
  const weft::v1::Plan wire = PlanToProto(*graph, *plan);
  weft::v1::Plan reparsed;
  Require(reparsed.ParseFromString(wire.SerializeAsString()),
          "plan round-trips");
  Require(reparsed.nodes_size() == graph->num_nodes(), "round-trip size");
}

}  // namespace
}  // namespace weft::scheduler

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::scheduler::FuzzOne(data, size);
  return 0;
}
