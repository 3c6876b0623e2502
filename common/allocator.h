// The process's allocator, where it can be told something. weftd links
// gperftools' tcmalloc (server/BUILD, `malloc`); other binaries, sanitizer
// builds among them, use the C library's malloc.
#ifndef WEFT_COMMON_ALLOCATOR_H_
#define WEFT_COMMON_ALLOCATOR_H_

#include <string>

namespace weft {

// The allocator this process runs on: "tcmalloc" or "system".
std::string AllocatorName();

// Hands the allocator's free pages back to the operating system (tcmalloc's
// ReleaseFreeMemory, glibc's malloc_trim), so that resident memory falls
// back once a large request's memory is freed. Costs a walk of the free
// lists; call it after large frees, not per request.
void ReleaseFreeMemory();

}  // namespace weft

#endif  // WEFT_COMMON_ALLOCATOR_H_
