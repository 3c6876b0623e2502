// The process's peak resident memory, for benchmarks that report what a
// run held at its worst (Linux: /proc/self/status's VmHWM).
#ifndef WEFT_COMMON_PEAK_RESIDENT_H_
#define WEFT_COMMON_PEAK_RESIDENT_H_

#include <cstdint>

namespace weft {

// Bytes of the process's peak resident memory since the last
// ResetPeakResident (or its start); 0 where unknown.
uint64_t PeakResidentBytes();

// Starts a new peak (Linux: writes 5 to /proc/self/clear_refs); where that
// is not possible the peak stays the process's.
void ResetPeakResident();

}  // namespace weft

#endif  // WEFT_COMMON_PEAK_RESIDENT_H_
