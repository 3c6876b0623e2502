#include "scheduler/op_signatures.h"

#include <cstdint>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace weft::scheduler {
namespace {

enum class ParamKind { kBuffer, kScalar, kF32 };

// Allowed access modes as a bit mask over Access values.
constexpr int kRead = 1 << static_cast<int>(Access::kRead);
constexpr int kWrite = 1 << static_cast<int>(Access::kWrite);
constexpr int kReadWrite = 1 << static_cast<int>(Access::kReadWrite);

struct Param {
  const char* name;
  ParamKind kind;
  bool float32_only = false;  // buffers only
  int access_mask = 0;        // buffers only
};

struct OpSignature {
  const char* op;
  std::vector<Param> params;
  bool variadic_buffers = false;  // spin: any number of buffers, any access
};

// Sorted by name so BuiltinOpNames() lists them in a stable order.
const std::vector<OpSignature>& Signatures() {
  static const auto* const kSignatures = new std::vector<OpSignature>{
      {"add",
       {{"a", ParamKind::kBuffer, true, kRead},
        {"b", ParamKind::kBuffer, true, kRead},
        {"out", ParamKind::kBuffer, true, kWrite | kReadWrite}}},
      {"axpy",
       {{"a", ParamKind::kF32},
        {"x", ParamKind::kBuffer, true, kRead},
        {"y", ParamKind::kBuffer, true, kReadWrite}}},
      {"copy",
       {{"src", ParamKind::kBuffer, false, kRead},
        {"dst", ParamKind::kBuffer, false, kWrite | kReadWrite}}},
      {"fill",
       {{"out", ParamKind::kBuffer, false, kWrite | kReadWrite},
        {"value", ParamKind::kScalar}}},
      {"reduce_sum",
       {{"x", ParamKind::kBuffer, true, kRead},
        {"out", ParamKind::kBuffer, true, kWrite | kReadWrite}}},
      {"scale",
       {{"a", ParamKind::kF32}, {"x", ParamKind::kBuffer, true, kReadWrite}}},
      {"spin", {}, /*variadic_buffers=*/true},
  };
  return *kSignatures;
}

const OpSignature* FindSignature(absl::string_view op) {
  for (const OpSignature& sig : Signatures()) {
    if (op == sig.op) return &sig;
  }
  return nullptr;
}

std::string AccessMaskName(int mask) {
  std::vector<absl::string_view> names;
  for (Access a : {Access::kRead, Access::kWrite, Access::kReadWrite}) {
    if (mask & (1 << static_cast<int>(a))) names.push_back(AccessName(a));
  }
  return absl::StrJoin(names, " or ");
}

std::string DescribeParam(const Param& p) {
  switch (p.kind) {
    case ParamKind::kF32:
      return absl::StrCat(p.name, ": f32");
    case ParamKind::kScalar:
      return absl::StrCat(p.name, ": scalar");
    case ParamKind::kBuffer:
      return absl::StrCat(p.name, ": ", p.float32_only ? "FLOAT32 " : "",
                          "buffer ", AccessMaskName(p.access_mask));
  }
  return p.name;
}

std::string DescribeSignature(const OpSignature& sig) {
  if (sig.variadic_buffers) {
    return absl::StrCat(sig.op, "(any number of buffers, any access)");
  }
  std::vector<std::string> params;
  for (const Param& p : sig.params) params.push_back(DescribeParam(p));
  return absl::StrCat(sig.op, "(", absl::StrJoin(params, ", "), ")");
}

}  // namespace

bool IsBuiltinOp(absl::string_view op) { return FindSignature(op) != nullptr; }

std::vector<std::string> BuiltinOpNames() {
  std::vector<std::string> names;
  for (const OpSignature& sig : Signatures()) names.emplace_back(sig.op);
  return names;
}

absl::Status CheckOpSignature(const NodeSpec& node,
                              const std::vector<BufferSpec>& buffers,
                              absl::string_view field_prefix) {
  if (node.kernel.has_value()) {
    // A user kernel's parameter list is its own: buffers of any dtype and
    // access and scalars of any type, in any order. Only the kernel knows
    // whether they match, and the GPU checks nothing, so the wire contract
    // makes the client responsible (weft.v1.KernelLaunch).
    if (node.op != kUserKernelOp) {
      return absl::InvalidArgumentError(absl::StrCat(
          field_prefix, ".op: a node that launches a user kernel has op '",
          kUserKernelOp, "', got '", node.op, "'"));
    }
    return absl::OkStatus();
  }
  const OpSignature* sig = FindSignature(node.op);
  if (sig == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        field_prefix, ".op: unknown op '", node.op,
        "' (built-in ops: ", absl::StrJoin(BuiltinOpNames(), ", "), ")"));
  }
  if (sig->variadic_buffers) {
    for (size_t i = 0; i < node.args.size(); ++i) {
      if (!std::holds_alternative<BufferUse>(node.args[i])) {
        return absl::InvalidArgumentError(
            absl::StrCat(field_prefix, ".args[", i, "]: op '", sig->op,
                         "' takes only buffer arguments, got a scalar"));
      }
    }
    return absl::OkStatus();
  }
  if (node.args.size() != sig->params.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field_prefix, ".args: op '", sig->op, "' takes ",
                     sig->params.size(), " arguments, got ", node.args.size(),
                     "; signature ", DescribeSignature(*sig)));
  }
  for (size_t i = 0; i < node.args.size(); ++i) {
    const Param& p = sig->params[i];
    const Arg& arg = node.args[i];
    const std::string field = absl::StrCat(field_prefix, ".args[", i, "]");
    const auto* use = std::get_if<BufferUse>(&arg);
    if (p.kind != ParamKind::kBuffer) {
      if (use != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": op '", sig->op, "' argument '", p.name,
                         "' must be a scalar, got a buffer; signature ",
                         DescribeSignature(*sig)));
      }
      continue;  // every scalar type converts to f32 and to `scalar`
    }
    if (use == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": op '", sig->op, "' argument '", p.name,
                       "' must be a buffer, got a scalar; signature ",
                       DescribeSignature(*sig)));
    }
    const BufferSpec& buffer = buffers[use->buffer];
    if (p.float32_only && buffer.dtype != DType::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".buffer.name: op '", sig->op, "' argument '",
                       p.name, "' must be a FLOAT32 buffer, but buffer '",
                       buffer.name, "' is ", DTypeName(buffer.dtype)));
    }
    if ((p.access_mask & (1 << static_cast<int>(use->access))) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".buffer.access: op '", sig->op, "' argument '", p.name,
          "' must be accessed ", AccessMaskName(p.access_mask), ", got ",
          AccessName(use->access)));
    }
  }
  if (absl::string_view(sig->op) == "copy") {
    const BufferSpec& src = buffers[std::get<BufferUse>(node.args[0]).buffer];
    const BufferSpec& dst = buffers[std::get<BufferUse>(node.args[1]).buffer];
    if (dst.size_bytes < src.size_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          field_prefix, ".args[1].buffer.name: op 'copy' destination '",
          dst.name, "' (", dst.size_bytes, " bytes) is smaller than source '",
          src.name, "' (", src.size_bytes, " bytes)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace weft::scheduler
