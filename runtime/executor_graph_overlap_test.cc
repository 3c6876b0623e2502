// Jobs issued as device graphs keep the overlap their plans count on: on an
// unpaced simulated machine matching the planner's model, a job run as
// device graphs ends when the plan's estimate says, as it does node by
// node. A graph does not wait for uploads its first nodes do not need, an
// output downloads once its writer's stream is done rather than once the
// whole graph is, a device's later graph waits only for what it reads from
// its earlier ones, and eager copies cross as soon as their bytes are
// written.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/sim_machine_test_util.h"
#include "scheduler/planner.h"

namespace weft::runtime {
namespace {

using executor_testing::Outcome;
using scheduler::Access;
using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::DType;

// 25 MB: 1,000 us over the default 25 GB/s host link.
constexpr uint64_t kHostMs = 25'000'000;
// 300 MB: 1,000 us over the default 300 GB/s link between devices.
constexpr uint64_t kPeerMs = 300'000'000;

// A fresh unpaced simulated machine matching the planner's default model
// (clocks from 0) per run.
double RunAndTime(std::shared_ptr<const scheduler::Graph> graph,
                  std::shared_ptr<const scheduler::Plan> plan, int num_devices,
                  LaunchMode mode) {
  executor_testing::SimMachine machine(num_devices);
  Outcome outcome;
  machine.Run(std::move(graph), std::move(plan), outcome, JobOptions{mode});
  double last = 0;
  for (const TraceSpan& span : outcome.trace.spans) {
    last = std::max(last, span.end_us);
  }
  return last;
}

BufferSpec Buffer(std::string name, uint64_t bytes, bool output = false,
                  bool data = false) {
  BufferSpec b;
  b.name = std::move(name);
  b.size_bytes = bytes;
  b.dtype = DType::kFloat32;
  b.output = output;
  if (data) {
    b.init = BufferSpec::Init::kData;
    b.data = "x";
  }
  return b;
}

scheduler::NodeSpec Spin(std::string name, std::vector<scheduler::Arg> args,
                         double cost_us, int device) {
  scheduler::NodeSpec n;
  n.name = std::move(name);
  n.op = "spin";
  n.args = std::move(args);
  n.cost_us = cost_us;
  n.occupancy = 0.25;  // side by side with the others
  n.device = device;
  return n;
}

BufferUse Read(int b) { return BufferUse{b, Access::kRead}; }
BufferUse Write(int b) { return BufferUse{b, Access::kWrite}; }

// Plans `graph` on `num_devices` and runs it node by node and as device
// graphs: both end at the estimate, which is `expected_us`.
void ExpectBothEndAsPlanned(std::shared_ptr<const scheduler::Graph> shared,
                            int num_devices, double expected_us) {
  scheduler::PlannerOptions options;
  options.num_devices = num_devices;
  absl::StatusOr<scheduler::Plan> planned =
      scheduler::PlanGraph(*shared, options);
  ASSERT_TRUE(planned.ok()) << planned.status();
  auto plan = std::make_shared<const scheduler::Plan>(*std::move(planned));
  EXPECT_NEAR(plan->estimated_makespan_us, expected_us, 1e-3);
  EXPECT_NEAR(RunAndTime(shared, plan, num_devices, LaunchMode::kStreams),
              plan->estimated_makespan_us, 1e-3);
  EXPECT_NEAR(RunAndTime(shared, plan, num_devices, LaunchMode::kDeviceGraphs),
              plan->estimated_makespan_us, 1e-3);
}

// Kernels of a quarter of a device each, so they run side by side.
//
// `k` needs no upload and runs 2,000 us from the start; `r` waits for its
// 1,000 us upload. A graph that waited for every upload would end at
// 3,000 us.
TEST(ExecutorGraphOverlapTest, NodesNeedingNoUploadStartAtOnce) {
  auto graph = std::make_shared<const scheduler::Graph>(
      scheduler::Graph("uploads",
                       {Buffer("x", kHostMs, false, /*data=*/true),
                        Buffer("y", 64), Buffer("z", 64)},
                       {Spin("k", {Write(1)}, 2000, 0),
                        Spin("r", {Read(0), Write(2)}, 100, 0)}));
  ExpectBothEndAsPlanned(graph, 1, 2000);
}

// Sixteen independent kernels of a sixteenth of a device each all run at
// once, in a graph as on streams: more side by side than a graph would
// run on eight lanes (which would end at 2,000 us).
TEST(ExecutorGraphOverlapTest, AGraphRunsAsManyKernelsAtOnceAsTheDevice) {
  std::vector<BufferSpec> buffers;
  std::vector<scheduler::NodeSpec> nodes;
  for (int i = 0; i < 16; ++i) {
    buffers.push_back(Buffer(absl::StrCat("b", i), 64));
    scheduler::NodeSpec n =
        Spin(absl::StrCat("k", i), {Write(i)}, 1000, /*device=*/0);
    n.occupancy = 1.0 / 16;
    nodes.push_back(std::move(n));
  }
  auto graph = std::make_shared<const scheduler::Graph>(
      scheduler::Graph("wide", std::move(buffers), std::move(nodes)));
  ExpectBothEndAsPlanned(graph, 1, 1000);
}

// `w` writes the output o in 100 us; `k` runs 2,000 us beside it. o's
// 1,000 us download runs under k; after the whole graph it would end at
// 3,000 us.
TEST(ExecutorGraphOverlapTest, OutputsDownloadOnceTheirWriterIsDone) {
  auto graph = std::make_shared<const scheduler::Graph>(scheduler::Graph(
      "downloads", {Buffer("o", kHostMs, /*output=*/true), Buffer("y", 64)},
      {Spin("w", {Write(0)}, 100, 0), Spin("k", {Write(1)}, 2000, 0)}));
  ExpectBothEndAsPlanned(graph, 1, 2000);
}

// Device 0 runs `a` (100 us) and `c` (3,000 us) side by side in its first
// graph; device 1's `b` reads a's output; device 0's `d` (then `e`, 2,000
// us) reads b's, in a later graph. That graph waits for `b` alone, not for
// `c`: the job ends with c at 3,000 us; on one stream per device e would
// end at about 5,100 us.
TEST(ExecutorGraphOverlapTest, LaterGraphsWaitOnlyForWhatTheyRead) {
  auto graph = std::make_shared<const scheduler::Graph>(scheduler::Graph(
      "segments",
      {Buffer("p", 64), Buffer("q", 64), Buffer("s", 64), Buffer("t", 64),
       Buffer("u", 64)},
      {Spin("a", {Write(0)}, 100, 0), Spin("c", {Write(1)}, 3000, 0),
       Spin("b", {Read(0), Write(2)}, 100, 1),
       Spin("d", {Read(2), Write(3)}, 100, 0),
       Spin("e", {Read(3), Write(4)}, 2000, 0)}));
  scheduler::PlannerOptions options;
  options.num_devices = 2;
  absl::StatusOr<scheduler::Plan> planned =
      scheduler::PlanGraph(*graph, options);
  ASSERT_TRUE(planned.ok()) << planned.status();
  auto plan = std::make_shared<const scheduler::Plan>(*std::move(planned));
  EXPECT_NEAR(plan->estimated_makespan_us, 3000, 1e-3);  // c's end
  EXPECT_NEAR(RunAndTime(graph, plan, 2, LaunchMode::kDeviceGraphs),
              plan->estimated_makespan_us, 1e-3);
}

// `w` writes x (300 MB) on device 0 in 100 us; `k` runs 2,000 us on device
// 1; `r` reads x after `k`. The eager copy crosses under `k` (from 100 to
// 1,100 us); made by the reader it would end the job at 3,100 us.
TEST(ExecutorGraphOverlapTest, EagerCopiesCrossUnderOtherWork) {
  auto graph = std::make_shared<const scheduler::Graph>(scheduler::Graph(
      "eager", {Buffer("x", kPeerMs), Buffer("y", 64), Buffer("z", 64)},
      {Spin("w", {Write(0)}, 100, 0), Spin("k", {Write(1)}, 2000, 1),
       Spin("r", {Read(0), Read(1), Write(2)}, 100, 1)}));
  ExpectBothEndAsPlanned(graph, 2, 2100);
}

}  // namespace
}  // namespace weft::runtime
