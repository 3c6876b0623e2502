#include "scheduler/kernel_builder.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "scheduler/field_errors.h"
#include "scheduler/status_macros.h"

namespace weft::scheduler {
namespace {

absl::Status BuildDim3(const weft::v1::Dim3& dim, const std::string& field,
                       const uint32_t (&max)[3], uint32_t (&out)[3]) {
  const uint32_t values[3] = {dim.x(), dim.y(), dim.z()};
  static constexpr const char* kAxes[3] = {"x", "y", "z"};
  for (int a = 0; a < 3; ++a) {
    uint32_t v = values[a];
    if (v == 0) {
      if (a == 0) {
        return Invalid(field + ".x", "must be at least 1");
      }
      v = 1;  // unset y and z mean 1
    }
    if (v > max[a]) {
      return Invalid(absl::StrCat(field, ".", kAxes[a]),
                     absl::StrCat(v, " exceeds the limit of ", max[a]));
    }
    out[a] = v;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ModuleSpec>> BuildModules(
    const weft::v1::Graph& proto, const GraphLimits& limits,
    absl::flat_hash_map<absl::string_view, ModuleId>& ids) {
  if (proto.modules_size() > limits.max_modules) {
    return Invalid(
        "graph.modules",
        absl::StrCat(proto.modules_size(), " modules exceed the limit of ",
                     limits.max_modules));
  }
  std::vector<ModuleSpec> modules;
  modules.reserve(proto.modules_size());
  for (int i = 0; i < proto.modules_size(); ++i) {
    const weft::v1::Module& m = proto.modules(i);
    const std::string field = absl::StrCat("graph.modules[", i, "]");
    if (m.name().empty()) return Invalid(field + ".name", "empty module name");
    WEFT_RETURN_IF_ERROR(CheckNameLength(field + ".name", m.name(), limits));
    auto [it, inserted] = ids.emplace(m.name(), i);
    if (!inserted) {
      return Invalid(
          field + ".name",
          absl::StrCat("duplicate module name '", m.name(),
                       "' (first used by graph.modules[", it->second, "])"));
    }
    ModuleSpec spec;
    spec.name = m.name();
    std::string code_field;
    switch (m.code_case()) {
      case weft::v1::Module::kCudaSource:
        spec.kind = ModuleSpec::Kind::kCudaSource;
        spec.code = m.cuda_source();
        code_field = field + ".cuda_source";
        break;
      case weft::v1::Module::kPtx:
        spec.kind = ModuleSpec::Kind::kPtx;
        spec.code = m.ptx();
        code_field = field + ".ptx";
        break;
      case weft::v1::Module::kSourceFile:
      case weft::v1::Module::kPtxFile:
        return Invalid(
            field + (m.code_case() == weft::v1::Module::kSourceFile
                         ? ".source_file"
                         : ".ptx_file"),
            "file references are read by the client; submit the code inline "
            "as cuda_source or ptx");
      case weft::v1::Module::CODE_NOT_SET:
        return Invalid(field,
                       absl::StrCat("module '", m.name(),
                                    "' has no code (set cuda_source or ptx)"));
    }
    if (spec.code.empty()) {
      return Invalid(code_field,
                     absl::StrCat("module '", m.name(), "' has empty code"));
    }
    if (spec.code.size() > limits.max_module_bytes) {
      return Invalid(code_field,
                     absl::StrCat(spec.code.size(),
                                  " bytes exceed the per-module limit of ",
                                  limits.max_module_bytes, " bytes"));
    }
    if (spec.kind == ModuleSpec::Kind::kPtx && m.nvrtc_options_size() > 0) {
      return Invalid(field + ".nvrtc_options",
                     "NVRTC options apply only to cuda_source modules");
    }
    for (int k = 0; k < m.nvrtc_options_size(); ++k) {
      const std::string& option = m.nvrtc_options(k);
      const std::string option_field =
          absl::StrCat(field, ".nvrtc_options[", k, "]");
      if (option.empty()) return Invalid(option_field, "empty option");
      if (absl::StartsWith(option, "--gpu-architecture") ||
          absl::StartsWith(option, "-arch")) {
        return Invalid(option_field,
                       "the target architecture is chosen per device by the "
                       "daemon");
      }
      spec.nvrtc_options.push_back(option);
    }
    modules.push_back(std::move(spec));
  }
  return modules;
}

// Validates one extent triple; `max` holds the per-axis limits.

absl::StatusOr<KernelSpec> BuildKernel(
    const weft::v1::KernelLaunch& launch, const std::string& field,
    const GraphLimits& limits,
    const absl::flat_hash_map<absl::string_view, ModuleId>& module_ids) {
  KernelSpec spec;
  if (launch.module().empty()) {
    return Invalid(field + ".module", "empty module name");
  }
  auto it = module_ids.find(launch.module());
  if (it == module_ids.end()) {
    return Invalid(field + ".module",
                   absl::StrCat("unknown module ", Quote(launch.module())));
  }
  spec.module = it->second;
  if (launch.kernel().empty()) {
    return Invalid(field + ".kernel", "empty kernel name");
  }
  WEFT_RETURN_IF_ERROR(
      CheckNameLength(field + ".kernel", launch.kernel(), limits));
  spec.kernel = launch.kernel();
  if (!launch.has_grid()) return Invalid(field + ".grid", "missing grid");
  if (!launch.has_block()) return Invalid(field + ".block", "missing block");
  static constexpr uint32_t kGridMax[3] = {2147483647u, 65535u, 65535u};
  static constexpr uint32_t kBlockMax[3] = {1024u, 1024u, 64u};
  WEFT_RETURN_IF_ERROR(
      BuildDim3(launch.grid(), field + ".grid", kGridMax, spec.grid));
  WEFT_RETURN_IF_ERROR(
      BuildDim3(launch.block(), field + ".block", kBlockMax, spec.block));
  const uint64_t threads =
      uint64_t{spec.block[0]} * spec.block[1] * spec.block[2];
  if (threads > 1024) {
    return Invalid(field + ".block",
                   absl::StrCat(spec.block[0], "x", spec.block[1], "x",
                                spec.block[2], " = ", threads,
                                " threads per block exceed the limit of 1024"));
  }
  if (launch.shared_memory_bytes() > limits.max_shared_memory_bytes) {
    return Invalid(field + ".shared_memory_bytes",
                   absl::StrCat(launch.shared_memory_bytes(),
                                " bytes exceed the limit of ",
                                limits.max_shared_memory_bytes, " bytes"));
  }
  spec.shared_memory_bytes = launch.shared_memory_bytes();
  return spec;
}

}  // namespace weft::scheduler
