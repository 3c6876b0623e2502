#include "scheduler/op_signatures.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace weft::scheduler {
namespace {

enum class ParamKind { kBuffer, kScalar, kF32, kI32 };

// Allowed access modes as a bit mask over Access values.
constexpr int kRead = 1 << static_cast<int>(Access::kRead);
constexpr int kWrite = 1 << static_cast<int>(Access::kWrite);
constexpr int kReadWrite = 1 << static_cast<int>(Access::kReadWrite);

constexpr std::optional<DType> kAnyDType = std::nullopt;
constexpr std::optional<DType> kF32Buffer = DType::kFloat32;
constexpr std::optional<DType> kI32Buffer = DType::kInt32;

struct Param {
  const char* name;
  ParamKind kind;
  std::optional<DType> dtype = kAnyDType;  // buffers only: the one allowed
  int access_mask = 0;                     // buffers only
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
       {{"a", ParamKind::kBuffer, kF32Buffer, kRead},
        {"b", ParamKind::kBuffer, kF32Buffer, kRead},
        {"out", ParamKind::kBuffer, kF32Buffer, kWrite | kReadWrite}}},
      {"axpy",
       {{"a", ParamKind::kF32},
        {"x", ParamKind::kBuffer, kF32Buffer, kRead},
        {"y", ParamKind::kBuffer, kF32Buffer, kReadWrite}}},
      {"copy",
       {{"src", ParamKind::kBuffer, kAnyDType, kRead},
        {"dst", ParamKind::kBuffer, kAnyDType, kWrite | kReadWrite}}},
      {"div",
       {{"a", ParamKind::kBuffer, kF32Buffer, kRead},
        {"b", ParamKind::kBuffer, kF32Buffer, kRead},
        {"out", ParamKind::kBuffer, kF32Buffer, kWrite | kReadWrite}}},
      {"dot",
       {{"x", ParamKind::kBuffer, kF32Buffer, kRead},
        {"y", ParamKind::kBuffer, kF32Buffer, kRead},
        {"out", ParamKind::kBuffer, kF32Buffer, kWrite | kReadWrite}}},
      {"fill",
       {{"out", ParamKind::kBuffer, kAnyDType, kWrite | kReadWrite},
        {"value", ParamKind::kScalar}}},
      {"gemv",
       {{"rows", ParamKind::kI32},
        {"cols", ParamKind::kI32},
        {"A", ParamKind::kBuffer, kF32Buffer, kRead},
        {"x", ParamKind::kBuffer, kF32Buffer, kRead},
        {"y", ParamKind::kBuffer, kF32Buffer, kWrite | kReadWrite}}},
      {"greater",
       {{"x", ParamKind::kBuffer, kF32Buffer, kRead},
        {"t", ParamKind::kF32},
        {"flag", ParamKind::kBuffer, kI32Buffer, kWrite | kReadWrite}}},
      {"less",
       {{"x", ParamKind::kBuffer, kF32Buffer, kRead},
        {"t", ParamKind::kF32},
        {"flag", ParamKind::kBuffer, kI32Buffer, kWrite | kReadWrite}}},
      {"mul",
       {{"a", ParamKind::kBuffer, kF32Buffer, kRead},
        {"b", ParamKind::kBuffer, kF32Buffer, kRead},
        {"out", ParamKind::kBuffer, kF32Buffer, kWrite | kReadWrite}}},
      {"reduce_sum",
       {{"x", ParamKind::kBuffer, kF32Buffer, kRead},
        {"out", ParamKind::kBuffer, kF32Buffer, kWrite | kReadWrite}}},
      {"scale",
       {{"a", ParamKind::kF32},
        {"x", ParamKind::kBuffer, kF32Buffer, kReadWrite}}},
      {"spin", {}, /*variadic_buffers=*/true},
      {"sub",
       {{"a", ParamKind::kBuffer, kF32Buffer, kRead},
        {"b", ParamKind::kBuffer, kF32Buffer, kRead},
        {"out", ParamKind::kBuffer, kF32Buffer, kWrite | kReadWrite}}},
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
    case ParamKind::kI32:
      return absl::StrCat(p.name, ": i32");
    case ParamKind::kScalar:
      return absl::StrCat(p.name, ": scalar");
    case ParamKind::kBuffer:
      return absl::StrCat(
          p.name, ": ",
          p.dtype.has_value() ? absl::StrCat(DTypeName(*p.dtype), " ") : "",
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

// An i32 parameter takes an i32 or i64 argument whose value fits in int32.
absl::Status CheckI32(const Arg& arg, absl::string_view field,
                      const OpSignature& sig, const Param& p) {
  int64_t value = 0;
  if (const auto* v = std::get_if<int32_t>(&arg)) {
    value = *v;
  } else if (const auto* v = std::get_if<int64_t>(&arg)) {
    value = *v;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": op '", sig.op, "' argument '", p.name,
        "' must be an integer scalar (i32 or i64), got a floating-point one; "
        "signature ",
        DescribeSignature(sig)));
  }
  if (value < std::numeric_limits<int32_t>::min() ||
      value > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": op '", sig.op, "' argument '", p.name, "' (",
                     value, ") does not fit in i32"));
  }
  return absl::OkStatus();
}

const BufferSpec& BufferOf(const NodeSpec& node,
                           const std::vector<BufferSpec>& buffers, int arg) {
  return buffers[std::get<BufferUse>(node.args[arg]).buffer];
}

uint64_t Elements(const BufferSpec& buffer) {
  return buffer.size_bytes / DTypeSize(buffer.dtype);
}

// sub, mul, div: `b` holds one element (broadcast) or at least as many as
// the op computes, min(len(a), len(out)).
absl::Status CheckBroadcast(const NodeSpec& node,
                            const std::vector<BufferSpec>& buffers,
                            absl::string_view field_prefix,
                            absl::string_view op) {
  const BufferSpec& a = BufferOf(node, buffers, 0);
  const BufferSpec& b = BufferOf(node, buffers, 1);
  const BufferSpec& out = BufferOf(node, buffers, 2);
  const uint64_t n = std::min(Elements(a), Elements(out));
  const uint64_t nb = Elements(b);
  if (nb == 1 || nb >= n) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field_prefix, ".args[1].buffer.name: op '", op, "' argument 'b' ('",
      b.name, "', ", nb, " elements) must hold one element (broadcast) or at ",
      "least ", n, " (the shorter of 'a' and 'out', '", a.name, "' and '",
      out.name, "')"));
}

// The output argument `out` must not be the same buffer as any of `inputs`
// (ops whose result elements each read many input elements).
absl::Status CheckNoAlias(const NodeSpec& node,
                          const std::vector<BufferSpec>& buffers,
                          absl::string_view field_prefix, absl::string_view op,
                          int out, std::initializer_list<int> inputs,
                          std::initializer_list<const char*> input_names) {
  const BufferId out_id = std::get<BufferUse>(node.args[out]).buffer;
  auto name = input_names.begin();
  for (int in : inputs) {
    if (std::get<BufferUse>(node.args[in]).buffer == out_id) {
      return absl::InvalidArgumentError(absl::StrCat(
          field_prefix, ".args[", out, "].buffer.name: op '", op,
          "' cannot write its result into its input '", *name, "' (buffer '",
          buffers[out_id].name, "'); use another buffer"));
    }
    ++name;
  }
  return absl::OkStatus();
}

// gemv: rows and cols at least 1, A holds rows * cols elements, x cols and
// y rows; y is neither A nor x.
absl::Status CheckGemv(const NodeSpec& node,
                       const std::vector<BufferSpec>& buffers,
                       absl::string_view field_prefix) {
  int64_t dims[2];
  for (int i = 0; i < 2; ++i) {
    const Arg& arg = node.args[i];
    dims[i] = std::holds_alternative<int32_t>(arg) ? std::get<int32_t>(arg)
                                                   : std::get<int64_t>(arg);
    if (dims[i] < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          field_prefix, ".args[", i, "]: op 'gemv' argument '",
          i == 0 ? "rows" : "cols", "' must be at least 1, got ", dims[i]));
    }
  }
  const uint64_t rows = static_cast<uint64_t>(dims[0]);
  const uint64_t cols = static_cast<uint64_t>(dims[1]);
  struct Need {
    int arg;
    const char* name;
    uint64_t elements;
    const char* what;
  };
  const Need needs[] = {{2, "A", rows * cols, "rows * cols"},
                        {3, "x", cols, "cols"},
                        {4, "y", rows, "rows"}};
  for (const Need& need : needs) {
    const BufferSpec& b = BufferOf(node, buffers, need.arg);
    if (Elements(b) < need.elements) {
      return absl::InvalidArgumentError(absl::StrCat(
          field_prefix, ".args[", need.arg, "].buffer.name: op 'gemv' ",
          "argument '", need.name, "' (buffer '", b.name, "', ", Elements(b),
          " elements) must hold at least ", need.what, " = ", need.elements,
          " elements"));
    }
  }
  return CheckNoAlias(node, buffers, field_prefix, "gemv", 4, {2, 3},
                      {"A", "x"});
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
      if (p.kind == ParamKind::kI32) {
        if (absl::Status s = CheckI32(arg, field, *sig, p); !s.ok()) return s;
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
    if (p.dtype.has_value() && buffer.dtype != *p.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".buffer.name: op '", sig->op, "' argument '", p.name,
          "' must be ",
          *p.dtype == DType::kInt32 || *p.dtype == DType::kInt64 ? "an " : "a ",
          DTypeName(*p.dtype), " buffer, but buffer '", buffer.name, "' is ",
          DTypeName(buffer.dtype)));
    }
    if ((p.access_mask & (1 << static_cast<int>(use->access))) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".buffer.access: op '", sig->op, "' argument '", p.name,
          "' must be accessed ", AccessMaskName(p.access_mask), ", got ",
          AccessName(use->access)));
    }
  }
  const absl::string_view op = sig->op;
  if (op == "sub" || op == "mul" || op == "div") {
    return CheckBroadcast(node, buffers, field_prefix, op);
  }
  if (op == "gemv") return CheckGemv(node, buffers, field_prefix);
  if (op == "dot") {
    return CheckNoAlias(node, buffers, field_prefix, op, 2, {0, 1}, {"x", "y"});
  }
  if (op == "copy") {
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
