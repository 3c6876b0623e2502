// The scalar arguments of built-in ops, converted alike on every backend.
//
// Built-in ops take a typed scalar (float, double, int32 or int64) wherever
// they take a number, and convert it to what they compute with here, so
// that the CPU reference kernels and the CUDA backend produce the same
// bits: integral scalars convert to integers exactly, floating ones
// truncate toward zero and saturate (NaN becomes 0). Every function takes
// any argument variant whose scalar alternatives are those four types
// (HostArg, KernelArg, scheduler::Arg); for an argument that holds no
// scalar it answers 0. FillPatternOf is the element fill writes, from which
// both backends fill a buffer.
#ifndef WEFT_RUNTIME_OPS_SCALARS_H_
#define WEFT_RUNTIME_OPS_SCALARS_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <variant>

#include "scheduler/graph.h"

namespace weft::runtime {

template <typename Arg>
double ScalarAsDouble(const Arg& arg) {
  if (const auto* v = std::get_if<float>(&arg)) return *v;
  if (const auto* v = std::get_if<double>(&arg)) return *v;
  if (const auto* v = std::get_if<int32_t>(&arg)) return *v;
  if (const auto* v = std::get_if<int64_t>(&arg)) {
    return static_cast<double>(*v);
  }
  return 0;
}

template <typename Arg>
int64_t ScalarAsInt64(const Arg& arg) {
  if (const auto* v = std::get_if<int32_t>(&arg)) return *v;
  if (const auto* v = std::get_if<int64_t>(&arg)) return *v;
  const double d = ScalarAsDouble(arg);
  if (std::isnan(d)) return 0;
  if (d >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (d <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(d);
}

inline int32_t SaturateInt32(int64_t v) {
  if (v > std::numeric_limits<int32_t>::max()) {
    return std::numeric_limits<int32_t>::max();
  }
  if (v < std::numeric_limits<int32_t>::min()) {
    return std::numeric_limits<int32_t>::min();
  }
  return static_cast<int32_t>(v);
}

// The scalar `arg` holds, as the same alternative of variant `To`
// (e.g. a KernelArg's int32 as a HostArg's int32); `To{}` for an argument
// that holds no scalar.
template <typename To, typename From>
To ConvertScalar(const From& arg) {
  if (const auto* v = std::get_if<float>(&arg)) return To(*v);
  if (const auto* v = std::get_if<double>(&arg)) return To(*v);
  if (const auto* v = std::get_if<int32_t>(&arg)) return To(*v);
  if (const auto* v = std::get_if<int64_t>(&arg)) return To(*v);
  return To{};
}

// One element of a buffer of some dtype: its width and its bytes, which are
// the first `bytes` bytes of `bits` in memory (so memcpy(dst, &bits, bytes)
// stores the element).
struct FillPattern {
  int bytes = 1;
  uint64_t bits = 0;
};

// The element fill writes into a buffer of `dtype` for the scalar `arg`:
// bytes take its integer value's low byte, float32 and float64 its value
// rounded to their precision, int32 and int64 its integer value (int32
// saturating). nullopt for a dtype outside DType.
template <typename Arg>
std::optional<FillPattern> FillPatternOf(scheduler::DType dtype,
                                         const Arg& arg) {
  auto pattern = [](auto value) {
    static_assert(sizeof(value) <= sizeof(uint64_t));
    FillPattern p;
    p.bytes = static_cast<int>(sizeof(value));
    std::memcpy(&p.bits, &value, sizeof(value));
    return p;
  };
  switch (dtype) {
    case scheduler::DType::kBytes:
      return pattern(static_cast<unsigned char>(ScalarAsInt64(arg)));
    case scheduler::DType::kFloat32:
      return pattern(static_cast<float>(ScalarAsDouble(arg)));
    case scheduler::DType::kFloat64:
      return pattern(ScalarAsDouble(arg));
    case scheduler::DType::kInt32:
      return pattern(SaturateInt32(ScalarAsInt64(arg)));
    case scheduler::DType::kInt64:
      return pattern(ScalarAsInt64(arg));
  }
  return std::nullopt;
}

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_OPS_SCALARS_H_
