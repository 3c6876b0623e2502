#include "server/backend_factory.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/sim/sim_backend.h"
#include "scheduler/status_macros.h"

namespace weft::server {
namespace {

constexpr int kCudaHardwareQueues = 32;

// Stands in for an instantaneous copy in the planner's topology, which
// takes finite bandwidths only: a GB takes a microsecond.
constexpr double kInstantGbps = 1e6;

absl::StatusOr<scheduler::Topology> LoadTopology(const std::string& path,
                                                 int num_devices) {
  absl::StatusOr<scheduler::Topology> topology =
      scheduler::Topology::LoadCsvFile(path, num_devices);
  if (topology.ok()) return topology;
  absl::string_view message = topology.status().message();
  absl::ConsumePrefix(&message, "topology: ");
  return absl::Status(topology.status().code(),
                      absl::StrCat("--topology: ", message));
}

absl::StatusOr<CreatedBackend> CreateSim(const BackendOptions& options) {
  if (options.sim_devices < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sim_devices must be at least 1, got ", options.sim_devices));
  }
  if (options.sim_memory_bytes == 0) {
    return absl::InvalidArgumentError("--sim_memory_bytes must be positive");
  }
  runtime::SimBackend::Options sim;
  sim.num_devices = options.sim_devices;
  sim.memory_bytes = options.sim_memory_bytes;
  sim.host_to_device_gbps = options.sim_bandwidth_gbps;
  sim.device_to_host_gbps = options.sim_bandwidth_gbps;
  sim.device_to_device_gbps = options.sim_bandwidth_gbps;
  CreatedBackend created;
  if (!options.topology_file.empty()) {
    WEFT_ASSIGN_OR_RETURN(created.topology, LoadTopology(options.topology_file,
                                                         options.sim_devices));
    sim.bandwidth_gbps = created.topology->Matrix();
  } else {
    // Every copy at --sim_bandwidth_gbps (the simulator copies instantly
    // at a bandwidth that is not positive and finite).
    const double gbps = options.sim_bandwidth_gbps;
    const double planned =
        gbps > 0 && std::isfinite(gbps) ? gbps : kInstantGbps;
    WEFT_ASSIGN_OR_RETURN(
        created.topology,
        scheduler::Topology::FromMatrix(std::vector<std::vector<double>>(
            options.sim_devices + 1,
            std::vector<double>(options.sim_devices + 1, planned))));
  }
  created.max_concurrent_kernels = sim.max_concurrent_kernels;
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::SimBackend> backend,
                        runtime::SimBackend::Create(std::move(sim)));
  created.simulated = true;
  created.description = absl::StrCat(options.sim_devices, " simulated device",
                                     options.sim_devices == 1 ? "" : "s");
  created.backend = std::move(backend);
  return created;
}

absl::StatusOr<CreatedBackend> CreateCuda(const BackendOptions& options) {
  runtime::CudaBackend::Options cuda_options;
  cuda_options.device_launch_cases = options.cuda_device_launch_cases;
  cuda_options.device_launch_loops = options.cuda_device_launch_loops;
  absl::StatusOr<std::unique_ptr<runtime::CudaBackend>> cuda =
      runtime::CudaBackend::Create(cuda_options);
  if (!cuda.ok()) {
    return absl::Status(
        cuda.status().code(),
        absl::StrCat("--backend=cuda: ", cuda.status().message()));
  }
  std::unique_ptr<runtime::CudaBackend> backend = *std::move(cuda);
  CreatedBackend created;
  const int n = backend->device_count();
  created.description = absl::StrCat(n, " CUDA device", n == 1 ? "" : "s");
  for (int i = 0; i < n; ++i) {
    runtime::DeviceInfo info = backend->device_info(i);
    absl::StrAppend(&created.description, i == 0 ? ": " : ", ", info.name, " (",
                    info.uuid, ")");
  }
  if (!options.topology_file.empty()) {
    WEFT_ASSIGN_OR_RETURN(created.topology,
                          LoadTopology(options.topology_file, n));
  }
  // Every GPU since Kepler has 32 hardware work queues (the most
  // CUDA_DEVICE_MAX_CONNECTIONS allows): the kernels one device can take
  // from independent streams at once.
  created.max_concurrent_kernels = kCudaHardwareQueues;
  created.backend = std::move(backend);
  return created;
}

}  // namespace

int VisibleGpus() { return runtime::VisibleCudaDevices(); }

absl::StatusOr<CreatedBackend> CreateBackend(const BackendOptions& options) {
  if (options.kind == "sim") return CreateSim(options);
  if (options.kind == "cuda") return CreateCuda(options);
  if (options.kind == "auto") {
    if (VisibleGpus() > 0) return CreateCuda(options);
    return CreateSim(options);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--backend must be auto, sim or cuda, got '", options.kind, "'"));
}

}  // namespace weft::server
