#include "runtime/sim/zeroed_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

namespace weft::runtime {

void ZeroedDeleter::operator()(char* p) const {
  if (p == nullptr) return;
  if (mapped > 0) {
    munmap(p, mapped);
  } else {
    std::free(p);
  }
}

ZeroedBytes AllocateZeroed(uint64_t bytes) {
  bytes = std::max<uint64_t>(bytes, 1);
  if (bytes < kZeroedMappedFrom) {
    return ZeroedBytes(static_cast<char*>(std::calloc(bytes, 1)));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return ZeroedBytes();
  return ZeroedBytes(static_cast<char*>(p), ZeroedDeleter{bytes});
}

}  // namespace weft::runtime
