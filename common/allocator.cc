#include "common/allocator.h"

#include <cstddef>

// gperftools' C interface, declared weak: null where tcmalloc is not linked.
extern "C" {
int MallocExtension_SetNumericProperty(const char* property, size_t value)
    __attribute__((weak));
int MallocExtension_GetNumericProperty(const char* property, size_t* value)
    __attribute__((weak));
}

namespace weft {
namespace {

constexpr char kDecommit[] = "tcmalloc.aggressive_memory_decommit";

bool HasTcmalloc() {
  return MallocExtension_SetNumericProperty != nullptr &&
         MallocExtension_GetNumericProperty != nullptr;
}

}  // namespace

std::string AllocatorName() { return HasTcmalloc() ? "tcmalloc" : "system"; }

bool ReturnFreedPagesPromptly() {
  if (!HasTcmalloc()) return false;
  if (MallocExtension_SetNumericProperty(kDecommit, 1) == 0) return false;
  size_t value = 0;
  return MallocExtension_GetNumericProperty(kDecommit, &value) != 0 &&
         value == 1;
}

}  // namespace weft
