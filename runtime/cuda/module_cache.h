// User modules loaded on CUDA devices, and the launches of their kernels.
//
// A module (scheduler::ModuleSpec) is CUDA C++ source, compiled to PTX by
// the NvrtcCompiler for each device's compute capability, or PTX as given.
// The PTX is loaded into the device's primary context with the driver API
// (cuModuleLoadDataEx, which JIT-compiles it), and kernels are looked up by
// name (cuModuleGetFunction) and launched with cuLaunchKernel. Loaded
// modules and resolved kernels are cached per device, keyed by a hash of the
// module's code and options (checked against the code itself, so a
// collision never mixes up modules); they live until the cache is
// destroyed.
//
// The driver API is reached through the CUDA runtime's entry-point query
// (cudaGetDriverEntryPointByVersion) rather than by linking libcuda, so
// binaries that contain this code still start on machines without a
// driver. Every error goes through cuda_status.h: code that does not
// compile or load, and kernels missing from their module, are
// INVALID_ARGUMENT with the compiler's or JIT linker's log.
//
// Thread-safe. Methods that take a `device` require the caller to have made
// it current (cudaSetDevice) on the calling thread.
#ifndef WEFT_RUNTIME_CUDA_MODULE_CACHE_H_
#define WEFT_RUNTIME_CUDA_MODULE_CACHE_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/backend.h"
#include "runtime/cuda/nvrtc_compiler.h"
#include "scheduler/graph.h"

namespace weft::runtime::cuda {

class ModuleCache {
 public:
  // `compiler` is not owned and must outlive the cache.
  explicit ModuleCache(NvrtcCompiler* compiler) : compiler_(compiler) {}
  ModuleCache(const ModuleCache&) = delete;
  ModuleCache& operator=(const ModuleCache&) = delete;
  // Unloads every module. REQUIRES: none of their kernels is still running
  // (synchronize the devices first).
  ~ModuleCache();

  // Compiles (CUDA source), loads `module` on `device` and resolves
  // `kernel` in it, from the cache when it can.
  absl::StatusOr<CUfunction> Kernel(int device,
                                    const scheduler::ModuleSpec& module,
                                    absl::string_view kernel)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Loads every module of `graph` on `device` and resolves every kernel its
  // nodes launch. Errors name the field: "graph.modules[i]: ..." for code
  // that does not compile or load, "graph.nodes[j].kernel.kernel: ..." for
  // a kernel its module lacks.
  absl::Status Prepare(int device, const scheduler::Graph& graph)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Enqueues `launch` (a user kernel: user_kernel and module set) on
  // `stream`, with launch.args as the kernel's parameters in order: buffers
  // as device pointers, scalars by value. REQUIRES: the caller checked that
  // the buffers lie on `device`.
  absl::Status Launch(int device, const KernelLaunch& launch,
                      cudaStream_t stream) ABSL_LOCKS_EXCLUDED(mu_);

  // Modules loaded so far, over all devices (for tests).
  int loaded_modules() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Driver API functions, resolved once.
  struct DriverApi {
    decltype(&::cuModuleLoadDataEx) module_load_data_ex = nullptr;
    decltype(&::cuModuleGetFunction) module_get_function = nullptr;
    decltype(&::cuModuleUnload) module_unload = nullptr;
    decltype(&::cuLaunchKernel) launch_kernel = nullptr;
    decltype(&::cuFuncSetAttribute) func_set_attribute = nullptr;
  };
  struct Loaded {
    scheduler::ModuleSpec::Kind kind;
    std::string code;
    std::vector<std::string> options;
    CUmodule module = nullptr;
    absl::flat_hash_map<std::string, CUfunction> kernels;
  };

  // Raises `function`'s dynamic shared memory limit to at least `bytes`
  // (never lowers it), so that every launch asking for up to the largest
  // amount requested so far is allowed.
  absl::Status EnsureSharedMemory(const DriverApi& api, CUfunction function,
                                  uint32_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<const DriverApi*> Api() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The module loaded on `device`, compiling and loading it first if
  // needed. The pointer stays valid until the cache is destroyed.
  absl::StatusOr<Loaded*> Load(int device, const scheduler::ModuleSpec& module)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The module as loaded on `device` under `hash`, or null.
  Loaded* Find(int device, size_t hash, const scheduler::ModuleSpec& module)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The PTX to load for `module` on `device` (compiled outside the lock).
  absl::StatusOr<std::shared_ptr<const std::string>> PtxFor(
      int device, const scheduler::ModuleSpec& module) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  NvrtcCompiler* const compiler_;  // not owned

  mutable absl::Mutex mu_;
  std::unique_ptr<DriverApi> api_ ABSL_GUARDED_BY(mu_);
  // By (device, hash of kind, code and options); a bucket holds the rare
  // modules whose hashes collide.
  absl::flat_hash_map<std::pair<int, size_t>,
                      std::vector<std::unique_ptr<Loaded>>>
      loaded_ ABSL_GUARDED_BY(mu_);
  // The dynamic shared memory limit set on each kernel
  // (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); absent: the default.
  absl::flat_hash_map<CUfunction, uint32_t> shared_memory_limit_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_MODULE_CACHE_H_
