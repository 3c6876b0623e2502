// Control nodes on the simulated backend, through the planner and the
// executor: loops and case..of over the job's buffers, across devices,
// nested, failing, exceeding their bound and cancelled mid-loop.
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/executor_test_util.h"
#include "runtime/forwarding_backend.h"
#include "runtime/sim/sim_backend.h"
#include "runtime/trace.h"
#include "scheduler/graph_builder.h"
#include "scheduler/planner.h"
#include "testing/status_matchers.h"

namespace weft::runtime {
namespace {

using executor_testing::Floats;
using ::testing::HasSubstr;
using ::weft::testing::StatusIs;

struct ControlEvent {
  std::string node;
  ControlEventKind kind;
  int64_t value;
  std::string message;
};

struct RunResult {
  absl::Status status;
  executor_testing::OutputBytes outputs;
  std::vector<ControlEvent> events;
  std::optional<JobTrace> trace;        // when asked for
  std::vector<std::string> finished;    // nodes, in the order they finished
  std::vector<std::string> plan_order;  // nodes, in issue order
  int eager_copies = 0;                 // the plan's (Plan::copies)
};

class ExecutorControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SimBackend::Options options;
    options.num_devices = 2;
    options.memory_bytes = uint64_t{64} << 20;
    backend_ = SimBackend::Create(options).value();
    Executor::Options exec_options;
    exec_options.backend = backend_.get();
    exec_options.max_streams_per_device = 16;
    executor_ = Executor::Create(exec_options).value();
  }

  // Plans and runs the graph in `text`; `while_running` is called with the
  // job's id once it started.
  RunResult Run(const std::string& text,
                std::function<void(uint64_t)> while_running = nullptr,
                bool traced = false) {
    weft::v1::Graph proto;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &proto));
    scheduler::GraphLimits limits;
    limits.num_devices = 2;
    absl::StatusOr<scheduler::Graph> built =
        scheduler::BuildGraph(proto, limits);
    EXPECT_OK(built.status());
    auto graph = std::make_shared<const scheduler::Graph>(*std::move(built));
    scheduler::PlannerOptions options;
    options.num_devices = 2;
    options.simulate = false;
    options.device_policy = policy_;
    absl::StatusOr<scheduler::Plan> plan =
        scheduler::PlanGraph(*graph, options);
    EXPECT_OK(plan.status());
    auto shared_plan =
        std::make_shared<const scheduler::Plan>(*std::move(plan));

    RunResult result;
    result.eager_copies = static_cast<int>(shared_plan->copies.size());
    for (const scheduler::PlannedNode& pn : shared_plan->nodes) {
      result.plan_order.push_back(graph->node(pn.node).name);
    }
    absl::Mutex mu;
    absl::Notification done;
    JobCallbacks callbacks;
    callbacks.on_control = [&](const std::string& node, ControlEventKind kind,
                               int64_t value, const std::string& message) {
      absl::MutexLock lock(&mu);
      result.events.push_back({node, kind, value, message});
    };
    callbacks.on_node = [&](scheduler::NodeId node, NodeEventKind kind,
                            const absl::Status&) {
      if (kind != NodeEventKind::kFinished) return;
      absl::MutexLock lock(&mu);
      result.finished.push_back(graph->node(node).name);
    };
    if (traced) {
      callbacks.on_trace = [&](std::shared_ptr<const RecordedTrace> trace) {
        absl::MutexLock lock(&mu);
        result.trace = trace->Build();
      };
    }
    callbacks.on_done = [&](absl::Status status, scheduler::NodeId,
                            HostBuffers outputs) {
      result.status = std::move(status);
      result.outputs = executor_testing::BytesOf(outputs);
      done.Notify();
    };
    absl::StatusOr<uint64_t> id =
        executor_->Start(graph, shared_plan, std::move(callbacks), options_);
    EXPECT_OK(id.status());
    if (id.ok() && while_running) while_running(*id);
    EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
    absl::MutexLock lock(&mu);
    return result;
  }

  int Count(const RunResult& r, const std::string& node,
            ControlEventKind kind) {
    int n = 0;
    for (const ControlEvent& e : r.events)
      n += e.node == node && e.kind == kind;
    return n;
  }

  // Iterations a loop reported: one event per iteration on the host, one
  // with the count from the device.
  int64_t Iterations(const RunResult& r, const std::string& node) {
    int64_t last = 0;
    for (const ControlEvent& e : r.events) {
      if (e.node == node && e.kind == ControlEventKind::kIteration) {
        last = e.value;
      }
    }
    return last;
  }

  // Replaces the backend with one whose clock is paced (simulated time
  // passes as wall time) and the executor with one over it.
  void UsePacedBackend(int num_devices) {
    SimBackend::Options options;
    options.num_devices = num_devices;
    options.time_scale = 1.0;
    executor_.reset();
    backend_ = SimBackend::Create(options).value();
    Executor::Options exec_options;
    exec_options.backend = backend_.get();
    executor_ = Executor::Create(exec_options).value();
  }

  JobOptions options_;
  scheduler::DevicePolicyKind policy_ =
      scheduler::DevicePolicyKind::kLookaheadFinishTime;
  std::unique_ptr<SimBackend> backend_;
  std::unique_ptr<Executor> executor_;
};

// These tests run with conditions and selectors read on the host, on the
// device, and wherever the control node allows (AUTO).
class ExecutorModeTest : public ExecutorControlTest,
                         public ::testing::WithParamInterface<ControlMode> {
 protected:
  void SetUp() override {
    ExecutorControlTest::SetUp();
    options_.control_mode = GetParam();
  }
  // Control nodes without control nodes in their bodies, whose bodies
  // are planned on one device, run on the device.
  bool on_device() const { return GetParam() != ControlMode::kHost; }
};

INSTANTIATE_TEST_SUITE_P(Modes, ExecutorModeTest,
                         ::testing::Values(ControlMode::kHost,
                                           ControlMode::kDevice,
                                           ControlMode::kAuto),
                         [](const ::testing::TestParamInfo<ControlMode>& info) {
                           switch (info.param) {
                             case ControlMode::kHost:
                               return "Host";
                             case ControlMode::kDevice:
                               return "Device";
                             default:
                               return "Auto";
                           }
                         });

// i counts up by one per iteration while i < limit; x doubles alongside.
std::string CountingLoop(int limit, int max_iterations,
                         const std::string& body_pins = "", int go = 1) {
  return absl::StrCat(
      R"pb(
        name: "count"
        buffers { name: "i" size_bytes: 4 dtype: FLOAT32 output: true }
        buffers { name: "one" size_bytes: 4 dtype: FLOAT32 fill: 1 }
        buffers { name: "x" size_bytes: 64 dtype: FLOAT32 fill: 1 output: true }
        buffers { name: "go" size_bytes: 4 dtype: INT32 fill:)pb",
      go, R"pb(
        }
        nodes {
          name: "before"
          op: "scale"
          args { f32: 3 }
          args { buffer { name: "x" access: READ_WRITE } }
          device: 0
        }
        nodes { name: "loop"
                while_loop { condition: "go" max_iterations:)pb",
      max_iterations, R"pb(
        body { name: "inc" op: "axpy"
               args { f32: 1 }
               args { buffer { name: "one" access: READ } }
               args { buffer { name: "i" access: READ_WRITE } }
      )pb",
      body_pins, R"pb(
        }
        body {
          name: "double"
          op: "scale"
          args { f32: 2 }
          args { buffer { name: "x" access: READ_WRITE } }
          )pb",
      body_pins, R"pb(
        }
        body {
          name: "test"
          op: "less"
          args { buffer { name: "i" access: READ } }
          args { f32: )pb",
      limit, R"pb(}
                  args { buffer { name: "go" access: WRITE } }
        }
      }
    }
    nodes {
      name: "after"
      op: "scale"
      args { f32: 0.5 }
      args { buffer { name: "x" access: READ_WRITE } }
      device: 0
    }
  )pb");
}

TEST_P(ExecutorModeTest, LoopRunsUntilItsConditionFails) {
  RunResult r = Run(CountingLoop(10, 100));
  ASSERT_OK(r.status);
  EXPECT_EQ(Floats(r.outputs["i"])[0], 10.0f);
  // 3 * 2^10 / 2 in every element.
  for (float v : Floats(r.outputs["x"])) EXPECT_EQ(v, 1536.0f);
  EXPECT_EQ(Iterations(r, "loop"), 10);
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.back().value, 10);
  // The body's nested job ran every iteration and gave everything back.
  executor_testing::ExpectNoMemoryHeld(*backend_, *executor_);
  for (const DeviceLoad& load : executor_->Load()) {
    EXPECT_EQ(load.streams_busy, 0);
  }
}

TEST_P(ExecutorModeTest, LoopBodiesRunAsCachedDeviceGraphs) {
  // Wherever the condition is read, a body of device ops on one device
  // is built once as a device graph and relaunched every iteration.
  const StreamGraphRunner::Stats before = backend_->graph_stats();
  RunResult r = Run(CountingLoop(12, 100));
  ASSERT_OK(r.status);
  const StreamGraphRunner::Stats after = backend_->graph_stats();
  EXPECT_EQ(after.instantiations - before.instantiations, 1u);
  EXPECT_EQ(after.cache_hits - before.cache_hits, 11u);
  // On the device, one event with the count. On the host, the first
  // iteration, then (its later iterations begun in the completion
  // callbacks, loop_relay.h) the latest one now and then and the count at
  // the end, in increasing order.
  std::vector<int64_t> reported;
  for (const ControlEvent& e : r.events) {
    if (e.node == "loop" && e.kind == ControlEventKind::kIteration) {
      reported.push_back(e.value);
    }
  }
  ASSERT_FALSE(reported.empty());
  EXPECT_EQ(reported.back(), 12);
  if (on_device()) {
    EXPECT_EQ(reported.size(), 1u);
  } else {
    EXPECT_EQ(reported.front(), 1);
    EXPECT_GE(reported.size(), 2u);
    EXPECT_TRUE(std::is_sorted(reported.begin(), reported.end(),
                               std::less_equal<int64_t>()));
  }
}

TEST_P(ExecutorModeTest, HostLoopsStopPromptlyWhileRelayed) {
  // A loop that would run for a long time, cancelled while its iterations
  // are begun in the completion callbacks: it stops at an iteration
  // boundary with the cancellation, and reports how far it got.
  if (on_device()) GTEST_SKIP() << "covered by the device control tests";
  absl::Time cancelled;
  RunResult r = Run(CountingLoop(1000000, 2000000), [&](uint64_t id) {
    absl::SleepFor(absl::Milliseconds(20));
    cancelled = absl::Now();
    executor_->Cancel(id);
  });
  EXPECT_THAT(r.status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_LT(absl::Now() - cancelled, absl::Seconds(1));
  const int64_t reached = Iterations(r, "loop");
  EXPECT_GT(reached, 1);
  EXPECT_LT(reached, 1000000);
  executor_testing::ExpectNoMemoryHeld(*backend_, *executor_);
}

TEST_P(ExecutorModeTest, TracesShowEachIterationTheHostLaunches) {
  RunResult r = Run(CountingLoop(5, 100), nullptr, /*traced=*/true);
  ASSERT_OK(r.status);
  ASSERT_TRUE(r.trace.has_value());
  std::vector<TraceSpan> iterations;
  std::optional<TraceSpan> loop;
  for (const TraceSpan& span : r.trace->spans) {
    if (span.kind == SpanKind::kIteration) iterations.push_back(span);
    if (span.name == "loop") loop = span;
  }
  ASSERT_TRUE(loop.has_value());
  if (on_device()) {
    // The device ran the iterations: the loop's span covers them all.
    EXPECT_TRUE(iterations.empty());
    EXPECT_GT(loop->end_us - loop->start_us, 0);
    return;
  }
  ASSERT_EQ(iterations.size(), 5u);
  for (size_t k = 0; k < iterations.size(); ++k) {
    EXPECT_EQ(iterations[k].name, absl::StrCat("loop: iteration ", k + 1));
    EXPECT_GE(iterations[k].start_us, loop->start_us);
    EXPECT_LE(iterations[k].end_us, loop->end_us + 1e-6);
    if (k > 0) {
      EXPECT_GE(iterations[k].start_us, iterations[k - 1].end_us - 1e-6);
    }
  }
  // The body's kernels cost something on the device clock.
  EXPECT_GT(iterations[0].end_us, iterations[0].start_us);
}

TEST_P(ExecutorModeTest, BodyOnAnotherDeviceKeepsBuffersCoherent) {
  RunResult r = Run(CountingLoop(5, 100, "device: 1"));
  ASSERT_OK(r.status);
  EXPECT_EQ(Floats(r.outputs["i"])[0], 5.0f);
  for (float v : Floats(r.outputs["x"])) EXPECT_EQ(v, 48.0f);
}

TEST_P(ExecutorModeTest, EagerCopiesCarryALoopsBuffersBetweenDevices) {
  // k and k2 write z and big on device 1, so the loop goes there; x
  // crosses to it from device 0 by an eager copy, and s, which the loop
  // writes, crosses back to r by another.
  const std::string text = R"pb(
    name: "eager"
    buffers { name: "x" size_bytes: 64 dtype: FLOAT32 fill: 1 }
    buffers { name: "z" size_bytes: 64 dtype: FLOAT32 output: true }
    buffers { name: "big" size_bytes: 65536 dtype: FLOAT32 fill: 1 }
    buffers { name: "i" size_bytes: 4 dtype: FLOAT32 }
    buffers { name: "one" size_bytes: 4 dtype: FLOAT32 fill: 1 }
    buffers { name: "s" size_bytes: 4 dtype: FLOAT32 }
    buffers { name: "out" size_bytes: 4 dtype: FLOAT32 output: true }
    buffers { name: "go" size_bytes: 4 dtype: INT32 fill: 1 }
    nodes {
      name: "w"
      op: "scale"
      args { f32: 3 }
      args { buffer { name: "x" access: READ_WRITE } }
      device: 0
      cost { estimated_us: 100 }
    }
    nodes {
      name: "k"
      op: "fill"
      args { buffer { name: "z" access: WRITE } }
      args { f32: 1 }
      device: 1
      cost { estimated_us: 2000 }
    }
    nodes {
      name: "k2"
      op: "scale"
      args { f32: 1 }
      args { buffer { name: "big" access: READ_WRITE } }
      device: 1
      cost { estimated_us: 100 }
    }
    nodes {
      name: "loop"
      while_loop {
        condition: "go"
        max_iterations: 10
        body {
          name: "step"
          op: "axpy"
          args { f32: 2 }
          args { buffer { name: "x" access: READ } }
          args { buffer { name: "z" access: READ_WRITE } }
        }
        body {
          name: "sum"
          op: "dot"
          args { buffer { name: "big" access: READ } }
          args { buffer { name: "big" access: READ } }
          args { buffer { name: "s" access: WRITE } }
        }
        body {
          name: "inc"
          op: "axpy"
          args { f32: 1 }
          args { buffer { name: "one" access: READ } }
          args { buffer { name: "i" access: READ_WRITE } }
        }
        body {
          name: "test"
          op: "less"
          args { buffer { name: "i" access: READ } }
          args { f32: 3 }
          args { buffer { name: "go" access: WRITE } }
        }
      }
    }
    nodes {
      name: "r"
      op: "copy"
      args { buffer { name: "s" access: READ } }
      args { buffer { name: "out" access: WRITE } }
      device: 0
    }
  )pb";
  RunResult r = Run(text);
  ASSERT_OK(r.status);
  EXPECT_EQ(r.eager_copies, 2);
  for (float v : Floats(r.outputs["z"])) EXPECT_EQ(v, 19.0f);
  EXPECT_EQ(Floats(r.outputs["out"])[0], 16384.0f);
  EXPECT_EQ(Iterations(r, "loop"), 3);
}

TEST_P(ExecutorModeTest, LoopBeyondItsBoundFailsNamingIt) {
  RunResult r = Run(CountingLoop(10, 4));
  EXPECT_THAT(r.status,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("loop 'loop' would exceed max_iterations 4")));
  if (!on_device()) {
    EXPECT_EQ(Iterations(r, "loop"), 4);
  }
}

TEST_P(ExecutorModeTest, FalseConditionRunsNoIteration) {
  RunResult r = Run(CountingLoop(10, 100, "", /*go=*/0));
  ASSERT_OK(r.status);
  EXPECT_EQ(Floats(r.outputs["i"])[0], 0.0f);
  for (float v : Floats(r.outputs["x"])) EXPECT_EQ(v, 1.5f);
  EXPECT_EQ(Iterations(r, "loop"), 0);
}

// x (all ones) scaled by 2 in branch 0 and by 3 in branch 1; `branch1_pin`
// places branch 1's node.
std::string Choice(int selector, const std::string& branch1_pin = "") {
  return absl::StrCat(
      R"pb(
        name: "choice"
        buffers { name: "x" size_bytes: 16 dtype: FLOAT32 fill: 1 output: true }
        buffers { name: "pick" size_bytes: 8 dtype: INT64 fill:)pb",
      selector, R"pb(}
                     nodes {
      name: "case"
      case_of {
        selector: "pick"
        branches {
          nodes {
            name: "by2"
            op: "scale"
            args { f32: 2 }
            args { buffer { name: "x" access: READ_WRITE } }
          }
        }
        branches {
          nodes {
            name: "by3"
            op: "scale"
            args { f32: 3 }
            args { buffer { name: "x" access: READ_WRITE } }
            )pb",
      branch1_pin, R"pb(
        }
        }
      }
    }
  )pb");
}

TEST_P(ExecutorModeTest, CaseOfRunsTheSelectedBranch) {
  for (int selector : {0, 1}) {
    RunResult r = Run(Choice(selector));
    ASSERT_OK(r.status);
    for (float v : Floats(r.outputs["x"])) EXPECT_EQ(v, selector == 0 ? 2 : 3);
    ASSERT_EQ(r.events.size(), 1u);
    EXPECT_EQ(r.events[0].kind, ControlEventKind::kBranch);
    EXPECT_EQ(r.events[0].value, selector);
    EXPECT_EQ(absl::StrContains(r.events[0].message, "on the device"),
              on_device())
        << r.events[0].message;
    executor_testing::ExpectNoMemoryHeld(*backend_, *executor_);
    for (const DeviceLoad& load : executor_->Load()) {
      EXPECT_EQ(load.streams_busy, 0);
    }
  }
}

TEST_P(ExecutorModeTest, SelectorOutOfRangeRunsNoBranchAndSaysSo) {
  for (int selector : {-1, 2, 7}) {
    RunResult r = Run(Choice(selector));
    ASSERT_OK(r.status);
    for (float v : Floats(r.outputs["x"])) EXPECT_EQ(v, 1);
    ASSERT_EQ(r.events.size(), 1u);
    EXPECT_EQ(r.events[0].kind, ControlEventKind::kBranch);
    EXPECT_EQ(r.events[0].value, -1);
    EXPECT_THAT(r.events[0].message, HasSubstr("none of 2 branches"));
  }
}

TEST_P(ExecutorModeTest, BranchesOnTwoDevices) {
  // The device decides only among branches on one device; AUTO then
  // reads the selector on the host.
  for (int selector : {0, 1}) {
    RunResult r = Run(Choice(selector, "device: 1"));
    if (GetParam() == ControlMode::kDevice) {
      EXPECT_THAT(r.status,
                  StatusIs(absl::StatusCode::kFailedPrecondition,
                           HasSubstr("case..of 'case' cannot evaluate its "
                                     "selector on the device: its branches "
                                     "are planned on more than one device")));
      continue;
    }
    ASSERT_OK(r.status);
    for (float v : Floats(r.outputs["x"])) EXPECT_EQ(v, selector == 0 ? 2 : 3);
    ASSERT_EQ(r.events.size(), 1u);
    EXPECT_EQ(r.events[0].value, selector);
    EXPECT_THAT(r.events[0].message, ::testing::Not(HasSubstr("device")));
  }
}

TEST_P(ExecutorModeTest, BranchOnAnotherDeviceKeepsBuffersCoherent) {
  // Both branches pinned to device 1; x is written on device 0 before.
  const std::string text = R"pb(
    name: "moved"
    buffers { name: "x" size_bytes: 16 dtype: FLOAT32 fill: 1 output: true }
    buffers { name: "pick" size_bytes: 4 dtype: INT32 fill: 1 }
    nodes {
      name: "before"
      op: "scale"
      args { f32: 5 }
      args { buffer { name: "x" access: READ_WRITE } }
      device: 0
    }
    nodes {
      name: "case"
      case_of {
        selector: "pick"
        branches {
          nodes {
            name: "by2"
            op: "scale"
            args { f32: 2 }
            args { buffer { name: "x" access: READ_WRITE } }
            device: 1
          }
        }
        branches {
          nodes {
            name: "by3"
            op: "scale"
            args { f32: 3 }
            args { buffer { name: "x" access: READ_WRITE } }
            device: 1
          }
        }
      }
    }
    nodes {
      name: "after"
      op: "scale"
      args { f32: 0.5 }
      args { buffer { name: "x" access: READ_WRITE } }
      device: 0
    }
  )pb";
  RunResult r = Run(text);
  ASSERT_OK(r.status);
  for (float v : Floats(r.outputs["x"])) EXPECT_EQ(v, 7.5f);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].value, 1);
}

TEST_P(ExecutorModeTest, LoopInsideALoop) {
  // Outer: 3 iterations; inner: 4 per outer iteration, counting `total`.
  // The inner loop also writes the outer condition (`outer_go`), so the
  // outer body's last version of it comes from a job nested in it.
  const std::string text = R"pb(
    name: "nested_loops"
    buffers { name: "i" size_bytes: 4 dtype: FLOAT32 }
    buffers { name: "j" size_bytes: 4 dtype: FLOAT32 }
    buffers { name: "one" size_bytes: 4 dtype: FLOAT32 fill: 1 }
    buffers { name: "total" size_bytes: 4 dtype: FLOAT32 output: true }
    buffers { name: "outer_go" size_bytes: 4 dtype: INT32 fill: 1 }
    buffers { name: "inner_go" size_bytes: 4 dtype: INT32 }
    nodes {
      name: "outer"
      while_loop {
        condition: "outer_go"
        max_iterations: 10
        body {
          name: "next_i"
          op: "axpy"
          args { f32: 1 }
          args { buffer { name: "one" access: READ } }
          args { buffer { name: "i" access: READ_WRITE } }
        }
        body {
          name: "reset_j"
          op: "fill"
          args { buffer { name: "j" access: WRITE } }
          args { f32: 0 }
        }
        body {
          name: "start_inner"
          op: "fill"
          args { buffer { name: "inner_go" access: WRITE } }
          args { i32: 1 }
        }
        body {
          name: "inner"
          while_loop {
            condition: "inner_go"
            max_iterations: 10
            body {
              name: "count"
              op: "axpy"
              args { f32: 1 }
              args { buffer { name: "one" access: READ } }
              args { buffer { name: "total" access: READ_WRITE } }
            }
            body {
              name: "next_j"
              op: "axpy"
              args { f32: 1 }
              args { buffer { name: "one" access: READ } }
              args { buffer { name: "j" access: READ_WRITE } }
            }
            body {
              name: "inner_test"
              op: "less"
              args { buffer { name: "j" access: READ } }
              args { f32: 4 }
              args { buffer { name: "inner_go" access: WRITE } }
            }
            body {
              name: "outer_test"
              op: "less"
              args { buffer { name: "i" access: READ } }
              args { f32: 3 }
              args { buffer { name: "outer_go" access: WRITE } }
            }
          }
        }
      }
    }
  )pb";
  RunResult r = Run(text);
  ASSERT_OK(r.status);
  EXPECT_EQ(Floats(r.outputs["total"])[0], 12.0f);
  EXPECT_EQ(Iterations(r, "outer"), 3);
  if (GetParam() != ControlMode::kHost) {
    // Both loops on the device: the inner one reports its iterations over
    // all of its runs once the outer one has ended.
    EXPECT_EQ(Iterations(r, "inner"), 12);
    EXPECT_EQ(Count(r, "inner", ControlEventKind::kIteration), 1);
  }
  executor_testing::ExpectNoMemoryHeld(*backend_, *executor_);
  for (const DeviceLoad& load : executor_->Load()) {
    EXPECT_EQ(load.streams_busy, 0);
  }
}

// A loop whose body's case..of alternates between its branches by the
// parity of k: x is multiplied by 2 on even k, by 3 on odd k, for k = 0 ..
// iterations - 1.
std::string CaseInsideALoop(int iterations, int max_iterations) {
  return absl::StrReplaceAll(
      R"pb(
        name: "nested"
        buffers { name: "x" size_bytes: 4 dtype: FLOAT32 fill: 1 output: true }
        buffers { name: "k" size_bytes: 4 dtype: FLOAT32 }
        buffers { name: "one" size_bytes: 4 dtype: FLOAT32 fill: 1 }
        buffers { name: "odd" size_bytes: 4 dtype: INT32 }
        buffers { name: "go" size_bytes: 4 dtype: INT32 fill: 1 }
        nodes {
          name: "loop"
          while_loop {
            condition: "go"
            max_iterations: MAX_ITERATIONS
            body {
              name: "pick"
              case_of {
                selector: "odd"
                branches {
                  nodes {
                    name: "by2"
                    op: "scale"
                    args { f32: 2 }
                    args { buffer { name: "x" access: READ_WRITE } }
                  }
                  nodes {
                    name: "now_odd"
                    op: "fill"
                    args { buffer { name: "odd" access: WRITE } }
                    args { i32: 1 }
                  }
                }
                branches {
                  nodes {
                    name: "by3"
                    op: "scale"
                    args { f32: 3 }
                    args { buffer { name: "x" access: READ_WRITE } }
                  }
                  nodes {
                    name: "now_even"
                    op: "fill"
                    args { buffer { name: "odd" access: WRITE } }
                    args { i32: 0 }
                  }
                }
              }
            }
            body {
              name: "next"
              op: "axpy"
              args { f32: 1 }
              args { buffer { name: "one" access: READ } }
              args { buffer { name: "k" access: READ_WRITE } }
            }
            body {
              name: "test"
              op: "less"
              args { buffer { name: "k" access: READ } }
              args { f32: ITERATIONS }
              args { buffer { name: "go" access: WRITE } }
            }
          }
        }
      )pb",
      {{"MAX_ITERATIONS", absl::StrCat(max_iterations)},
       {"ITERATIONS", absl::StrCat(iterations)}});
}

TEST_F(ExecutorControlTest, CaseOfInsideALoop) {
  const std::string text = CaseInsideALoop(6, 50);
  // Driven by the host: an event per iteration and per branch taken.
  options_.control_mode = ControlMode::kHost;
  RunResult r = Run(text);
  ASSERT_OK(r.status);
  EXPECT_EQ(Floats(r.outputs["x"])[0], 216.0f);  // 2*3*2*3*2*3
  EXPECT_EQ(Count(r, "loop", ControlEventKind::kIteration), 6);
  EXPECT_EQ(Count(r, "pick", ControlEventKind::kBranch), 6);
  // On the device (AUTO, where the bodies allow it): the same result, the
  // loop's count and the branch its last run took, once each.
  options_.control_mode = ControlMode::kAuto;
  r = Run(text);
  ASSERT_OK(r.status);
  EXPECT_EQ(Floats(r.outputs["x"])[0], 216.0f);
  EXPECT_EQ(Iterations(r, "loop"), 6);
  EXPECT_EQ(Count(r, "loop", ControlEventKind::kIteration), 1);
  ASSERT_EQ(Count(r, "pick", ControlEventKind::kBranch), 1);
  for (const ControlEvent& e : r.events) {
    if (e.node == "pick") {
      EXPECT_EQ(e.value, 1);  // k = 5 is odd
    }
  }
}

// Counts the events a backend creates.
class EventCountingBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  absl::StatusOr<EventHandle> CreateEvent(int device) override {
    ++created;
    return ForwardingBackend::CreateEvent(device);
  }
  int created = 0;
};

TEST_F(ExecutorControlTest, ALoopHoldsNoMoreEventsForMoreIterations) {
  // CaseInsideALoop run for 6 and for 300 iterations: joining the
  // case..of's streams every iteration reuses the job's events.
  EventCountingBackend counting(backend_.get());
  Executor::Options exec_options;
  exec_options.backend = &counting;
  exec_options.max_streams_per_device = 16;
  executor_ = Executor::Create(exec_options).value();
  options_.control_mode = ControlMode::kHost;

  std::vector<int> created;
  for (const int iterations : {6, 300}) {
    const int before = counting.created;
    RunResult r = Run(CaseInsideALoop(iterations, 1000));
    ASSERT_OK(r.status);
    created.push_back(counting.created - before);
  }
  // The pools keep what the first run created; the second needs at most
  // a few more, not one per iteration.
  EXPECT_LE(created[1], 4) << created[0];
  executor_.reset();  // before the backend it uses
}

TEST_P(ExecutorModeTest, AFailingBodyFailsTheJobNamingLoopAndIteration) {
  // The fifth kernel launch fails: one in the loop's body.
  ASSERT_OK(backend_->InjectLaunchFault(
      {-1, 5, absl::InternalError("injected launch fault")}));
  const std::string text = R"pb(
    name: "bad"
    buffers { name: "go" size_bytes: 4 dtype: INT32 fill: 1 }
    nodes {
      name: "loop"
      while_loop {
        condition: "go"
        max_iterations: 100
        body {
          name: "work"
          op: "spin"
          args { buffer { name: "go" access: READ } }
        }
      }
    }
  )pb";
  RunResult r = Run(text);
  EXPECT_THAT(r.status, StatusIs(absl::StatusCode::kInternal,
                                 HasSubstr("injected launch fault")));
  EXPECT_THAT(std::string(r.status.message()),
              HasSubstr("loop 'loop' iteration "));
  EXPECT_LT(Iterations(r, "loop"), 6);
}

TEST_P(ExecutorModeTest, IndependentNodesRunWhileALoopRuns) {
  // A loop of 2 ms iterations on a paced clock; "after" depends on it and
  // comes before "other" in plan order, which does not: "other" finishes
  // long before the loop does.
  UsePacedBackend(/*num_devices=*/2);
  // Issued in the submitted order (the default policy would issue "other"
  // first, as it starts first).
  policy_ = scheduler::DevicePolicyKind::kRoundRobin;
  const std::string text = R"pb(
    name: "beside"
    buffers { name: "k" size_bytes: 4 dtype: FLOAT32 output: true }
    buffers { name: "one" size_bytes: 4 dtype: FLOAT32 fill: 1 }
    buffers { name: "go" size_bytes: 4 dtype: INT32 fill: 1 }
    buffers { name: "x" size_bytes: 4 dtype: FLOAT32 fill: 1 output: true }
    buffers { name: "y" size_bytes: 4 dtype: FLOAT32 fill: 1 output: true }
    nodes {
      name: "loop"
      while_loop {
        condition: "go"
        max_iterations: 100
        body {
          name: "inc"
          op: "axpy"
          args { f32: 1 }
          args { buffer { name: "one" access: READ } }
          args { buffer { name: "k" access: READ_WRITE } }
        }
        body {
          name: "work"
          op: "spin"
          args { buffer { name: "k" access: READ } }
          cost { estimated_us: 2000 }
        }
        body {
          name: "test"
          op: "less"
          args { buffer { name: "k" access: READ } }
          args { f32: 10 }
          args { buffer { name: "go" access: WRITE } }
        }
      }
    }
    nodes {
      name: "after"
      op: "axpy"
      args { f32: 1 }
      args { buffer { name: "k" access: READ } }
      args { buffer { name: "x" access: READ_WRITE } }
      device: 0
    }
    nodes {
      name: "other"
      op: "scale"
      args { f32: 3 }
      args { buffer { name: "y" access: READ_WRITE } }
      device: 1
    }
  )pb";
  RunResult r = Run(text);
  ASSERT_OK(r.status);
  ASSERT_THAT(r.plan_order, ::testing::ElementsAre("loop", "after", "other"));
  EXPECT_EQ(Floats(r.outputs["k"])[0], 10.0f);
  EXPECT_EQ(Floats(r.outputs["x"])[0], 11.0f);
  EXPECT_EQ(Floats(r.outputs["y"])[0], 3.0f);
  ASSERT_EQ(r.finished.size(), 3u);
  EXPECT_EQ(r.finished[0], "other");
  EXPECT_EQ(r.finished[1], "loop");
  EXPECT_EQ(r.finished[2], "after");
}

TEST_P(ExecutorModeTest, CancelStopsALoopPromptly) {
  // An endless loop of 2 ms spins on a paced clock.
  UsePacedBackend(/*num_devices=*/1);
  const std::string text = R"pb(
    name: "endless"
    buffers { name: "go" size_bytes: 4 dtype: INT32 fill: 1 }
    nodes {
      name: "loop"
      while_loop {
        condition: "go"
        max_iterations: 1000000
        body {
          name: "work"
          op: "spin"
          args { buffer { name: "go" access: READ } }
          cost { estimated_us: 2000 }
        }
      }
    }
  )pb";
  absl::Time cancelled;
  RunResult r = Run(text, [&](uint64_t id) {
    absl::SleepFor(absl::Milliseconds(50));
    cancelled = absl::Now();
    executor_->Cancel(id);
  });
  EXPECT_THAT(r.status, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_LT(absl::Now() - cancelled, absl::Seconds(1));
  if (!on_device()) {
    EXPECT_GE(Iterations(r, "loop"), 2);
  }
  executor_testing::ExpectNoMemoryHeld(*backend_, *executor_);
}

// A random graph over eight buffers: `before` and `after` random nodes
// (scale or axpy, on device 0 or 1) around a loop of three iterations
// that adds one buffer into another.
std::string RandomGraphAroundALoop(std::mt19937& rng, int before, int after) {
  auto pick = [&](int n) {
    return std::uniform_int_distribution<int>(0, n - 1)(rng);
  };
  std::string text = R"pb(name: "random")pb";
  for (int b = 0; b < 8; ++b) {
    absl::StrAppend(&text, " buffers { name: \"b", b,
                    "\" size_bytes: 16 dtype: FLOAT32 fill: ", b + 1,
                    " output: true }");
  }
  absl::StrAppend(
      &text,
      R"pb(buffers { name: "k" size_bytes: 4 dtype: FLOAT32 }
           buffers { name: "one" size_bytes: 4 dtype: FLOAT32 fill: 1 }
           buffers { name: "go" size_bytes: 4 dtype: INT32 fill: 1 })pb");
  int id = 0;
  auto random_node = [&] {
    const int device = pick(2);
    const int out = pick(8);
    if (pick(2) == 0) {
      absl::StrAppend(&text, " nodes { name: \"n", id++,
                      "\" op: \"scale\" args { f32: 1.5 } args { buffer { "
                      "name: \"b",
                      out, "\" access: READ_WRITE } } device: ", device, " }");
    } else {
      absl::StrAppend(&text, " nodes { name: \"n", id++,
                      "\" op: \"axpy\" args { f32: 0.5 } args { buffer { "
                      "name: \"b",
                      pick(8), "\" access: READ } } args { buffer { name: \"b",
                      out, "\" access: READ_WRITE } } device: ", device, " }");
    }
  };
  for (int i = 0; i < before; ++i) random_node();
  const int x = pick(8);
  const int y = (x + 1 + pick(7)) % 8;
  const std::string on = absl::StrCat(" device: ", pick(2), " ");
  absl::StrAppend(
      &text,
      R"pb(nodes { name: "loop"
                   while_loop {
                     condition: "go"
                     max_iterations: 10
                     body { name: "inc" op: "axpy"
                            args { f32: 1 }
                            args { buffer { name: "one" access: READ } }
                            args { buffer { name: "k" access: READ_WRITE } })pb",
      on, R"pb(}
               body { name: "add" op: "axpy" args { f32: 1 }
               args { buffer { name: "b)pb",
      x, R"pb(" access: READ } }
              args { buffer { name: "b)pb",
      y, R"pb(" access: READ_WRITE } })pb", on, R"pb(}
                                                     body { name: "test" op: "less"
               args { buffer { name: "k" access: READ } } args { f32: 3 }
               args { buffer { name: "go" access: WRITE } })pb",
      on, R"pb(}
               } })pb");
  for (int i = 0; i < after; ++i) random_node();
  return text;
}

TEST_F(ExecutorControlTest, NodesIssuedAroundAHostLoopKeepTheirOrder) {
  // The host drives the loop (nodes after one that waits for it may be
  // issued ahead), the device decides it (issued in plan order): the
  // outputs agree on every graph.
  std::mt19937 rng(20261126);
  for (int trial = 0; trial < 24; ++trial) {
    const std::string text = RandomGraphAroundALoop(rng, 6, 10);
    options_.control_mode = ControlMode::kHost;
    RunResult host = Run(text);
    options_.control_mode = ControlMode::kDevice;
    RunResult device = Run(text);
    ASSERT_OK(host.status) << text;
    ASSERT_OK(device.status) << text;
    for (int b = 0; b < 8; ++b) {
      const std::string name = absl::StrCat("b", b);
      EXPECT_EQ(Floats(host.outputs[name]), Floats(device.outputs[name]))
          << "trial " << trial << " buffer " << name << "\n"
          << text;
    }
  }
}

}  // namespace
}  // namespace weft::runtime
