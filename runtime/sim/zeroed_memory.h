// Host memory that reads as zeros and costs nothing until it is written.
//
// The simulated devices keep the contents of their memory on the host, and
// most of a large simulated buffer is never written. Large blocks are
// anonymous pages mapped straight from the kernel, which zeroes each page
// on its first touch, whatever allocator the process links (tcmalloc's
// calloc, unlike glibc's, clears every byte of a fresh block at once);
// small ones come from calloc.
#ifndef WEFT_RUNTIME_SIM_ZEROED_MEMORY_H_
#define WEFT_RUNTIME_SIM_ZEROED_MEMORY_H_

#include <cstdint>
#include <memory>

namespace weft::runtime {

// Gives back what AllocateZeroed gave: `mapped` bytes of pages, or (0) a
// calloc'd block.
struct ZeroedDeleter {
  uint64_t mapped = 0;
  void operator()(char* p) const;
};
using ZeroedBytes = std::unique_ptr<char, ZeroedDeleter>;

// Blocks from this size up are mapped pages.
inline constexpr uint64_t kZeroedMappedFrom = uint64_t{256} << 10;

// `bytes` zero bytes (at least one, so that the address is never null);
// null when the host has no memory for them.
ZeroedBytes AllocateZeroed(uint64_t bytes);

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_SIM_ZEROED_MEMORY_H_
