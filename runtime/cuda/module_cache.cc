#include "runtime/cuda/module_cache.h"

#include <cstring>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_status.h"
#include "scheduler/status_macros.h"

namespace weft::runtime::cuda {
namespace {

// The driver ABI the entry points are requested for (CUDA 12.0).
constexpr unsigned int kDriverApiVersion = 12000;

size_t ModuleHash(const scheduler::ModuleSpec& module) {
  return absl::HashOf(static_cast<int>(module.kind), module.code,
                      module.nvrtc_options);
}

template <typename Fn>
absl::Status Resolve(const char* symbol, Fn* fn) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  WEFT_CUDA_RETURN_IF_ERROR(cudaGetDriverEntryPointByVersion(
      symbol, &address, kDriverApiVersion, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || address == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("the CUDA driver does not provide ", symbol,
                     " (query result ", static_cast<int>(found), ")"));
  }
  *fn = reinterpret_cast<Fn>(address);
  return absl::OkStatus();
}

}  // namespace

ModuleCache::~ModuleCache() {
  absl::MutexLock lock(&mu_);
  if (api_ == nullptr) return;  // nothing was ever loaded
  for (auto& [key, bucket] : loaded_) {
    if (cudaSetDevice(key.first) != cudaSuccess) continue;
    for (const std::unique_ptr<Loaded>& loaded : bucket) {
      (void)api_->module_unload(loaded->module);
    }
  }
  (void)cudaGetLastError();
}

absl::StatusOr<const ModuleCache::DriverApi*> ModuleCache::Api() {
  if (api_ != nullptr) return api_.get();
  auto api = std::make_unique<DriverApi>();
  WEFT_RETURN_IF_ERROR(
      Resolve("cuModuleLoadDataEx", &api->module_load_data_ex));
  WEFT_RETURN_IF_ERROR(
      Resolve("cuModuleGetFunction", &api->module_get_function));
  WEFT_RETURN_IF_ERROR(Resolve("cuModuleUnload", &api->module_unload));
  WEFT_RETURN_IF_ERROR(Resolve("cuLaunchKernel", &api->launch_kernel));
  WEFT_RETURN_IF_ERROR(Resolve("cuFuncSetAttribute", &api->func_set_attribute));
  api_ = std::move(api);
  return api_.get();
}

ModuleCache::Loaded* ModuleCache::Find(int device, size_t hash,
                                       const scheduler::ModuleSpec& module) {
  auto it = loaded_.find(std::make_pair(device, hash));
  if (it == loaded_.end()) return nullptr;
  for (const std::unique_ptr<Loaded>& loaded : it->second) {
    if (loaded->kind == module.kind && loaded->code == module.code &&
        loaded->options == module.nvrtc_options) {
      return loaded.get();
    }
  }
  return nullptr;
}

absl::StatusOr<std::shared_ptr<const std::string>> ModuleCache::PtxFor(
    int device, const scheduler::ModuleSpec& module) {
  if (module.kind == scheduler::ModuleSpec::Kind::kPtx) {
    return std::make_shared<const std::string>(module.code);
  }
  int major = 0;
  int minor = 0;
  WEFT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
      &major, cudaDevAttrComputeCapabilityMajor, device));
  WEFT_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
      &minor, cudaDevAttrComputeCapabilityMinor, device));
  return compiler_->CompileToPtx(module.code, module.nvrtc_options,
                                 major * 10 + minor, module.name);
}

absl::StatusOr<ModuleCache::Loaded*> ModuleCache::Load(
    int device, const scheduler::ModuleSpec& module) {
  const size_t hash = ModuleHash(module);
  {
    absl::MutexLock lock(&mu_);
    if (Loaded* loaded = Find(device, hash, module)) return loaded;
  }
  // Compiling can take long: not under the lock. Two threads loading the
  // same new module may both compile it (the compiler caches one result).
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> ptx,
                        PtxFor(device, module));
  absl::MutexLock lock(&mu_);
  if (Loaded* loaded = Find(device, hash, module)) return loaded;
  WEFT_ASSIGN_OR_RETURN(const DriverApi* api, Api());
  auto entry = std::make_unique<Loaded>();
  entry->kind = module.kind;
  entry->code = module.code;
  entry->options = module.nvrtc_options;
  std::string log(8192, '\0');
  CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {
      log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
  const CUresult result =
      api->module_load_data_ex(&entry->module, ptx->c_str(), 2, keys, values);
  if (result != CUDA_SUCCESS) {
    log.resize(std::strlen(log.c_str()));
    const absl::Status status = WEFT_CUDA_STATUS(result);
    return WithLog(absl::Status(status.code(),
                                absl::StrCat("module '", module.name,
                                             "' does not load on device ",
                                             device, ": ", status.message())),
                   log);
  }
  auto& bucket = loaded_[std::make_pair(device, hash)];
  bucket.push_back(std::move(entry));
  return bucket.back().get();
}

absl::StatusOr<CUfunction> ModuleCache::Kernel(
    int device, const scheduler::ModuleSpec& module, absl::string_view kernel) {
  WEFT_ASSIGN_OR_RETURN(Loaded * loaded, Load(device, module));
  absl::MutexLock lock(&mu_);
  auto it = loaded->kernels.find(kernel);
  if (it != loaded->kernels.end()) return it->second;
  WEFT_ASSIGN_OR_RETURN(const DriverApi* api, Api());
  const std::string name(kernel);
  CUfunction function = nullptr;
  const CUresult result =
      api->module_get_function(&function, loaded->module, name.c_str());
  if (result != CUDA_SUCCESS) {
    const absl::Status status = WEFT_CUDA_STATUS(result);
    return absl::Status(
        status.code(),
        absl::StrCat("no kernel '", name, "' in module '", module.name,
                     "' (declare it extern \"C\" or give its mangled name): ",
                     status.message()));
  }
  loaded->kernels.emplace(name, function);
  return function;
}

absl::Status ModuleCache::Prepare(int device, const scheduler::Graph& graph) {
  for (size_t i = 0; i < graph.modules().size(); ++i) {
    absl::StatusOr<Loaded*> loaded = Load(device, graph.modules()[i]);
    if (!loaded.ok()) {
      return absl::Status(
          loaded.status().code(),
          absl::StrCat("graph.modules[", i, "]: ", loaded.status().message()));
    }
  }
  for (scheduler::NodeId n = 0; n < graph.num_nodes(); ++n) {
    const scheduler::NodeSpec& node = graph.node(n);
    if (!node.kernel.has_value()) continue;
    absl::StatusOr<CUfunction> function =
        Kernel(device, graph.module(node.kernel->module), node.kernel->kernel);
    if (!function.ok()) {
      return absl::Status(function.status().code(),
                          absl::StrCat("graph.nodes[", n, "].kernel.kernel: ",
                                       function.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ModuleCache::Launch(int device, const KernelLaunch& launch,
                                 cudaStream_t stream) {
  if (launch.user_kernel == nullptr || launch.module == nullptr) {
    return absl::InvalidArgumentError("not a user kernel launch");
  }
  const scheduler::KernelSpec& spec = *launch.user_kernel;
  WEFT_ASSIGN_OR_RETURN(CUfunction function,
                        Kernel(device, *launch.module, spec.kernel));
  // One 8-byte slot per parameter; the driver copies the values at launch.
  absl::InlinedVector<uint64_t, 16> storage(launch.args.size(), 0);
  absl::InlinedVector<void*, 16> params(launch.args.size(), nullptr);
  for (size_t i = 0; i < launch.args.size(); ++i) {
    std::visit(
        [&storage, i](const auto& value) {
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, DeviceBufferArg>) {
            storage[i] = value.ptr.address;
          } else {
            static_assert(sizeof(T) <= sizeof(uint64_t));
            std::memcpy(&storage[i], &value, sizeof(T));
          }
        },
        launch.args[i]);
    params[i] = &storage[i];
  }
  const DriverApi* api = nullptr;
  {
    absl::MutexLock lock(&mu_);
    WEFT_ASSIGN_OR_RETURN(api, Api());
  }
  absl::Status launched =
      EnsureSharedMemory(*api, function, spec.shared_memory_bytes);
  if (launched.ok()) {
    launched = WEFT_CUDA_STATUS(api->launch_kernel(
        function, spec.grid[0], spec.grid[1], spec.grid[2], spec.block[0],
        spec.block[1], spec.block[2], spec.shared_memory_bytes,
        reinterpret_cast<CUstream>(stream),
        params.empty() ? nullptr : params.data(), nullptr));
  }
  if (!launched.ok()) {
    return absl::Status(
        launched.code(),
        absl::StrCat("kernel '", spec.kernel, "' of module '",
                     launch.module->name, "': ", launched.message()));
  }
  return absl::OkStatus();
}

absl::Status ModuleCache::EnsureSharedMemory(const DriverApi& api,
                                             CUfunction function,
                                             uint32_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  // The limit is a property of the function, shared by every thread that
  // launches it: setting it to each launch's own size would let one thread
  // lower it between another's set and launch (which then fails). It only
  // grows, under the lock. Any nonzero request sets it, not only those over
  // 48 KiB, because the default limit is 48 KiB minus the kernel's static
  // shared memory.
  absl::MutexLock lock(&mu_);
  auto it = shared_memory_limit_.try_emplace(function, 0).first;
  if (bytes <= it->second) return absl::OkStatus();
  const absl::Status set = WEFT_CUDA_STATUS(api.func_set_attribute(
      function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
      static_cast<int>(bytes)));
  if (set.ok()) it->second = bytes;
  return set;
}

int ModuleCache::loaded_modules() const {
  absl::MutexLock lock(&mu_);
  int count = 0;
  for (const auto& [key, bucket] : loaded_) {
    count += static_cast<int>(bucket.size());
  }
  return count;
}

}  // namespace weft::runtime::cuda
