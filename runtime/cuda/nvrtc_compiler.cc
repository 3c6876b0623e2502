#include "runtime/cuda/nvrtc_compiler.h"

#include <nvrtc.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_status.h"

namespace weft::runtime::cuda {
namespace {

// Owns an nvrtcProgram.
class Program {
 public:
  Program() = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() {
    if (program_ != nullptr) (void)nvrtcDestroyProgram(&program_);
  }
  nvrtcProgram* out() { return &program_; }
  nvrtcProgram get() const { return program_; }

 private:
  nvrtcProgram program_ = nullptr;
};

std::string ProgramLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) {
    return "";
  }
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // the terminating NUL
  return log;
}

}  // namespace

absl::StatusOr<int> NvrtcCompiler::TargetArchitecture(int compute_capability) {
  int count = 0;
  WEFT_CUDA_RETURN_IF_ERROR(nvrtcGetNumSupportedArchs(&count));
  std::vector<int> archs(count);
  WEFT_CUDA_RETURN_IF_ERROR(nvrtcGetSupportedArchs(archs.data()));
  int best = -1;
  for (int arch : archs) {
    if (arch <= compute_capability && arch > best) best = arch;
  }
  if (best < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("NVRTC cannot compile for compute capability ",
                     compute_capability / 10, ".", compute_capability % 10,
                     " or older: its oldest target is compute_",
                     archs.empty() ? 0 : archs.front()));
  }
  return best;
}

std::string NvrtcCompiler::Key(absl::string_view source,
                               absl::Span<const std::string> options,
                               int arch) {
  std::string key = absl::StrCat(arch, "\n");
  for (const std::string& option : options) {
    absl::StrAppend(&key, option.size(), ":", option, "\n");
  }
  absl::StrAppend(&key, source);
  return key;
}

absl::StatusOr<std::shared_ptr<const std::string>> NvrtcCompiler::CompileToPtx(
    absl::string_view source, absl::Span<const std::string> options,
    int compute_capability, absl::string_view name) {
  absl::StatusOr<int> arch = TargetArchitecture(compute_capability);
  if (!arch.ok()) return arch.status();
  std::string key = Key(source, options, *arch);
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      ++cache_hits_;
      return it->second;
    }
  }

  Program program;
  const std::string source_text(source);
  const std::string program_name = absl::StrCat(name, ".cu");
  WEFT_CUDA_RETURN_IF_ERROR(
      nvrtcCreateProgram(program.out(), source_text.c_str(),
                         program_name.c_str(), 0, nullptr, nullptr));
  std::vector<std::string> all_options(options.begin(), options.end());
  all_options.push_back(absl::StrCat("--gpu-architecture=compute_", *arch));
  std::vector<const char*> argv;
  argv.reserve(all_options.size());
  for (const std::string& option : all_options) argv.push_back(option.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(
      program.get(), static_cast<int>(argv.size()), argv.data());
  {
    absl::MutexLock lock(&mu_);
    ++compiles_;
  }
  if (compiled != NVRTC_SUCCESS) {
    absl::Status status = WEFT_CUDA_STATUS(compiled);
    return WithLog(
        absl::Status(status.code(),
                     absl::StrCat("module '", name, "' does not compile for ",
                                  "compute_", *arch, ": ", status.message())),
        ProgramLog(program.get()));
  }
  size_t size = 0;
  WEFT_CUDA_RETURN_IF_ERROR(nvrtcGetPTXSize(program.get(), &size));
  auto ptx = std::make_shared<std::string>(size, '\0');
  WEFT_CUDA_RETURN_IF_ERROR(nvrtcGetPTX(program.get(), ptx->data()));
  if (!ptx->empty() && ptx->back() == '\0') ptx->pop_back();

  absl::MutexLock lock(&mu_);
  auto [it, inserted] = cache_.emplace(key, std::move(ptx));
  std::shared_ptr<const std::string> result = it->second;
  if (inserted) {
    order_.push_back(std::move(key));
    while (order_.size() > options_.max_entries) {
      cache_.erase(order_.front());
      order_.pop_front();
    }
  }
  return result;
}

int64_t NvrtcCompiler::compiles() const {
  absl::MutexLock lock(&mu_);
  return compiles_;
}

int64_t NvrtcCompiler::cache_hits() const {
  absl::MutexLock lock(&mu_);
  return cache_hits_;
}

}  // namespace weft::runtime::cuda
