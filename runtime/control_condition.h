// How a control node reads its condition or selector: element 0 of a
// buffer, by dtype. Shared by the host-side loops (control_run.h) and
// backends that evaluate conditions on the device.
#ifndef WEFT_RUNTIME_CONTROL_CONDITION_H_
#define WEFT_RUNTIME_CONTROL_CONDITION_H_

#include <cstdint>

#include "scheduler/graph.h"

namespace weft::runtime {

// Element 0 of a buffer of `dtype` at `data` as a loop condition: true
// when nonzero (for BYTES, the first byte).
bool ConditionHolds(scheduler::DType dtype, const char* data);
// Element 0 of an INT32 or INT64 selector.
int64_t SelectorValue(scheduler::DType dtype, const char* data);

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_CONTROL_CONDITION_H_
