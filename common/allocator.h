// The process's allocator, where it can be tuned. weftd links gperftools'
// tcmalloc (server/BUILD, `malloc`); other binaries, sanitizer builds
// among them, use the C library's malloc, and these calls do nothing there.
#ifndef WEFT_COMMON_ALLOCATOR_H_
#define WEFT_COMMON_ALLOCATOR_H_

#include <string>

namespace weft {

// The allocator this process runs on: "tcmalloc" or "system".
std::string AllocatorName();

// Has the allocator hand freed pages back to the operating system as they
// are freed, so that one large request (a multi-megabyte graph, refused or
// run) leaves the daemon's resident memory where it was. Small objects keep
// their caches. Returns false where the allocator has no such setting.
bool ReturnFreedPagesPromptly();

}  // namespace weft

#endif  // WEFT_COMMON_ALLOCATOR_H_
