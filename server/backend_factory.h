// Chooses and creates the device backend weftd runs on.
//
// "sim" creates a SimBackend with the configured number of simulated GPUs;
// "cuda" creates a CudaBackend over the visible GPUs; "auto" uses CUDA when
// a GPU is visible (and the build has the CUDA toolkit), and the simulator
// otherwise.
//
// It also settles the machine the planner models, so that its estimates
// describe what the backend does: the copy bandwidths (a GrCUDA-style CSV
// file given as topology_file, else, for the simulator, the bandwidths it
// was created with) and, for the simulator, its kernel slots per device.
// With a topology file the simulator takes its bandwidths from the file.
#ifndef WEFT_SERVER_BACKEND_FACTORY_H_
#define WEFT_SERVER_BACKEND_FACTORY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "scheduler/topology.h"

namespace weft::server {

struct BackendOptions {
  std::string kind = "auto";  // auto | sim | cuda
  int sim_devices = 2;
  uint64_t sim_memory_bytes = uint64_t{16} << 30;
  double sim_bandwidth_gbps = 25;  // host<->device and peer copies
  // Copy bandwidths in GrCUDA's CSV format (`From,To,GB/s`, -1 = host),
  // for the planner and the simulator; "" derives them as described above.
  std::string topology_file;
  // CudaBackend::Options: control nodes decided on the device by device
  // graph launch rather than conditional nodes.
  bool cuda_device_launch_cases = false;
  bool cuda_device_launch_loops = false;
};

struct CreatedBackend {
  std::unique_ptr<runtime::Backend> backend;
  bool simulated = false;
  // For the start-up banner, e.g. "2 simulated devices".
  std::string description;
  // The copy bandwidths the planner should assume; unset: the planner's
  // default (a CUDA backend without a topology file).
  std::optional<scheduler::Topology> topology;
  // Kernels one device runs at once, for the planner's cost model; 0: the
  // planner's default.
  int max_concurrent_kernels = 0;
};

// CUDA devices this process can use: 0 without a GPU, without a driver or
// in builds without the CUDA toolkit.
int VisibleGpus();

// INVALID_ARGUMENT for an unknown kind, bad simulator sizes or a malformed
// topology file (naming the file and line); NOT_FOUND for a topology file
// that cannot be read; UNAVAILABLE for "cuda" without a usable GPU.
// Thread-safe.
absl::StatusOr<CreatedBackend> CreateBackend(const BackendOptions& options);

}  // namespace weft::server

#endif  // WEFT_SERVER_BACKEND_FACTORY_H_
