// libFuzzer entry point: the input is a binary weft.v1.Graph. Every graph
// must be rejected with INVALID_ARGUMENT naming a field, or plan into a
// well-formed plan whose wire form round-trips. Options, memory budgets
// and device memory sizes come from the input's last bytes; planned
// either as `weftctl plan` does or as weftd plans a job (memory planned,
// spills and fills where a budget is short). A budget may also refuse the
// graph (RESOURCE_EXHAUSTED); a plan that fits one must pass VerifyPlan,
// keep each device's arena within its budget and never place two buffer
// copies that may be live together over each other. Build with
//   bazel build -c opt --config=clang \
//     --copt=-fsanitize=fuzzer,address,undefined \
//     --linkopt=-fsanitize=fuzzer,address,undefined \
//     --linkopt=-fsanitize-link-c++-runtime \
//     --custom_malloc=@bazel_tools//tools/cpp:malloc //scheduler:graph_fuzzer
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "scheduler/graph_builder.h"
#include "scheduler/memory/lifetimes.h"
#include "scheduler/plan_proto.h"
#include "scheduler/plan_verifier.h"
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

// Every planned buffer copy lies in its device's arena, the arena within
// the device's budget, and copies placed over each other are ordered.
void CheckMemory(const Graph& graph, const Plan& plan) {
  if (plan.buffers.empty()) return;
  for (const DeviceMemory& m : plan.memory) {
    Require(m.arena_bytes >= m.lower_bound_bytes, "arena above its bound");
    Require(m.budget_bytes <= 0 || m.arena_bytes <= m.budget_bytes,
            "arena within the budget");
  }
  absl::StatusOr<memory::Lifetimes> lt =
      memory::Lifetimes::Compute(graph, plan);
  Require(lt.ok(), "lifetimes of a plan");
  Require(plan.buffers.size() == static_cast<size_t>(lt->num_copies()),
          "a planned buffer per copy");
  for (int x = 0; x < lt->num_copies(); ++x) {
    const PlannedBuffer& bx = plan.buffers[x];
    Require(bx.offset >= 0 && bx.size_bytes >= 0, "offset and size");
    int64_t arena = -1;
    for (const DeviceMemory& m : plan.memory) {
      if (m.device == bx.device) arena = m.arena_bytes;
    }
    Require(bx.offset + bx.size_bytes <= arena, "copy within its arena");
    for (int y = x + 1; y < lt->num_copies(); ++y) {
      const PlannedBuffer& by = plan.buffers[y];
      if (by.device != bx.device || bx.size_bytes == 0 || by.size_bytes == 0 ||
          bx.offset >= by.offset + by.size_bytes ||
          by.offset >= bx.offset + bx.size_bytes) {
        continue;
      }
      Require(!lt->MayBeLiveTogether(x, y), "overlapping copies ordered");
    }
  }
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
  // Memory: an order (out-of-range values included) and a budget from a
  // few hundred bytes to a few GiB, or none.
  const uint8_t c = size > 2 ? data[size - 3] : 0;
  const uint8_t d = size > 3 ? data[size - 4] : 0;
  options_proto.set_memory_order(static_cast<weft::v1::MemoryOrder>(c % 4));
  if ((d & 3) != 0) {
    options_proto.set_memory_budget_bytes(int64_t{1 + (d >> 2)}
                                          << (8 + (c >> 2) % 24));
  }
  absl::StatusOr<PlannerOptions> options =
      PlannerOptionsFromProto(options_proto, limits.num_devices, 4);
  if (!options.ok()) {
    CheckRejection(options.status(), "options.");
    return;
  }
  options->explain = (a >> 6) & 1;
  if ((b >> 6) & 1) {  // as weftd plans a job
    options->simulate = false;
    options->plan_memory = true;
    options->plan_memory_over_budget = true;
  }
  if ((c >> 6) & 1) {  // devices' memory, which clamps the budget
    options->device_memory_bytes.assign(limits.num_devices,
                                        int64_t{1} << (12 + d % 20));
  }
  absl::StatusOr<Plan> plan = PlanGraph(*graph, *options);
  if (!plan.ok()) {
    Require(plan.status().code() == absl::StatusCode::kInvalidArgument ||
                plan.status().code() == absl::StatusCode::kResourceExhausted,
            "plan rejection is INVALID_ARGUMENT or RESOURCE_EXHAUSTED");
    return;
  }
  const Graph& planned = plan->graph != nullptr ? *plan->graph : *graph;
  const absl::Status verified = VerifyPlan(planned, *plan);
  if (!verified.ok()) {
    std::fprintf(stderr, "%s\n", verified.ToString().c_str());
    Require(false, "plan verifies");
  }
  CheckMemory(planned, *plan);
  // Spills and fills, where a budget asked for them, are nodes of the
  // planned graph; every submitted node is planned too.
  Require(planned.num_nodes() >= graph->num_nodes(), "no node dropped");
  Require(plan->nodes.size() == static_cast<size_t>(planned.num_nodes()),
          "every node planned");
  std::vector<int> seen(planned.num_nodes(), 0);
  for (const PlannedNode& pn : plan->nodes) {
    Require(pn.node >= 0 && pn.node < planned.num_nodes(), "node id in range");
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
  Require(reparsed.nodes_size() == planned.num_nodes(), "round-trip size");
}

}  // namespace
}  // namespace weft::scheduler

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::scheduler::FuzzOne(data, size);
  return 0;
}
