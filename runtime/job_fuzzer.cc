// libFuzzer entry point that runs what it plans: the input is a binary
// weft.v1.Graph, built and planned as weftd plans a job (memory planned;
// options from the input's last bytes, and for half the inputs a budget
// below the plan's largest arena, so that spills and fills fit it), then
// executed on simulated GPUs. Every graph must be refused cleanly or run
// to an end within a minute (no crash, no hang, nothing left held); a
// graph of built-in ops without control nodes that the host runs must run
// here too and give, byte for byte, the host's outputs. Build with
//   bazel build -c opt --config=clang \
//     --copt=-fsanitize=fuzzer,address,undefined \
//     --linkopt=-fsanitize=fuzzer,address,undefined \
//     --linkopt=-fsanitize-link-c++-runtime \
//     --custom_malloc=@bazel_tools//tools/cpp:malloc //runtime:job_fuzzer
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/plan_check.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/graph_builder.h"
#include "scheduler/memory/memory_plan.h"
#include "scheduler/plan_proto.h"
#include "scheduler/planner.h"
#include "weft/v1/weft.pb.h"

namespace weft::runtime {
namespace {

constexpr int kMaxDevices = 3;
constexpr uint64_t kDeviceMemory = uint64_t{8} << 20;

// What the inputs reached, printed when the fuzzer exits.
struct Counts {
  int64_t built = 0, planned = 0, spilled = 0, ran = 0, succeeded = 0;
  ~Counts() {
    std::fprintf(stderr,
                 "job_fuzzer: %lld graphs built, %lld planned (%lld with "
                 "spills), %lld run, %lld of them run by the host too and "
                 "compared\n",
                 static_cast<long long>(built), static_cast<long long>(planned),
                 static_cast<long long>(spilled), static_cast<long long>(ran),
                 static_cast<long long>(succeeded));
  }
};
Counts counts;

void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "job_fuzzer: violated: %s\n", what);
    std::abort();
  }
}

// One simulated machine per device count, kept across inputs as weftd
// keeps its executor.
struct Machine {
  std::unique_ptr<SimBackend> sim;
  std::unique_ptr<Executor> executor;
};

Machine& MachineFor(int devices) {
  static Machine* machines = new Machine[kMaxDevices];
  Machine& m = machines[devices - 1];
  if (m.executor == nullptr) {
    SimBackend::Options sim;
    sim.num_devices = devices;
    sim.memory_bytes = kDeviceMemory;
    sim.time_scale = 0;
    m.sim = SimBackend::Create(sim).value();
    Executor::Options options;
    options.backend = m.sim.get();
    m.executor = Executor::Create(options).value();
  }
  return m;
}

// Blocks the machine's pools handed out other than arenas, so far.
uint64_t AllocationsOutsideArenas(Machine& machine) {
  uint64_t n = 0;
  for (const DeviceLoad& load : machine.executor->Load()) {
    n += load.memory.backend_allocations + load.memory.cache_hits -
         load.memory.arena_allocations;
  }
  return n;
}

void FuzzOne(const uint8_t* data, size_t size) {
  weft::v1::Graph proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return;
  scheduler::GraphLimits limits;
  limits.num_devices = 1 + static_cast<int>(size % kMaxDevices);
  limits.max_nodes = 64;
  limits.max_buffers = 64;
  limits.max_buffer_bytes = uint64_t{1} << 16;
  limits.max_total_bytes = uint64_t{1} << 20;
  limits.max_args_per_node = 16;
  absl::StatusOr<scheduler::Graph> built = scheduler::BuildGraph(proto, limits);
  if (!built.ok()) return;
  ++counts.built;
  auto graph = std::make_shared<const scheduler::Graph>(*std::move(built));

  const uint8_t a = size > 0 ? data[size - 1] : 0;
  const uint8_t b = size > 1 ? data[size - 2] : 0;
  const uint8_t c = size > 2 ? data[size - 3] : 0;
  weft::v1::ScheduleOptions options_proto;
  options_proto.set_device_policy(static_cast<weft::v1::DevicePolicy>(a % 6));
  options_proto.set_stream_mode(
      static_cast<weft::v1::StreamMode>((a >> 3) % 3));
  options_proto.set_max_streams_per_device(1 + b % 5);
  options_proto.set_memory_order(static_cast<weft::v1::MemoryOrder>(c % 3));
  absl::StatusOr<scheduler::PlannerOptions> options =
      scheduler::PlannerOptionsFromProto(options_proto, limits.num_devices, 8);
  if (!options.ok()) return;
  options->simulate = false;
  options->explain = false;
  options->plan_memory = true;
  options->plan_memory_over_budget = true;
  options->device_memory_bytes.assign(limits.num_devices,
                                      static_cast<int64_t>(kDeviceMemory));
  absl::StatusOr<scheduler::Plan> plan = scheduler::PlanGraph(*graph, *options);
  if (plan.ok() && ((c >> 2) & 1)) {
    // Again under a budget of 35% to 95% of the largest arena, but room for
    // the largest node and a tenth more (the offsets fragment): most such
    // plans spill and fill.
    const int64_t budget =
        std::max(plan->LargestArenaBytes() * (35 + (c >> 3) % 13 * 5) / 100,
                 static_cast<int64_t>(
                     scheduler::memory::LargestNodeArgumentBytes(*graph)) *
                     11 / 10);
    options->memory_budget_bytes.assign(limits.num_devices, budget);
    plan = scheduler::PlanGraph(*graph, *options);
  }
  if (!plan.ok()) {
    Require(plan.status().code() == absl::StatusCode::kInvalidArgument ||
                plan.status().code() == absl::StatusCode::kResourceExhausted,
            "plan refused with INVALID_ARGUMENT or RESOURCE_EXHAUSTED");
    return;
  }
  ++counts.planned;
  if (plan->graph != nullptr) ++counts.spilled;
  std::shared_ptr<const scheduler::Graph> planned =
      plan->graph != nullptr ? plan->graph : graph;
  // Every copy a memory-planned job uses lies in its arenas, bodies' copies
  // on other devices included, unless the job's reservation counts copies
  // allocated by themselves (BodyBytesBeyondPlan).
  const std::vector<uint64_t> beyond = scheduler::memory::BodyBytesBeyondPlan(
      *planned, *plan, limits.num_devices);
  const bool all_placed =
      !plan->memory.empty() && !plan->buffers.empty() &&
      std::all_of(beyond.begin(), beyond.end(),
                  [](uint64_t bytes) { return bytes == 0; });
  absl::StatusOr<CheckedPlan> checked = CheckPlan(
      planned, std::make_shared<const scheduler::Plan>(*std::move(plan)),
      limits.num_devices);
  Require(checked.ok(), "the executor takes weftd's plan");

  Machine& machine = MachineFor(limits.num_devices);
  const uint64_t allocations_before = AllocationsOutsideArenas(machine);
  absl::Notification done;
  absl::Status status;
  HostBuffers outputs;
  JobCallbacks callbacks;
  callbacks.on_done = [&](absl::Status s, scheduler::NodeId, HostBuffers out) {
    status = std::move(s);
    outputs = std::move(out);
    done.Notify();
  };
  Require(machine.executor
              ->Start(*std::move(checked), std::move(callbacks), JobOptions{})
              .ok(),
          "the job starts");
  Require(done.WaitForNotificationWithTimeout(absl::Seconds(60)),
          "the job ends within a minute");
  ++counts.ran;
  for (const DeviceLoad& load : machine.executor->Load()) {
    Require(load.streams_busy == 0, "no stream held after the job");
    Require(load.memory.in_use_bytes == 0, "no memory held after the job");
  }
  if (status.ok()) {
    for (const scheduler::BufferSpec& spec : graph->buffers()) {
      if (spec.output) Require(outputs.contains(spec.name), "every output");
    }
    if (all_placed) {
      Require(AllocationsOutsideArenas(machine) == allocations_before,
              "a memory-planned job allocates nothing outside its arenas");
    }
  }
  // Control nodes and user kernels the host does not run: no reference.
  if (graph->has_control()) return;
  const absl::StatusOr<executor_testing::OutputBytes> reference =
      executor_testing::RunOnHost(*graph);
  if (!reference.ok()) return;  // a node's own error may fail the job
  Require(status.ok(), "a graph the host runs runs here too");
  ++counts.succeeded;
  for (const auto& [name, bytes] : *reference) {
    Require(outputs.at(name).ToString() == bytes, "outputs equal the host's");
  }
}

}  // namespace
}  // namespace weft::runtime

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::runtime::FuzzOne(data, size);
  return 0;
}
