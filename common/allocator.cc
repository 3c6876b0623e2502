#include "common/allocator.h"

#include <malloc.h>

// gperftools' C interface, declared weak: null where tcmalloc is not linked.
extern "C" {
void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));
}

namespace weft {

std::string AllocatorName() {
  return MallocExtension_ReleaseFreeMemory != nullptr ? "tcmalloc" : "system";
}

void ReleaseFreeMemory() {
  if (MallocExtension_ReleaseFreeMemory != nullptr) {
    MallocExtension_ReleaseFreeMemory();
  } else {
    malloc_trim(0);
  }
}

}  // namespace weft
