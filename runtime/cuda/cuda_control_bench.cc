// Device control flow on a GPU against the host round trips it replaces.
//
//   cuda_control_bench [iterations] [launches]   (defaults 10000, 2000)
//
// Loops: a loop of `iterations` iterations of a tiny body (axpy on one
// float, then `less` writing the int32 condition), run as a WHILE
// conditional node (CudaBackend::LaunchDeviceLoop, executable cached), by
// tail launch (LaunchDeviceLoopByTailLaunch: the body relaunches itself
// from the device) and driven by the host (per iteration: the body's two
// kernels, a copy of the condition back to pinned memory, a stream
// synchronization, the host reads the flag). Prints wall and host CPU (process
// CPU time, every thread) microseconds per iteration of each, and their ratios.
//
// Cases: a one-kernel branch graph (fill of one float) `launches` times,
// by cudaGraphLaunch from the host (LaunchDeviceGraph, executable cached),
// by a SWITCH conditional node (LaunchDeviceCase) and by device graph
// launch (LaunchDeviceCaseByDeviceLaunch: a host-launched one-kernel graph
// that launches the branch from the device); each back to back (enqueue
// all, then drain) and one at a time (enqueue, wait for its host
// callback). Prints microseconds per launch and ratios to the host launch.
//
// All figures come from one run on one device. Exits 0 with a message when
// no GPU is visible or the driver lacks conditional nodes.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/backend.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/device_graph.h"
#include "scheduler/graph.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

using scheduler::Access;
using scheduler::DType;

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

struct Cost {
  double wall_us = 0;
  double cpu_us = 0;
};

// Runs `work` and returns its wall and process CPU time divided by `per`.
absl::StatusOr<Cost> Measure(int per,
                             const std::function<absl::Status()>& work) {
  const double cpu0 = CpuSeconds();
  const absl::Time t0 = absl::Now();
  WEFT_RETURN_IF_ERROR(work());
  const double wall = absl::ToDoubleMicroseconds(absl::Now() - t0);
  const double cpu = (CpuSeconds() - cpu0) * 1e6;
  return Cost{wall / per, cpu / per};
}

DeviceBufferArg Buf(DevicePtr ptr, DType dtype, Access access) {
  return DeviceBufferArg{ptr, 4, dtype, access};
}

class Bench {
 public:
  explicit Bench(CudaBackend* backend) : backend_(backend) {}

  absl::Status Init() {
    WEFT_ASSIGN_OR_RETURN(stream_, backend_->CreateStream(0));
    WEFT_ASSIGN_OR_RETURN(body_stream_, backend_->CreateStream(0));
    WEFT_ASSIGN_OR_RETURN(one_, backend_->Allocate(0, 4));
    WEFT_ASSIGN_OR_RETURN(i_, backend_->Allocate(0, 4));
    WEFT_ASSIGN_OR_RETURN(go_, backend_->Allocate(0, 4));
    WEFT_ASSIGN_OR_RETURN(out_, backend_->Allocate(0, 4));
    WEFT_ASSIGN_OR_RETURN(selector_, backend_->Allocate(0, 4));
    WEFT_RETURN_IF_ERROR(Set(one_, 1.0f));
    const int32_t zero = 0;
    WEFT_RETURN_IF_ERROR(Set(selector_, zero));
    void* pinned = nullptr;
    if (cudaMallocHost(&pinned, sizeof(int32_t)) != cudaSuccess) {
      return absl::InternalError("cudaMallocHost failed");
    }
    flag_ = static_cast<int32_t*>(pinned);
    return absl::OkStatus();
  }
  ~Bench() {
    if (flag_ != nullptr) (void)cudaFreeHost(flag_);
  }

  template <typename T>
  absl::Status Set(DevicePtr ptr, T value) {
    WEFT_RETURN_IF_ERROR(
        backend_->CopyHostToDevice(ptr, &value, sizeof(T), stream_));
    return backend_->SynchronizeStream(stream_);
  }

  // Waits for the host callbacks of the work enqueued so far.
  absl::Status Drain() {
    absl::Notification done;
    absl::Status result;
    WEFT_RETURN_IF_ERROR(backend_->AddHostCallback(
        stream_, [&done, &result](absl::Status status) {
          result = std::move(status);
          done.Notify();
        }));
    done.WaitForNotification();
    return result;
  }

  KernelLaunch Inc() const {
    KernelLaunch launch;
    launch.op = "axpy";
    launch.args = {1.0f, Buf(one_, DType::kFloat32, Access::kRead),
                   Buf(i_, DType::kFloat32, Access::kReadWrite)};
    return launch;
  }
  KernelLaunch Test(int limit) const {
    KernelLaunch launch;
    launch.op = "less";
    launch.args = {Buf(i_, DType::kFloat32, Access::kRead),
                   static_cast<float>(limit),
                   Buf(go_, DType::kInt32, Access::kWrite)};
    return launch;
  }
  KernelLaunch FillOut(float value) const {
    KernelLaunch launch;
    launch.op = "fill";
    launch.args = {Buf(out_, DType::kFloat32, Access::kWrite),
                   static_cast<double>(value)};
    return launch;
  }

  absl::Status ResetCounter() {
    WEFT_RETURN_IF_ERROR(Set(i_, 0.0f));
    return Set(go_, int32_t{1});
  }

  // One device loop of `iterations` (a WHILE node, or by tail launch);
  // checks its count.
  absl::Status DeviceLoopOnce(int iterations, bool tail = false) {
    DeviceGraph body;
    body.device = 0;
    const int inc = body.AddKernel(Inc(), {});
    body.AddKernel(Test(iterations), {inc});
    DeviceLoop loop;
    loop.name = "bench";
    loop.body = &body;
    loop.condition = go_;
    loop.dtype = DType::kInt32;
    loop.max_iterations = static_cast<uint32_t>(iterations) + 1;
    loop.iterations = std::make_shared<std::atomic<int64_t>>(0);
    WEFT_RETURN_IF_ERROR(
        tail ? backend_->LaunchDeviceLoopByTailLaunch(loop, stream_)
             : backend_->LaunchDeviceLoop(loop, stream_, body_stream_));
    WEFT_RETURN_IF_ERROR(Drain());
    if (loop.iterations->load() != iterations) {
      return absl::InternalError("device loop ran the wrong number of times");
    }
    return absl::OkStatus();
  }

  // The same loop with the host deciding every iteration.
  absl::Status HostLoopOnce(int iterations) {
    int ran = 0;
    while (true) {
      WEFT_RETURN_IF_ERROR(backend_->Launch(Inc(), stream_));
      WEFT_RETURN_IF_ERROR(backend_->Launch(Test(iterations), stream_));
      ++ran;
      WEFT_RETURN_IF_ERROR(
          backend_->CopyDeviceToHost(flag_, go_, sizeof(int32_t), stream_));
      WEFT_RETURN_IF_ERROR(backend_->SynchronizeStream(stream_));
      if (*flag_ == 0) break;
    }
    if (ran != iterations) {
      return absl::InternalError("host loop ran the wrong number of times");
    }
    return absl::OkStatus();
  }

  DeviceGraph Branch(float value) const {
    DeviceGraph g;
    g.device = 0;
    g.AddKernel(FillOut(value), {});
    return g;
  }

  DeviceCase Case(DeviceGraph* branch) const {
    DeviceCase choice;
    choice.name = "bench";
    choice.branches = {branch};
    choice.selector = selector_;
    choice.dtype = DType::kInt32;
    choice.taken = std::make_shared<std::atomic<int64_t>>(-1);
    return choice;
  }

  enum class Path { kHost, kSwitch, kDeviceLaunch };

  absl::Status LaunchBranch(Path path, DeviceGraph& branch) {
    switch (path) {
      case Path::kHost:
        return backend_->LaunchDeviceGraph(branch, stream_);
      case Path::kSwitch:
        return backend_->LaunchDeviceCase(Case(&branch), stream_, body_stream_);
      case Path::kDeviceLaunch:
        return backend_->LaunchDeviceCaseByDeviceLaunch(Case(&branch), stream_);
    }
    return absl::OkStatus();
  }

  // Back to back: `launches` enqueued, then drained.
  absl::StatusOr<Cost> BranchBackToBack(Path path, int launches) {
    DeviceGraph branch = Branch(3);
    WEFT_RETURN_IF_ERROR(LaunchBranch(path, branch));  // build, upload
    WEFT_RETURN_IF_ERROR(Drain());
    return Measure(launches, [&]() -> absl::Status {
      for (int k = 0; k < launches; ++k) {
        WEFT_RETURN_IF_ERROR(LaunchBranch(path, branch));
      }
      return Drain();
    });
  }

  // One at a time: each launch waited for.
  absl::StatusOr<Cost> BranchWaited(Path path, int launches) {
    DeviceGraph branch = Branch(4);
    WEFT_RETURN_IF_ERROR(LaunchBranch(path, branch));
    WEFT_RETURN_IF_ERROR(Drain());
    return Measure(launches, [&]() -> absl::Status {
      for (int k = 0; k < launches; ++k) {
        WEFT_RETURN_IF_ERROR(LaunchBranch(path, branch));
        WEFT_RETURN_IF_ERROR(Drain());
      }
      return absl::OkStatus();
    });
  }

 private:
  CudaBackend* const backend_;
  StreamHandle stream_;
  StreamHandle body_stream_;
  DevicePtr one_, i_, go_, out_, selector_;
  int32_t* flag_ = nullptr;
};

int Main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 10000;
  const int launches = argc > 2 ? std::atoi(argv[2]) : 2000;
  if (iterations <= 0 || launches <= 0) {
    std::fprintf(stderr, "usage: %s [iterations > 0] [launches > 0]\n",
                 argv[0]);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create();
  if (!backend.ok()) {
    std::printf("no GPU, nothing to measure: %s\n",
                std::string(backend.status().message()).c_str());
    return 0;
  }
  if (!(*backend)->supports_device_loops()) {
    std::printf("the CUDA driver has no conditional graph nodes\n");
    return 0;
  }
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  const DeviceInfo info = (*backend)->device_info(0);
  std::printf("device 0: %s (%s), driver %d.%d\n", info.name.c_str(),
              info.uuid.c_str(), driver / 1000, driver % 1000 / 10);

  Bench bench(backend->get());
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "benchmark failed: %s\n", s.ToString().c_str());
    return 1;
  };
  if (absl::Status s = bench.Init(); !s.ok()) return fail(s);

  // Loops. A first device loop builds and caches the executable.
  if (absl::Status s = bench.ResetCounter(); !s.ok()) return fail(s);
  if (absl::Status s = bench.DeviceLoopOnce(iterations); !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = bench.ResetCounter(); !s.ok()) return fail(s);
  absl::StatusOr<Cost> device =
      Measure(iterations, [&] { return bench.DeviceLoopOnce(iterations); });
  if (!device.ok()) return fail(device.status());
  if (absl::Status s = bench.ResetCounter(); !s.ok()) return fail(s);
  if (absl::Status s = bench.DeviceLoopOnce(iterations, /*tail=*/true);
      !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = bench.ResetCounter(); !s.ok()) return fail(s);
  absl::StatusOr<Cost> tail = Measure(iterations, [&] {
    return bench.DeviceLoopOnce(iterations, /*tail=*/true);
  });
  if (!tail.ok()) return fail(tail.status());
  if (absl::Status s = bench.ResetCounter(); !s.ok()) return fail(s);
  absl::StatusOr<Cost> host =
      Measure(iterations, [&] { return bench.HostLoopOnce(iterations); });
  if (!host.ok()) return fail(host.status());
  std::printf("\nloop of %d iterations (body: axpy + less, int32 condition)\n",
              iterations);
  std::printf("%-28s %12s %12s\n", "path", "us/iter", "cpu us/iter");
  std::printf("%-28s %12.3f %12.3f\n", "WHILE node (device)", device->wall_us,
              device->cpu_us);
  std::printf("%-28s %12.3f %12.3f\n", "tail launch (device)", tail->wall_us,
              tail->cpu_us);
  std::printf("%-28s %12.3f %12.3f\n", "host-driven (copy + sync)",
              host->wall_us, host->cpu_us);
  std::printf("host-driven / WHILE: %.2fx wall, %.2fx host CPU\n",
              host->wall_us / device->wall_us,
              device->cpu_us > 0 ? host->cpu_us / device->cpu_us : 0.0);

  // Cases.
  using Path = Bench::Path;
  const std::pair<const char*, Path> paths[] = {
      {"host cudaGraphLaunch", Path::kHost},
      {"SWITCH node", Path::kSwitch},
      {"device graph launch", Path::kDeviceLaunch},
  };
  Cost back_to_back[3];
  Cost waited[3];
  for (int p = 0; p < 3; ++p) {
    absl::StatusOr<Cost> b = bench.BranchBackToBack(paths[p].second, launches);
    if (!b.ok()) return fail(b.status());
    absl::StatusOr<Cost> w = bench.BranchWaited(paths[p].second, launches);
    if (!w.ok()) return fail(w.status());
    back_to_back[p] = *b;
    waited[p] = *w;
  }
  std::printf("\na one-kernel branch graph, %d launches per path\n", launches);
  std::printf("%-24s %14s %14s %14s %14s\n", "path", "us/launch", "cpu us",
              "waited us", "vs host");
  for (int p = 0; p < 3; ++p) {
    std::printf("%-24s %14.3f %14.3f %14.3f %13.2fx\n", paths[p].first,
                back_to_back[p].wall_us, back_to_back[p].cpu_us,
                waited[p].wall_us,
                back_to_back[p].wall_us / back_to_back[0].wall_us);
  }
  std::printf("device launch / host launch: %.2fx back to back, %.2fx waited\n",
              back_to_back[2].wall_us / back_to_back[0].wall_us,
              waited[2].wall_us / waited[0].wall_us);
  const CudaBackend::DeviceControlStats stats =
      (*backend)->device_control_stats();
  std::printf("device control cache: %llu built, %llu hits, %llu updated\n",
              static_cast<unsigned long long>(stats.instantiations),
              static_cast<unsigned long long>(stats.cache_hits),
              static_cast<unsigned long long>(stats.updates));
  return 0;
}

}  // namespace
}  // namespace weft::runtime

int main(int argc, char** argv) { return weft::runtime::Main(argc, argv); }
