// Per-kernel host overhead of CudaBackend::Launch against raw
// cudaLaunchKernel of the same zero-length spin kernel, and device graphs
// against per-node launches of the same DAG.
//
//   cuda_launch_bench [launches] [graph_nodes]   (defaults 20000, 1000)
//
// For each path it issues `launches` spin(0) kernels on one stream, then
// synchronizes, and prints the host time per launch while issuing and the
// time per kernel including the drain. Then a DAG of `graph_nodes` spin(0)
// nodes (four chains joined every eight nodes) runs as one device graph:
// first launch (capture and instantiation), cached relaunch with the same
// parameters, cached relaunch with new parameters (updated in place), and,
// for comparison, node by node through CudaBackend::Launch on four streams
// with events at the joins. Exits 0 with a message when no GPU is visible.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/backend.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_status.h"
#include "runtime/cuda/kernels.h"
#include "runtime/device_graph.h"
#include "scheduler/status_macros.h"

namespace weft::runtime {
namespace {

struct Timing {
  double issue_us_per_launch = 0;
  double total_us_per_launch = 0;
};

absl::StatusOr<Timing> TimeBackend(Backend& backend, int launches) {
  absl::StatusOr<StreamHandle> stream = backend.CreateStream(0);
  if (!stream.ok()) return stream.status();
  KernelLaunch spin;
  spin.op = "spin";
  spin.cost_us = 0;
  for (int i = 0; i < 100; ++i) {  // warm-up
    if (absl::Status s = backend.Launch(spin, *stream); !s.ok()) return s;
  }
  if (absl::Status s = backend.SynchronizeStream(*stream); !s.ok()) return s;
  const absl::Time start = absl::Now();
  for (int i = 0; i < launches; ++i) {
    if (absl::Status s = backend.Launch(spin, *stream); !s.ok()) return s;
  }
  const absl::Time issued = absl::Now();
  if (absl::Status s = backend.SynchronizeStream(*stream); !s.ok()) return s;
  const absl::Time drained = absl::Now();
  if (absl::Status s = backend.DestroyStream(*stream); !s.ok()) return s;
  return Timing{absl::ToDoubleMicroseconds(issued - start) / launches,
                absl::ToDoubleMicroseconds(drained - start) / launches};
}

absl::StatusOr<Timing> TimeRaw(int launches) {
  WEFT_CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
  cudaStream_t stream = nullptr;
  WEFT_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const void* kernel = cuda::SpinKernelFunction();
  unsigned long long duration_ns = 0;
  void* args[] = {&duration_ns};
  for (int i = 0; i < 100; ++i) {  // warm-up
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, stream));
  }
  WEFT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const absl::Time start = absl::Now();
  for (int i = 0; i < launches; ++i) {
    WEFT_CUDA_RETURN_IF_ERROR(
        cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, stream));
  }
  const absl::Time issued = absl::Now();
  WEFT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const absl::Time drained = absl::Now();
  WEFT_CUDA_RETURN_IF_ERROR(cudaStreamDestroy(stream));
  return Timing{absl::ToDoubleMicroseconds(issued - start) / launches,
                absl::ToDoubleMicroseconds(drained - start) / launches};
}

constexpr int kChains = 4;
constexpr int kJoinEvery = 8;

// Four chains of spin nodes; every kJoinEvery-th row, each chain's node
// also waits for the previous row of every chain.
DeviceGraph SpinDag(int nodes, double cost_us) {
  DeviceGraph g;
  g.device = 0;
  KernelLaunch spin;
  spin.op = "spin";
  spin.cost_us = cost_us;
  for (int i = 0; i < nodes; ++i) {
    const int row = i / kChains;
    std::vector<int> deps;
    if (row > 0) {
      if (row % kJoinEvery == 0) {
        for (int c = 0; c < kChains; ++c)
          deps.push_back((row - 1) * kChains + c);
      } else {
        deps.push_back(i - kChains);
      }
    }
    g.AddKernel(spin, std::move(deps));
  }
  return g;
}

struct GraphTiming {
  Timing first;
  Timing cached;
  Timing updated;
  Timing per_node;
};

// Host time to issue and time to drain, per node, of `issue`.
template <typename F>
absl::StatusOr<Timing> TimeIssue(Backend& backend, StreamHandle stream,
                                 int nodes, F issue) {
  const absl::Time start = absl::Now();
  if (absl::Status s = issue(); !s.ok()) return s;
  const absl::Time issued = absl::Now();
  if (absl::Status s = backend.SynchronizeStream(stream); !s.ok()) return s;
  const absl::Time drained = absl::Now();
  return Timing{absl::ToDoubleMicroseconds(issued - start) / nodes,
                absl::ToDoubleMicroseconds(drained - start) / nodes};
}

absl::StatusOr<GraphTiming> TimeGraphs(Backend& backend, int nodes) {
  GraphTiming t;
  WEFT_ASSIGN_OR_RETURN(StreamHandle stream, backend.CreateStream(0));
  const DeviceGraph dag = SpinDag(nodes, 0);
  const DeviceGraph other = SpinDag(nodes, 0.001);  // new parameters
  WEFT_ASSIGN_OR_RETURN(t.first, TimeIssue(backend, stream, nodes, [&] {
                          return backend.LaunchDeviceGraph(dag, stream);
                        }));
  WEFT_ASSIGN_OR_RETURN(t.cached, TimeIssue(backend, stream, nodes, [&] {
                          return backend.LaunchDeviceGraph(dag, stream);
                        }));
  WEFT_ASSIGN_OR_RETURN(t.updated, TimeIssue(backend, stream, nodes, [&] {
                          return backend.LaunchDeviceGraph(other, stream);
                        }));
  // Node by node: chain c on stream c, joins through events.
  std::vector<StreamHandle> streams = {stream};
  std::vector<EventHandle> done;
  for (int c = 1; c < kChains; ++c) {
    WEFT_ASSIGN_OR_RETURN(StreamHandle s, backend.CreateStream(0));
    streams.push_back(s);
  }
  for (int c = 0; c < kChains; ++c) {
    WEFT_ASSIGN_OR_RETURN(EventHandle e, backend.CreateEvent(0));
    done.push_back(e);
  }
  KernelLaunch spin;
  spin.op = "spin";
  auto per_node = [&]() -> absl::Status {
    for (int i = 0; i < nodes; ++i) {
      const int row = i / kChains;
      const int c = i % kChains;
      if (row > 0 && row % kJoinEvery == 0) {
        for (int o = 0; o < kChains; ++o) {
          if (o == c) continue;
          WEFT_RETURN_IF_ERROR(backend.StreamWaitEvent(streams[c], done[o]));
        }
      }
      WEFT_RETURN_IF_ERROR(backend.Launch(spin, streams[c]));
      if ((row + 1) % kJoinEvery == 0) {
        WEFT_RETURN_IF_ERROR(backend.RecordEvent(done[c], streams[c]));
      }
    }
    // Join everything into the first stream, which TimeIssue drains.
    for (int c = 1; c < kChains; ++c) {
      WEFT_RETURN_IF_ERROR(backend.RecordEvent(done[c], streams[c]));
      WEFT_RETURN_IF_ERROR(backend.StreamWaitEvent(streams[0], done[c]));
    }
    return absl::OkStatus();
  };
  WEFT_RETURN_IF_ERROR(per_node());  // warm-up
  WEFT_RETURN_IF_ERROR(backend.SynchronizeStream(stream));
  WEFT_ASSIGN_OR_RETURN(t.per_node,
                        TimeIssue(backend, stream, nodes, per_node));
  for (StreamHandle s : streams) {
    WEFT_RETURN_IF_ERROR(backend.SynchronizeStream(s));
    WEFT_RETURN_IF_ERROR(backend.DestroyStream(s));
  }
  for (EventHandle e : done) WEFT_RETURN_IF_ERROR(backend.DestroyEvent(e));
  return t;
}

int Main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (launches <= 0) {
    std::fprintf(stderr, "usage: %s [launches > 0]\n", argv[0]);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create();
  if (!backend.ok()) {
    std::printf("no GPU, nothing to measure: %s\n",
                std::string(backend.status().message()).c_str());
    return 0;
  }
  const DeviceInfo info = (*backend)->device_info(0);
  std::printf("device 0: %s (%s), %d spin(0) launches per path\n",
              info.name.c_str(), info.uuid.c_str(), launches);

  absl::StatusOr<Timing> raw = TimeRaw(launches);
  absl::StatusOr<Timing> through_backend = TimeBackend(**backend, launches);
  for (const absl::Status& s : {raw.status(), through_backend.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "benchmark failed: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("%-22s %14s %14s\n", "path", "issue us/op", "total us/op");
  std::printf("%-22s %14.3f %14.3f\n", "raw cudaLaunchKernel",
              raw->issue_us_per_launch, raw->total_us_per_launch);
  std::printf("%-22s %14.3f %14.3f\n", "CudaBackend::Launch",
              through_backend->issue_us_per_launch,
              through_backend->total_us_per_launch);
  std::printf("backend overhead: %+.3f us per launch (issue)\n",
              through_backend->issue_us_per_launch - raw->issue_us_per_launch);

  const int graph_nodes = argc > 2 ? std::atoi(argv[2]) : 1000;
  if (graph_nodes <= 0) return 0;
  absl::StatusOr<GraphTiming> graphs = TimeGraphs(**backend, graph_nodes);
  if (!graphs.ok()) {
    std::fprintf(stderr, "graph benchmark failed: %s\n",
                 graphs.status().ToString().c_str());
    return 1;
  }
  std::printf("\nDAG of %d spin(0) nodes (%d chains, joined every %d rows)\n",
              graph_nodes, kChains, kJoinEvery);
  std::printf("%-30s %14s %14s\n", "path", "issue us/node", "total us/node");
  const std::pair<const char*, Timing> rows[] = {
      {"device graph, first launch", graphs->first},
      {"device graph, cached", graphs->cached},
      {"device graph, cached+update", graphs->updated},
      {"node by node (4 streams)", graphs->per_node},
  };
  for (const auto& [name, timing] : rows) {
    std::printf("%-30s %14.3f %14.3f\n", name, timing.issue_us_per_launch,
                timing.total_us_per_launch);
  }
  const CudaBackend::GraphCacheStats stats = (*backend)->graph_cache_stats();
  std::printf("graph cache: %llu instantiated, %llu hits, %llu updated\n",
              static_cast<unsigned long long>(stats.instantiations),
              static_cast<unsigned long long>(stats.cache_hits),
              static_cast<unsigned long long>(stats.updates));
  return 0;
}

}  // namespace
}  // namespace weft::runtime

int main(int argc, char** argv) { return weft::runtime::Main(argc, argv); }
