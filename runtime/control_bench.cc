// Host cost of a loop's iterations: a while_loop run by the executor
// (conditions read on the host, control_run.h) against the same loop run
// as one job per iteration, as a client without control nodes must (plan
// the body, run it, read the condition back, decide, submit again).
//
// The body is a chain of `body` tiny nodes on one-element buffers: a
// counter increment, body - 2 scalings and a comparison that writes the
// condition, on two simulated devices with an unpaced clock, so the time
// measured is the host's. Printed per iteration, for several body sizes:
// wall time, CPU time of all threads, and CPU time of the executor's
// scheduling thread (the turns nobody else took: executor.cc). Ratios are
// the CPU time of all threads against one job per iteration in the same
// run. The nested
// rows run the body as an inner loop of 10 iterations inside an outer
// loop (iterations / 10 of them) and count per inner iteration.
//
//   bazel run -c opt //runtime:control_bench -- [iterations] [host [body]]
//
// `host` runs only the host-driven loops (for profiling), and `body` only
// that body size.
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/executor.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/graph.h"
#include "scheduler/planner.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::BufferSpec;
using scheduler::BufferUse;
using scheduler::ControlSpec;
using scheduler::DType;
using scheduler::Graph;
using scheduler::NodeSpec;

// The id of the executor's scheduling thread (named "weft-scheduler").
int SchedulerTid() {
  int found = -1;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return found;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream comm(
        absl::StrCat("/proc/self/task/", entry->d_name, "/comm"));
    std::string name;
    std::getline(comm, name);
    if (name == "weft-scheduler") found = std::atoi(entry->d_name);
  }
  closedir(dir);
  return found;
}

// CPU microseconds of `clock` (a CPU-time clock) so far.
double CpuUs(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 +
         static_cast<double>(ts.tv_nsec) / 1e3;
}

// The CPU-time clock of thread `tid` of this process (Linux encodes it
// from the thread id: per-thread, scheduler-accounted), so that another
// thread can read it to the nanosecond.
clockid_t ThreadCpuClock(int tid) {
  return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6);
}

struct Cost {
  double wall_us = 0;
  double cpu_us = 0;        // all threads
  double scheduler_us = 0;  // the executor's scheduling thread
};

int scheduler_tid = -1;

template <typename Fn>
Cost Measure(Fn fn) {
  const clockid_t scheduler = ThreadCpuClock(scheduler_tid);
  const double cpu_before = CpuUs(CLOCK_PROCESS_CPUTIME_ID);
  const double scheduler_before = CpuUs(scheduler);
  const absl::Time start = absl::Now();
  fn();
  Cost cost;
  cost.wall_us = absl::ToDoubleMicroseconds(absl::Now() - start);
  cost.cpu_us = CpuUs(CLOCK_PROCESS_CPUTIME_ID) - cpu_before;
  cost.scheduler_us = CpuUs(scheduler) - scheduler_before;
  return cost;
}

// kInner and kInnerGo: a nested loop's counter and condition.
enum Buffers { kCounter, kOne, kGo, kScratch, kInner, kInnerGo, kNumBuffers };

std::vector<BufferSpec> Buffers(bool with_data) {
  std::vector<BufferSpec> buffers(kNumBuffers);
  const char* names[] = {"i", "one", "go", "y", "j", "inner_go"};
  const DType dtypes[] = {DType::kFloat32, DType::kFloat32, DType::kInt32,
                          DType::kFloat32, DType::kFloat32, DType::kInt32};
  for (int b = 0; b < kNumBuffers; ++b) {
    buffers[b].name = names[b];
    buffers[b].size_bytes = 4;
    buffers[b].dtype = dtypes[b];
  }
  if (with_data) {
    buffers[kOne].init = BufferSpec::Init::kFill;
    buffers[kOne].fill = 1;
    buffers[kGo].init = BufferSpec::Init::kFill;
    buffers[kGo].fill = 1;
    buffers[kCounter].output = true;
    buffers[kGo].output = true;
  }
  return buffers;
}

// The body: i += 1, body - 2 scalings of y, go = i < limit (`counter`
// and `go` in place of i and go).
std::vector<NodeSpec> Body(int body, int limit, const std::string& suffix,
                           int counter = kCounter, int go = kGo) {
  std::vector<NodeSpec> nodes;
  NodeSpec inc;
  inc.name = "inc" + suffix;
  inc.op = "axpy";
  inc.args = {1.0f, BufferUse{kOne, Access::kRead},
              BufferUse{counter, Access::kReadWrite}};
  nodes.push_back(inc);
  for (int k = 0; k < body - 2; ++k) {
    NodeSpec scale;
    scale.name = absl::StrCat("scale", k, suffix);
    scale.op = "scale";
    scale.args = {1.0f, BufferUse{kScratch, Access::kReadWrite}};
    nodes.push_back(scale);
  }
  NodeSpec test;
  test.name = "test" + suffix;
  test.op = "less";
  test.args = {BufferUse{counter, Access::kRead}, static_cast<float>(limit),
               BufferUse{go, Access::kWrite}};
  nodes.push_back(test);
  return nodes;
}

scheduler::PlannerOptions Options() {
  scheduler::PlannerOptions options;
  options.num_devices = 2;
  options.simulate = false;
  return options;
}

absl::Status RunJob(Executor& executor, std::shared_ptr<const Graph> graph,
                    std::shared_ptr<const scheduler::Plan> plan,
                    HostBuffers* outputs,
                    ControlMode mode = ControlMode::kAuto) {
  absl::Notification done;
  absl::Status status;
  JobCallbacks callbacks;
  callbacks.on_done = [&](absl::Status s, scheduler::NodeId, HostBuffers out) {
    status = std::move(s);
    if (outputs != nullptr) *outputs = std::move(out);
    done.Notify();
  };
  absl::StatusOr<uint64_t> id =
      executor.Start(std::move(graph), std::move(plan), std::move(callbacks),
                     JobOptions{LaunchMode::kDefault, mode});
  if (!id.ok()) return id.status();
  done.WaitForNotification();
  return status;
}

// Plans and runs the job `graph` (conditions read where `mode` says),
// timed; exits unless it succeeds with `iterations` in its counter i.
Cost PlanAndRun(Executor& executor, std::shared_ptr<const Graph> graph,
                ControlMode mode, int iterations) {
  return Measure([&] {
    auto plan = std::make_shared<const scheduler::Plan>(
        scheduler::PlanGraph(*graph, Options()).value());
    HostBuffers outputs;
    absl::Status s = RunJob(executor, graph, plan, &outputs, mode);
    float count = 0;
    std::memcpy(&count, outputs["i"].ToString().data(), sizeof(count));
    if (!s.ok() || count != iterations) {
      std::fprintf(stderr, "%s: %s, %g iterations of the outermost loop\n",
                   graph->name().c_str(), s.ToString().c_str(), count);
      std::exit(1);
    }
  });
}

// The loop as one job with a while_loop node, its conditions read where
// `mode` says.
Cost LoopJob(Executor& executor, int body, int iterations, ControlMode mode) {
  auto control = std::make_shared<ControlSpec>();
  control->kind = ControlSpec::Kind::kWhile;
  control->condition = kGo;
  control->max_iterations = static_cast<uint32_t>(iterations) + 1;
  control->bodies.push_back(std::make_shared<const Graph>(
      "loop", Buffers(false), Body(body, iterations, "")));
  NodeSpec loop;
  loop.name = "loop";
  loop.op = std::string(scheduler::kWhileOp);
  loop.engine = scheduler::Engine::kHost;
  loop.args = {BufferUse{kCounter, Access::kReadWrite},
               BufferUse{kOne, Access::kRead},
               BufferUse{kScratch, Access::kReadWrite},
               BufferUse{kGo, Access::kReadWrite}};
  loop.control = control;
  auto graph = std::make_shared<const Graph>(
      "loop_job", Buffers(true), std::vector<NodeSpec>{std::move(loop)});
  return PlanAndRun(executor, graph, mode, iterations);
}

// A loop of iterations / kInnerIterations iterations whose body resets j,
// runs an inner loop of kInnerIterations iterations of the body on j, and
// counts i: the cost per inner iteration, its conditions read where `mode`
// says.
constexpr int kInnerIterations = 10;

Cost NestedLoopJob(Executor& executor, int body, int iterations,
                   ControlMode mode) {
  auto inner = std::make_shared<ControlSpec>();
  inner->kind = ControlSpec::Kind::kWhile;
  inner->condition = kInnerGo;
  inner->max_iterations = kInnerIterations + 1;
  inner->bodies.push_back(std::make_shared<const Graph>(
      "inner", Buffers(false),
      Body(body, kInnerIterations, "_in", kInner, kInnerGo)));
  NodeSpec inner_loop;
  inner_loop.name = "inner";
  inner_loop.op = std::string(scheduler::kWhileOp);
  inner_loop.engine = scheduler::Engine::kHost;
  inner_loop.args = {BufferUse{kInner, Access::kReadWrite},
                     BufferUse{kOne, Access::kRead},
                     BufferUse{kScratch, Access::kReadWrite},
                     BufferUse{kInnerGo, Access::kReadWrite}};
  inner_loop.control = inner;
  std::vector<NodeSpec> outer_body;
  NodeSpec reset;
  reset.name = "reset_j";
  reset.op = "fill";
  reset.args = {BufferUse{kInner, Access::kWrite}, 0.0f};
  outer_body.push_back(reset);
  NodeSpec start;
  start.name = "start_inner";
  start.op = "fill";
  start.args = {BufferUse{kInnerGo, Access::kWrite}, int32_t{1}};
  outer_body.push_back(start);
  outer_body.push_back(inner_loop);
  const int outer_iterations = iterations / kInnerIterations;
  for (NodeSpec& n : Body(2, outer_iterations, "_out")) {
    outer_body.push_back(std::move(n));
  }
  auto outer = std::make_shared<ControlSpec>();
  outer->kind = ControlSpec::Kind::kWhile;
  outer->condition = kGo;
  outer->max_iterations = static_cast<uint32_t>(outer_iterations) + 1;
  outer->depth = 2;
  outer->bodies.push_back(
      std::make_shared<const Graph>("outer", Buffers(false), outer_body));
  NodeSpec loop;
  loop.name = "outer";
  loop.op = std::string(scheduler::kWhileOp);
  loop.engine = scheduler::Engine::kHost;
  loop.args = {BufferUse{kCounter, Access::kReadWrite},
               BufferUse{kOne, Access::kRead},
               BufferUse{kScratch, Access::kReadWrite},
               BufferUse{kGo, Access::kReadWrite},
               BufferUse{kInner, Access::kReadWrite},
               BufferUse{kInnerGo, Access::kReadWrite}};
  loop.control = outer;
  auto graph = std::make_shared<const Graph>(
      "nested_job", Buffers(true), std::vector<NodeSpec>{std::move(loop)});
  return PlanAndRun(executor, graph, mode, outer_iterations);
}

// The same loop as one job per iteration: each plans and runs the body
// with the counter carried over as initial data, and the host reads the
// condition from its outputs.
Cost JobPerIteration(Executor& executor, int body, int iterations) {
  return Measure([&] {
    std::string counter(4, '\0');
    int done = 0;
    while (true) {
      std::vector<BufferSpec> buffers = Buffers(true);
      buffers[kCounter].init = BufferSpec::Init::kData;
      buffers[kCounter].data = counter;
      auto graph = std::make_shared<const Graph>("step", std::move(buffers),
                                                 Body(body, iterations, ""));
      auto plan = std::make_shared<const scheduler::Plan>(
          scheduler::PlanGraph(*graph, Options()).value());
      HostBuffers outputs;
      if (absl::Status s = RunJob(executor, graph, plan, &outputs); !s.ok()) {
        std::fprintf(stderr, "step: %s\n", s.ToString().c_str());
        std::exit(1);
      }
      ++done;
      counter = outputs["i"].ToString();
      int32_t go = 0;
      std::memcpy(&go, outputs["go"].ToString().data(), sizeof(go));
      if (go == 0) break;
    }
    if (done != iterations) {
      std::fprintf(stderr, "job per iteration: %d iterations\n", done);
      std::exit(1);
    }
  });
}

int Main(int argc, char** argv) {
  // Release builds of absl leave deadlock detection to debug builds;
  // Debian's keeps it on, which would bill every lock to the figures.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 10000;
  // "host": only the host-driven loops, for profiling.
  const bool host_only = argc > 2 && std::strcmp(argv[2], "host") == 0;
  SimBackend::Options sim;
  sim.num_devices = 2;
  sim.time_scale = 0;  // unpaced: the time measured is the host's
  std::unique_ptr<SimBackend> backend = SimBackend::Create(sim).value();
  Executor::Options options;
  options.backend = backend.get();
  std::unique_ptr<Executor> executor = Executor::Create(options).value();
  scheduler_tid = SchedulerTid();
  if (scheduler_tid < 0) {
    std::fprintf(stderr, "no thread named weft-scheduler\n");
    return 1;
  }

  std::printf(
      "%d iterations, 2 simulated devices, unpaced; microseconds per "
      "iteration (scheduler: the executor's scheduling thread's CPU time; "
      "ratio: CPU time of all threads against one job per iteration)\n",
      iterations);
  std::printf("%-5s %-20s %10s %10s %10s %8s\n", "body", "mode", "wall",
              "cpu_all", "scheduler", "ratio");
  std::vector<int> bodies = {2, 4, 16};
  if (host_only && argc > 3) bodies = {std::max(2, std::atoi(argv[3]))};
  for (int body : bodies) {
    LoopJob(*executor, body, 100, ControlMode::kHost);  // warm up
    if (host_only) {
      const Cost host =
          LoopJob(*executor, body, iterations, ControlMode::kHost);
      std::printf("%-5d %-20s %10.2f %10.2f %10.3f\n", body, "while_loop_host",
                  host.wall_us / iterations, host.cpu_us / iterations,
                  host.scheduler_us / iterations);
      continue;
    }
    const Cost per_job = JobPerIteration(*executor, body, iterations);
    const Cost host = LoopJob(*executor, body, iterations, ControlMode::kHost);
    const Cost device =
        LoopJob(*executor, body, iterations, ControlMode::kDevice);
    auto row = [&](const char* mode, const Cost& c) {
      std::printf("%-5d %-20s %10.2f %10.2f %10.3f %8.4f\n", body, mode,
                  c.wall_us / iterations, c.cpu_us / iterations,
                  c.scheduler_us / iterations, c.cpu_us / per_job.cpu_us);
    };
    row("job_per_iteration", per_job);
    row("while_loop_host", host);
    row("while_loop_device", device);
    // Per inner iteration; the outer loop's own nodes are spread over them.
    row("nested_host",
        NestedLoopJob(*executor, body, iterations, ControlMode::kHost));
    row("nested_device",
        NestedLoopJob(*executor, body, iterations, ControlMode::kDevice));
  }
  return 0;
}

}  // namespace
}  // namespace weft::runtime

int main(int argc, char** argv) { return weft::runtime::Main(argc, argv); }
