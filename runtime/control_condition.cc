#include "runtime/control_condition.h"

#include <cstring>

namespace weft::runtime {

using scheduler::DType;

namespace {

template <typename T>
T Load(const char* data) {
  T value;
  std::memcpy(&value, data, sizeof(T));
  return value;
}

}  // namespace

bool ConditionHolds(DType dtype, const char* data) {
  switch (dtype) {
    case DType::kBytes:
      return data[0] != 0;
    case DType::kFloat32:
      return Load<float>(data) != 0.0f;
    case DType::kFloat64:
      return Load<double>(data) != 0.0;
    case DType::kInt32:
      return Load<int32_t>(data) != 0;
    case DType::kInt64:
      return Load<int64_t>(data) != 0;
  }
  return false;
}

int64_t SelectorValue(DType dtype, const char* data) {
  return dtype == DType::kInt64 ? Load<int64_t>(data) : Load<int32_t>(data);
}

}  // namespace weft::runtime
