// Device allocations per job with and without the executor's memory pools.
//
// A job of 64 buffers (4 KiB to about 300 KiB) touched by a chain of nodes
// spread over two simulated devices (unpaced clock, instantaneous copies) runs
// `jobs` times after one warm-up job, first with the pools caching (the
// default), then with caching off (memory_pool_max_cached_bytes = 0, i.e.
// allocate and free per job as without a pool). Printed per mode: backend
// allocations and frees per job after the warm-up, and the wall time per
// job. The simulator's allocations are cheap host allocations; a device's
// are not (cudaMalloc/cudaFree take far longer and cudaFree synchronizes
// the device), so `alloc_us` optionally charges each backend
// Allocate/Free that many microseconds on the calling thread to show what
// the pool saves where allocation has a cost.
//
//   bazel run -c opt //runtime:memory_pool_bench -- [jobs] [alloc_us]
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/executor.h"
#include "runtime/forwarding_backend.h"
#include "runtime/memory_pool.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/graph.h"
#include "scheduler/planner.h"

namespace weft::runtime {
namespace {

constexpr int kBuffers = 64;

// Counts backend allocations and frees, charging each `cost`.
class CostlyAllocBackend final : public ForwardingBackend {
 public:
  CostlyAllocBackend(Backend* backend, absl::Duration cost)
      : ForwardingBackend(backend), cost_(cost) {}
  absl::StatusOr<DevicePtr> Allocate(int device, uint64_t bytes) override {
    ++allocations;
    if (cost_ > absl::ZeroDuration()) absl::SleepFor(cost_);
    return wrapped()->Allocate(device, bytes);
  }
  absl::Status Free(DevicePtr ptr) override {
    ++frees;
    if (cost_ > absl::ZeroDuration()) absl::SleepFor(cost_);
    return wrapped()->Free(ptr);
  }
  std::atomic<int64_t> allocations{0};
  std::atomic<int64_t> frees{0};

 private:
  const absl::Duration cost_;
};

scheduler::Graph MakeGraph() {
  std::vector<scheduler::BufferSpec> buffers(kBuffers);
  for (int b = 0; b < kBuffers; ++b) {
    buffers[b].name = absl::StrCat("b", b);
    // 4 KiB .. about 300 KiB, sizes that are not powers of two.
    buffers[b].size_bytes = (uint64_t{4096} << (b % 7)) + 1000 * b;
    buffers[b].dtype = scheduler::DType::kBytes;
  }
  std::vector<scheduler::NodeSpec> nodes(kBuffers);
  for (int i = 0; i < kBuffers; ++i) {
    nodes[i].name = absl::StrCat("n", i);
    nodes[i].op = "spin";
    nodes[i].cost_us = 1;
    nodes[i].args.push_back(scheduler::BufferUse{i, scheduler::Access::kWrite});
    if (i > 0) {
      nodes[i].args.push_back(
          scheduler::BufferUse{i - 1, scheduler::Access::kRead});
    }
  }
  return scheduler::Graph("pool_bench", std::move(buffers), std::move(nodes));
}

struct Figures {
  double allocations_per_job = 0;
  double frees_per_job = 0;
  double us_per_job = 0;
};

Figures Run(std::shared_ptr<const scheduler::Graph> graph,
            std::shared_ptr<const scheduler::Plan> plan, int jobs,
            uint64_t max_cached, absl::Duration alloc_cost) {
  SimBackend::Options sim;
  sim.num_devices = 2;
  sim.time_scale = 0;
  sim.host_to_device_gbps = 0;  // instantaneous
  sim.device_to_host_gbps = 0;
  sim.device_to_device_gbps = 0;
  auto backend = SimBackend::Create(sim).value();
  CostlyAllocBackend costly(backend.get(), alloc_cost);
  Executor::Options options;
  options.backend = &costly;
  options.memory_pool_max_cached_bytes = max_cached;
  auto executor = Executor::Create(options).value();
  int64_t allocations = 0;
  int64_t frees = 0;
  absl::Time start;
  for (int job = 0; job <= jobs; ++job) {  // job 0 warms the pools up
    if (job == 1) {
      allocations = costly.allocations.load();
      frees = costly.frees.load();
      start = absl::Now();
    }
    absl::Notification done;
    absl::Status status;
    JobCallbacks callbacks;
    callbacks.on_done = [&](absl::Status s, scheduler::NodeId, HostBuffers) {
      status = std::move(s);
      done.Notify();
    };
    if (!executor->Start(graph, plan, std::move(callbacks)).ok()) {
      std::fprintf(stderr, "start failed\n");
      std::exit(1);
    }
    done.WaitForNotification();
    if (!status.ok()) {
      std::fprintf(stderr, "job failed: %s\n", status.ToString().c_str());
      std::exit(1);
    }
  }
  Figures f;
  f.us_per_job = absl::ToDoubleMicroseconds(absl::Now() - start) / jobs;
  f.allocations_per_job =
      static_cast<double>(costly.allocations.load() - allocations) / jobs;
  f.frees_per_job = static_cast<double>(costly.frees.load() - frees) / jobs;
  return f;
}

int Main(int argc, char** argv) {
  const int jobs = argc > 1 ? std::atoi(argv[1]) : 200;
  const int alloc_us = argc > 2 ? std::atoi(argv[2]) : 0;
  if (jobs < 1 || alloc_us < 0) {
    std::fprintf(stderr, "usage: memory_pool_bench [jobs>=1] [alloc_us>=0]\n");
    return 2;
  }
  auto graph = std::make_shared<const scheduler::Graph>(MakeGraph());
  scheduler::PlannerOptions planner;
  planner.num_devices = 2;
  absl::StatusOr<scheduler::Plan> planned = PlanGraph(*graph, planner);
  if (!planned.ok()) {
    std::fprintf(stderr, "planning failed: %s\n",
                 planned.status().ToString().c_str());
    return 1;
  }
  auto plan = std::make_shared<const scheduler::Plan>(*std::move(planned));
  const absl::Duration cost = absl::Microseconds(alloc_us);
  std::printf(
      "%d jobs of %d buffers on 2 simulated devices, %d us charged "
      "per backend allocate/free\n",
      jobs, kBuffers, alloc_us);
  const Figures pooled = Run(graph, plan, jobs, MemoryPool::kUnlimited, cost);
  const Figures plain = Run(graph, plan, jobs, 0, cost);
  std::printf("pool on : %.2f allocations/job, %.2f frees/job, %.1f us/job\n",
              pooled.allocations_per_job, pooled.frees_per_job,
              pooled.us_per_job);
  std::printf("pool off: %.2f allocations/job, %.2f frees/job, %.1f us/job\n",
              plain.allocations_per_job, plain.frees_per_job, plain.us_per_job);
  return 0;
}

}  // namespace
}  // namespace weft::runtime

int main(int argc, char** argv) { return weft::runtime::Main(argc, argv); }
