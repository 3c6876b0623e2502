// Chooses and creates the device backend weftd runs on.
//
// "sim" creates a SimBackend with the configured number of simulated GPUs;
// "cuda" creates a CudaBackend over the visible GPUs; "auto" uses CUDA when
// a GPU is visible (and the build has the CUDA toolkit), and the simulator
// otherwise.
#ifndef WEFT_SERVER_BACKEND_FACTORY_H_
#define WEFT_SERVER_BACKEND_FACTORY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/backend.h"

namespace weft::server {

struct BackendOptions {
  std::string kind = "auto";  // auto | sim | cuda
  int sim_devices = 2;
  uint64_t sim_memory_bytes = uint64_t{16} << 30;
  double sim_bandwidth_gbps = 25;  // host<->device and peer copies
};

struct CreatedBackend {
  std::unique_ptr<runtime::Backend> backend;
  bool simulated = false;
  // For the start-up banner, e.g. "2 simulated devices".
  std::string description;
};

// CUDA devices this process can use: 0 without a GPU, without a driver or
// in builds without the CUDA toolkit.
int VisibleGpus();

// INVALID_ARGUMENT for an unknown kind or bad simulator sizes; UNAVAILABLE
// for "cuda" without a usable GPU. Thread-safe.
absl::StatusOr<CreatedBackend> CreateBackend(const BackendOptions& options);

}  // namespace weft::server

#endif  // WEFT_SERVER_BACKEND_FACTORY_H_
