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

template <typename T>
void FillWith(const HostBufferArg& out, T value) {
  char* base = static_cast<char*>(out.data);
  const uint64_t n = out.size_bytes / sizeof(T);
  for (uint64_t i = 0; i < n; ++i) Store<T>(base, i, value);
}

}  // namespace

absl::Status FillKernel(absl::Span<const HostArg> args) {
  constexpr absl::string_view kOp = "fill";
  if (absl::Status s = CheckArity(kOp, args, 2); !s.ok()) return s;
  auto out = BufferAt(kOp, args, 0);
  if (!out.ok()) return out.status();
  if (!IsScalar(args[1])) return ArgError(kOp, 1, "must be a scalar");
  const HostBufferArg& b = **out;
  switch (b.dtype) {
    case DType::kBytes:
      std::memset(b.data, static_cast<unsigned char>(ScalarAsInt64(args[1])),
                  b.size_bytes);
      break;
    case DType::kFloat32:
      FillWith<float>(b, static_cast<float>(ScalarAsDouble(args[1])));
      break;
    case DType::kFloat64:
      FillWith<double>(b, ScalarAsDouble(args[1]));
      break;
    case DType::kInt32:
      FillWith<int32_t>(b, SaturateInt32(ScalarAsInt64(args[1])));
      break;
    case DType::kInt64:
      FillWith<int64_t>(b, ScalarAsInt64(args[1]));
      break;
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
  for (uint64_t i = 0; i < n; ++i) {
    Store<float>(os, i, Load<float>(as, i) + Load<float>(bs, i));
  }
  return absl::OkStatus();
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
  table.kernels_.emplace("reduce_sum", ReduceSumKernel);
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
