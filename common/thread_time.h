// ThreadSeconds: the CPU time the calling thread has used, in seconds.
//
// Unlike wall time it does not count the time other threads and processes
// of a busy machine take from the caller, so the planner's profile and the
// benchmarks time their own work with it.
#ifndef WEFT_COMMON_THREAD_TIME_H_
#define WEFT_COMMON_THREAD_TIME_H_

namespace weft {

double ThreadSeconds();

}  // namespace weft

#endif  // WEFT_COMMON_THREAD_TIME_H_
