#include "runtime/ops/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/ops/scalars.h"

namespace weft::runtime {
namespace {

using scheduler::DType;

// Element access through memcpy: buffer views may start at any byte offset.
template <typename T>
T Load(const char* base, uint64_t i) {
  T v;
  std::memcpy(&v, base + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void Store(char* base, uint64_t i, T v) {
  std::memcpy(base + i * sizeof(T), &v, sizeof(T));
}

absl::Status ArgError(absl::string_view op, int index, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": argument ", index, " ", what));
}

absl::Status CheckArity(absl::string_view op, absl::Span<const HostArg> args,
                        size_t want) {
  if (args.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": expected ", want, " arguments, got ", args.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<const HostBufferArg*> BufferAt(absl::string_view op,
                                              absl::Span<const HostArg> args,
                                              int index) {
  const auto* buffer = std::get_if<HostBufferArg>(&args[index]);
  if (buffer == nullptr) return ArgError(op, index, "must be a buffer");
  if (buffer->data == nullptr && buffer->size_bytes > 0) {
    return ArgError(op, index, "has no memory");
  }
  return buffer;
}

absl::StatusOr<const HostBufferArg*> Float32At(absl::string_view op,
                                               absl::Span<const HostArg> args,
                                               int index) {
  auto buffer = BufferAt(op, args, index);
  if (!buffer.ok()) return buffer;
  if ((*buffer)->dtype != DType::kFloat32) {
    return ArgError(op, index,
                    absl::StrCat("must be float32, got ",
                                 scheduler::DTypeName((*buffer)->dtype)));
  }
  return buffer;
}

bool IsScalar(const HostArg& arg) {
  return !std::holds_alternative<HostBufferArg>(arg);
}

uint64_t Float32Count(const HostBufferArg& b) { return b.size_bytes / 4; }

// Whether [p, p + p_bytes) and [q, q + q_bytes) share a byte.
bool Overlaps(const void* p, uint64_t p_bytes, const void* q,
              uint64_t q_bytes) {
  if (p_bytes == 0 || q_bytes == 0) return false;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t b = reinterpret_cast<uintptr_t>(q);
  return a < b + q_bytes && b < a + p_bytes;
}

// An elementwise op's output (`out_bytes` used) may be exactly one of its
// inputs (the same address and the same used length), computing in place,
// or apart from it; a shifted overlap would make the result depend on the
// order elements are computed in, so it is rejected.
absl::Status CheckElementwiseAlias(absl::string_view op, int out_index,
                                   const void* out, uint64_t out_bytes,
                                   int in_index, const void* in,
                                   uint64_t in_bytes) {
  if (!Overlaps(out, out_bytes, in, in_bytes)) return absl::OkStatus();
  if (out == in && out_bytes == in_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": argument ", out_index, " (the output) overlaps argument ",
      in_index,
      " without being the same memory; an output may be exactly an "
      "input or apart from it"));
}

// An output that each element of which reads many input elements (gemv,
// dot) must not overlap those inputs.
absl::Status CheckNoOverlap(absl::string_view op, int out_index,
                            absl::string_view out_name, const void* out,
                            uint64_t out_bytes, int in_index,
                            absl::string_view in_name, const void* in,
                            uint64_t in_bytes) {
  if (!Overlaps(out, out_bytes, in, in_bytes)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": argument ", out_index, " (", out_name,
                   ") overlaps argument ", in_index, " (", in_name, "); ", op,
                   " cannot write its result into its input"));
}

}  // namespace

absl::Status FillKernel(absl::Span<const HostArg> args) {
  constexpr absl::string_view kOp = "fill";
  if (absl::Status s = CheckArity(kOp, args, 2); !s.ok()) return s;
  auto out = BufferAt(kOp, args, 0);
  if (!out.ok()) return out.status();
  if (!IsScalar(args[1])) return ArgError(kOp, 1, "must be a scalar");
  const HostBufferArg& b = **out;
  const std::optional<FillPattern> element = FillPatternOf(b.dtype, args[1]);
  if (!element) return absl::OkStatus();
  char* base = static_cast<char*>(b.data);
  if (element->bytes == 1) {
    std::memset(base, static_cast<unsigned char>(element->bits), b.size_bytes);
    return absl::OkStatus();
  }
  const uint64_t n = b.size_bytes / element->bytes;
  for (uint64_t i = 0; i < n; ++i) {
    std::memcpy(base + i * element->bytes, &element->bits, element->bytes);
  }
  return absl::OkStatus();
}

absl::Status CopyKernel(absl::Span<const HostArg> args) {
  constexpr absl::string_view kOp = "copy";
  if (absl::Status s = CheckArity(kOp, args, 2); !s.ok()) return s;
  auto src = BufferAt(kOp, args, 0);
  if (!src.ok()) return src.status();
  auto dst = BufferAt(kOp, args, 1);
  if (!dst.ok()) return dst.status();
  if ((*dst)->size_bytes < (*src)->size_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "copy: destination (", (*dst)->size_bytes,
        " bytes) is smaller than source (", (*src)->size_bytes, " bytes)"));
  }
  if ((*src)->size_bytes > 0) {
    std::memmove((*dst)->data, (*src)->data, (*src)->size_bytes);
  }
  return absl::OkStatus();
}

absl::Status AxpyKernel(absl::Span<const HostArg> args) {
  constexpr absl::string_view kOp = "axpy";
  if (absl::Status s = CheckArity(kOp, args, 3); !s.ok()) return s;
  if (!IsScalar(args[0])) return ArgError(kOp, 0, "must be a scalar");
  auto x = Float32At(kOp, args, 1);
  if (!x.ok()) return x.status();
  auto y = Float32At(kOp, args, 2);
  if (!y.ok()) return y.status();
  const float a = static_cast<float>(ScalarAsDouble(args[0]));
  const char* xs = static_cast<const char*>((*x)->data);
  char* ys = static_cast<char*>((*y)->data);
  const uint64_t n = std::min(Float32Count(**x), Float32Count(**y));
  if (absl::Status s = CheckElementwiseAlias(kOp, 2, ys, 4 * n, 1, xs, 4 * n);
      !s.ok()) {
    return s;
  }
  for (uint64_t i = 0; i < n; ++i) {
    Store<float>(ys, i, a * Load<float>(xs, i) + Load<float>(ys, i));
  }
  return absl::OkStatus();
}

absl::Status ScaleKernel(absl::Span<const HostArg> args) {
  constexpr absl::string_view kOp = "scale";
  if (absl::Status s = CheckArity(kOp, args, 2); !s.ok()) return s;
  if (!IsScalar(args[0])) return ArgError(kOp, 0, "must be a scalar");
  auto x = Float32At(kOp, args, 1);
  if (!x.ok()) return x.status();
  const float a = static_cast<float>(ScalarAsDouble(args[0]));
  char* xs = static_cast<char*>((*x)->data);
  const uint64_t n = Float32Count(**x);
  for (uint64_t i = 0; i < n; ++i) Store<float>(xs, i, a * Load<float>(xs, i));
  return absl::OkStatus();
}

absl::Status AddKernel(absl::Span<const HostArg> args) {
  constexpr absl::string_view kOp = "add";
  if (absl::Status s = CheckArity(kOp, args, 3); !s.ok()) return s;
  auto a = Float32At(kOp, args, 0);
  if (!a.ok()) return a.status();
  auto b = Float32At(kOp, args, 1);
  if (!b.ok()) return b.status();
  auto out = Float32At(kOp, args, 2);
  if (!out.ok()) return out.status();
  const char* as = static_cast<const char*>((*a)->data);
  const char* bs = static_cast<const char*>((*b)->data);
  char* os = static_cast<char*>((*out)->data);
  const uint64_t n =
      std::min({Float32Count(**a), Float32Count(**b), Float32Count(**out)});
  for (int in : {0, 1}) {
    const char* in_data = in == 0 ? as : bs;
    if (absl::Status s =
            CheckElementwiseAlias(kOp, 2, os, 4 * n, in, in_data, 4 * n);
        !s.ok()) {
      return s;
    }
  }
  for (uint64_t i = 0; i < n; ++i) {
    Store<float>(os, i, Load<float>(as, i) + Load<float>(bs, i));
  }
  return absl::OkStatus();
}

namespace {

// sub, mul, div: out[i] = fn(a[i], b[i] or b[0]) for i < min(len(a),
// len(out)).
template <typename Fn>
absl::Status BroadcastKernel(absl::string_view op,
                             absl::Span<const HostArg> args, Fn fn) {
  if (absl::Status s = CheckArity(op, args, 3); !s.ok()) return s;
  auto a = Float32At(op, args, 0);
  if (!a.ok()) return a.status();
  auto b = Float32At(op, args, 1);
  if (!b.ok()) return b.status();
  auto out = Float32At(op, args, 2);
  if (!out.ok()) return out.status();
  const uint64_t n = std::min(Float32Count(**a), Float32Count(**out));
  const uint64_t nb = Float32Count(**b);
  const bool broadcast = nb == 1;
  if (!broadcast && nb < n) {
    return ArgError(op, 1,
                    absl::StrCat("(b) holds ", nb,
                                 " float32 elements; it must hold one "
                                 "(broadcast) or at least ",
                                 n, " (the shorter of a and out)"));
  }
  const char* as = static_cast<const char*>((*a)->data);
  const char* bs = static_cast<const char*>((*b)->data);
  char* os = static_cast<char*>((*out)->data);
  if (absl::Status s = CheckElementwiseAlias(op, 2, os, 4 * n, 0, as, 4 * n);
      !s.ok()) {
    return s;
  }
  const uint64_t b_bytes = broadcast ? 4 : 4 * n;
  if (absl::Status s = CheckElementwiseAlias(op, 2, os, 4 * n, 1, bs, b_bytes);
      !s.ok()) {
    return s;
  }
  if (broadcast) {
    const float b0 = n > 0 ? Load<float>(bs, 0) : 0.0f;
    for (uint64_t i = 0; i < n; ++i) {
      Store<float>(os, i, fn(Load<float>(as, i), b0));
    }
  } else {
    for (uint64_t i = 0; i < n; ++i) {
      Store<float>(os, i, fn(Load<float>(as, i), Load<float>(bs, i)));
    }
  }
  return absl::OkStatus();
}

// An i32 argument (gemv's dimensions): an integer scalar within [1,
// INT32_MAX].
absl::StatusOr<uint64_t> DimensionAt(absl::string_view op,
                                     absl::Span<const HostArg> args, int index,
                                     absl::string_view name) {
  int64_t v = 0;
  if (const auto* i = std::get_if<int32_t>(&args[index])) {
    v = *i;
  } else if (const auto* l = std::get_if<int64_t>(&args[index])) {
    v = *l;
  } else {
    return ArgError(op, index,
                    absl::StrCat("(", name, ") must be an integer scalar"));
  }
  if (v < 1 || v > std::numeric_limits<int32_t>::max()) {
    return ArgError(
        op, index,
        absl::StrCat("(", name, ") must be in [1, 2^31 - 1], got ", v));
  }
  return static_cast<uint64_t>(v);
}

// less, greater: flag[0] = cmp(x[0], t) as int32 1 or 0.
template <typename Cmp>
absl::Status CompareKernel(absl::string_view op, absl::Span<const HostArg> args,
                           Cmp cmp) {
  if (absl::Status s = CheckArity(op, args, 3); !s.ok()) return s;
  auto x = Float32At(op, args, 0);
  if (!x.ok()) return x.status();
  if (!IsScalar(args[1])) return ArgError(op, 1, "(t) must be a scalar");
  auto flag = BufferAt(op, args, 2);
  if (!flag.ok()) return flag.status();
  if ((*flag)->dtype != DType::kInt32) {
    return ArgError(op, 2,
                    absl::StrCat("(flag) must be int32, got ",
                                 scheduler::DTypeName((*flag)->dtype)));
  }
  if (Float32Count(**x) < 1) {
    return ArgError(op, 0, "(x) must hold at least one float32");
  }
  if ((*flag)->size_bytes < sizeof(int32_t)) {
    return ArgError(op, 2, "(flag) must hold at least one int32");
  }
  const float t = static_cast<float>(ScalarAsDouble(args[1]));
  const float x0 = Load<float>(static_cast<const char*>((*x)->data), 0);
  Store<int32_t>(static_cast<char*>((*flag)->data), 0, cmp(x0, t) ? 1 : 0);
  return absl::OkStatus();
}

}  // namespace

absl::Status SubKernel(absl::Span<const HostArg> args) {
  return BroadcastKernel("sub", args, [](float a, float b) { return a - b; });
}

absl::Status MulKernel(absl::Span<const HostArg> args) {
  return BroadcastKernel("mul", args, [](float a, float b) { return a * b; });
}

absl::Status DivKernel(absl::Span<const HostArg> args) {
  return BroadcastKernel("div", args, [](float a, float b) { return a / b; });
}

absl::Status DotKernel(absl::Span<const HostArg> args) {
  constexpr absl::string_view kOp = "dot";
  if (absl::Status s = CheckArity(kOp, args, 3); !s.ok()) return s;
  auto x = Float32At(kOp, args, 0);
  if (!x.ok()) return x.status();
  auto y = Float32At(kOp, args, 1);
  if (!y.ok()) return y.status();
  auto out = Float32At(kOp, args, 2);
  if (!out.ok()) return out.status();
  if ((*out)->size_bytes < sizeof(float)) {
    return ArgError(kOp, 2, "(out) must hold at least one float32");
  }
  const char* xs = static_cast<const char*>((*x)->data);
  const char* ys = static_cast<const char*>((*y)->data);
  char* os = static_cast<char*>((*out)->data);
  const uint64_t n = std::min(Float32Count(**x), Float32Count(**y));
  if (absl::Status s = CheckNoOverlap(kOp, 2, "out", os, 4, 0, "x", xs, 4 * n);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckNoOverlap(kOp, 2, "out", os, 4, 1, "y", ys, 4 * n);
      !s.ok()) {
    return s;
  }
  // Products of two float32 are exact in double.
  double sum = 0;
  for (uint64_t i = 0; i < n; ++i) {
    sum += static_cast<double>(Load<float>(xs, i)) * Load<float>(ys, i);
  }
  Store<float>(os, 0, static_cast<float>(sum));
  return absl::OkStatus();
}

absl::Status GemvKernel(absl::Span<const HostArg> args) {
  constexpr absl::string_view kOp = "gemv";
  if (absl::Status s = CheckArity(kOp, args, 5); !s.ok()) return s;
  absl::StatusOr<uint64_t> rows = DimensionAt(kOp, args, 0, "rows");
  if (!rows.ok()) return rows.status();
  absl::StatusOr<uint64_t> cols = DimensionAt(kOp, args, 1, "cols");
  if (!cols.ok()) return cols.status();
  auto a = Float32At(kOp, args, 2);
  if (!a.ok()) return a.status();
  auto x = Float32At(kOp, args, 3);
  if (!x.ok()) return x.status();
  auto y = Float32At(kOp, args, 4);
  if (!y.ok()) return y.status();
  const uint64_t m = *rows;
  const uint64_t k = *cols;
  struct Need {
    int index;
    const char* name;
    const HostBufferArg* buffer;
    uint64_t elements;
    const char* what;
  };
  for (const Need& need :
       {Need{2, "A", *a, m * k, "rows * cols"}, Need{3, "x", *x, k, "cols"},
        Need{4, "y", *y, m, "rows"}}) {
    const uint64_t have = Float32Count(*need.buffer);
    if (have < need.elements) {
      return ArgError(kOp, need.index,
                      absl::StrCat("(", need.name, ") holds ", have,
                                   " float32 elements, fewer than ", need.what,
                                   " = ", need.elements));
    }
  }
  const char* as = static_cast<const char*>((*a)->data);
  const char* xs = static_cast<const char*>((*x)->data);
  char* ys = static_cast<char*>((*y)->data);
  if (absl::Status s =
          CheckNoOverlap(kOp, 4, "y", ys, 4 * m, 2, "A", as, 4 * m * k);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckNoOverlap(kOp, 4, "y", ys, 4 * m, 3, "x", xs, 4 * k);
      !s.ok()) {
    return s;
  }
  for (uint64_t r = 0; r < m; ++r) {
    const char* row = as + r * k * sizeof(float);
    double sum = 0;
    for (uint64_t c = 0; c < k; ++c) {
      sum += static_cast<double>(Load<float>(row, c)) * Load<float>(xs, c);
    }
    Store<float>(ys, r, static_cast<float>(sum));
  }
  return absl::OkStatus();
}

absl::Status LessKernel(absl::Span<const HostArg> args) {
  return CompareKernel("less", args, [](float x, float t) { return x < t; });
}

absl::Status GreaterKernel(absl::Span<const HostArg> args) {
  return CompareKernel("greater", args, [](float x, float t) { return x > t; });
}

absl::Status ReduceSumKernel(absl::Span<const HostArg> args) {
  constexpr absl::string_view kOp = "reduce_sum";
  if (absl::Status s = CheckArity(kOp, args, 2); !s.ok()) return s;
  auto x = Float32At(kOp, args, 0);
  if (!x.ok()) return x.status();
  auto out = Float32At(kOp, args, 1);
  if (!out.ok()) return out.status();
  if ((*out)->size_bytes < sizeof(float)) {
    return ArgError(kOp, 1, "must hold at least one float32");
  }
  // Accumulate in double: the result is then independent of summation
  // order to float32 precision for all practical sizes.
  const char* xs = static_cast<const char*>((*x)->data);
  double sum = 0;
  const uint64_t n = Float32Count(**x);
  for (uint64_t i = 0; i < n; ++i) sum += Load<float>(xs, i);
  Store<float>(static_cast<char*>((*out)->data), 0, static_cast<float>(sum));
  return absl::OkStatus();
}

absl::Status SpinKernel(absl::Span<const HostArg> args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (IsScalar(args[i])) {
      return ArgError("spin", static_cast<int>(i), "must be a buffer");
    }
  }
  return absl::OkStatus();
}

CpuKernelTable CpuKernelTable::WithBuiltins() {
  CpuKernelTable table;
  table.kernels_.emplace("fill", FillKernel);
  table.kernels_.emplace("copy", CopyKernel);
  table.kernels_.emplace("axpy", AxpyKernel);
  table.kernels_.emplace("scale", ScaleKernel);
  table.kernels_.emplace("add", AddKernel);
  table.kernels_.emplace("sub", SubKernel);
  table.kernels_.emplace("mul", MulKernel);
  table.kernels_.emplace("div", DivKernel);
  table.kernels_.emplace("reduce_sum", ReduceSumKernel);
  table.kernels_.emplace("dot", DotKernel);
  table.kernels_.emplace("gemv", GemvKernel);
  table.kernels_.emplace("less", LessKernel);
  table.kernels_.emplace("greater", GreaterKernel);
  table.kernels_.emplace("spin", SpinKernel);
  return table;
}

absl::Status CpuKernelTable::Register(std::string op, CpuKernel kernel) {
  if (kernels_.contains(op)) {
    return absl::AlreadyExistsError(
        absl::StrCat("kernel for op '", op, "' is already registered"));
  }
  kernels_.emplace(std::move(op), std::move(kernel));
  return absl::OkStatus();
}

bool CpuKernelTable::Contains(absl::string_view op) const {
  return kernels_.contains(op);
}

const CpuKernel* CpuKernelTable::Find(absl::string_view op) const {
  auto it = kernels_.find(op);
  return it == kernels_.end() ? nullptr : &it->second;
}

absl::Status CpuKernelTable::Run(absl::string_view op,
                                 absl::Span<const HostArg> args) const {
  const CpuKernel* kernel = Find(op);
  if (kernel == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("no kernel for op '", op, "'"));
  }
  return (*kernel)(args);
}

}  // namespace weft::runtime
