// HostBuffer: a job output's bytes on the host, with its zero tail left
// implicit.
//
// An output is `size()` bytes: the first `stored_bytes()` are held, the
// rest are zeros that take no memory. A backend that knows where a device
// buffer's data ends (the simulator: memory no op wrote holds no bytes)
// downloads only up to there, so a job whose outputs are mostly untouched
// costs neither host memory nor host time for them; a dense download
// stores everything. Readers see the same bytes either way.
//
// Not thread-safe; a buffer being filled by a download belongs to the
// backend until the download's stream has passed it.
#ifndef WEFT_RUNTIME_HOST_BUFFER_H_
#define WEFT_RUNTIME_HOST_BUFFER_H_

#include <cstdint>
#include <string>
#include <utility>

namespace weft::runtime {

class HostBuffer {
 public:
  HostBuffer() = default;
  // All of `bytes`, stored.
  explicit HostBuffer(std::string bytes)
      : stored_(std::move(bytes)), size_(stored_.size()) {}
  // `size` bytes: `stored` and zeros after it (a longer `stored` is cut to
  // `size`).
  HostBuffer(std::string stored, uint64_t size);

  uint64_t size() const { return size_; }
  uint64_t stored_bytes() const { return stored_.size(); }
  // The bytes held: the buffer's first stored_bytes().
  const std::string& stored() const { return stored_; }

  // Bytes [offset, offset + n), clamped to the buffer.
  std::string Read(uint64_t offset, uint64_t n) const;
  // Every byte, the zero tail included.
  std::string ToString() const { return Read(0, size_); }

  // For backends filling it: holds `stored` of `size` bytes and returns
  // the room for them.
  char* Reset(uint64_t stored, uint64_t size);

  friend bool operator==(const HostBuffer& a, const HostBuffer& b);
  friend bool operator!=(const HostBuffer& a, const HostBuffer& b) {
    return !(a == b);
  }

 private:
  std::string stored_;
  uint64_t size_ = 0;
};

}  // namespace weft::runtime

#endif  // WEFT_RUNTIME_HOST_BUFFER_H_
