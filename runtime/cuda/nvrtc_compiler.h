// Compiles the CUDA C++ source of user modules to PTX with NVRTC.
//
// NVRTC runs on the host CPU (no GPU needed). The compiler targets one
// virtual architecture per call (compute_XY for a device of compute
// capability X.Y, lowered to the newest one this NVRTC supports when the
// device is newer), and the PTX it returns is what the driver loads and
// JIT-compiles for the device. Results are cached by a hash of (source,
// options, architecture): compiling the same module for the same
// architecture again costs a lookup. Sources with errors answer
// INVALID_ARGUMENT whose message carries the compile log; the failure is not
// cached (the next attempt compiles again).
//
// Thread-safe. Compiles run outside the lock, so two threads compiling the
// same new source may both compile it; the first result is kept.
#ifndef WEFT_RUNTIME_CUDA_NVRTC_COMPILER_H_
#define WEFT_RUNTIME_CUDA_NVRTC_COMPILER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace weft::runtime::cuda {

class NvrtcCompiler {
 public:
  struct Options {
    // Compiled programs kept; the oldest is dropped beyond this.
    size_t max_entries = 256;
  };

  explicit NvrtcCompiler(Options options) : options_(options) {}
  NvrtcCompiler() : NvrtcCompiler(Options()) {}
  NvrtcCompiler(const NvrtcCompiler&) = delete;
  NvrtcCompiler& operator=(const NvrtcCompiler&) = delete;

  // The PTX of `source` compiled with `options` (NVRTC command-line options,
  // without --gpu-architecture) for compute capability `compute_capability`
  // (major * 10 + minor, e.g. 90). `name` names the program in the log and
  // in errors. INVALID_ARGUMENT with the compile log when the source does
  // not compile or an option is bad; other NVRTC failures as cuda_status.h
  // maps them. The result is shared with the cache and never changes.
  absl::StatusOr<std::shared_ptr<const std::string>> CompileToPtx(
      absl::string_view source, absl::Span<const std::string> options,
      int compute_capability, absl::string_view name) ABSL_LOCKS_EXCLUDED(mu_);

  // The virtual architecture (major * 10 + minor) compiled for a device of
  // `compute_capability`: the newest one NVRTC supports that is not newer.
  // INVALID_ARGUMENT when NVRTC supports none that old.
  static absl::StatusOr<int> TargetArchitecture(int compute_capability);

  // Counters, for tests and metrics.
  int64_t compiles() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t cache_hits() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The cache key: the exact inputs (so distinct inputs never share an
  // entry), hashed by the map.
  static std::string Key(absl::string_view source,
                         absl::Span<const std::string> options, int arch);

  // Constant after construction.
  const Options options_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const std::string>> cache_
      ABSL_GUARDED_BY(mu_);
  // Keys in insertion order, for eviction.
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);
  int64_t compiles_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t cache_hits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace weft::runtime::cuda

#endif  // WEFT_RUNTIME_CUDA_NVRTC_COMPILER_H_
