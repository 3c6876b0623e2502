#include "runtime/host_buffer.h"

#include <algorithm>

namespace weft::runtime {

HostBuffer::HostBuffer(std::string stored, uint64_t size)
    : stored_(std::move(stored)), size_(size) {
  if (stored_.size() > size_) stored_.resize(size_);
}

std::string HostBuffer::Read(uint64_t offset, uint64_t n) const {
  if (offset >= size_) return std::string();
  n = std::min(n, size_ - offset);
  std::string out;
  out.reserve(n);
  if (offset < stored_.size()) {
    const uint64_t held = std::min<uint64_t>(n, stored_.size() - offset);
    out.append(stored_, offset, held);
  }
  out.resize(n, '\0');
  return out;
}

char* HostBuffer::Reset(uint64_t stored, uint64_t size) {
  size_ = size;
  stored_.assign(std::min(stored, size), '\0');
  return stored_.data();
}

bool operator==(const HostBuffer& a, const HostBuffer& b) {
  if (a.size_ != b.size_) return false;
  const HostBuffer& longer = a.stored_.size() >= b.stored_.size() ? a : b;
  const HostBuffer& shorter = &longer == &a ? b : a;
  if (longer.stored_.compare(0, shorter.stored_.size(), shorter.stored_) != 0) {
    return false;
  }
  return std::all_of(longer.stored_.begin() + shorter.stored_.size(),
                     longer.stored_.end(), [](char c) { return c == 0; });
}

}  // namespace weft::runtime
