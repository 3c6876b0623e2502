// MemoryTrimmer: hands freed heap memory back to the system after large
// requests.
//
// A request that builds and plans a large graph frees hundreds of MB when
// it ends, but the allocator keeps freed pages for reuse, so the daemon's
// resident memory would stay at its high-water mark. Request() asks for a
// release of the allocator's free pages (common/allocator.h) shortly
// afterwards (after `delay`, once the call's own request and answer are
// gone too); requests in the meantime are folded into one trim. One thread,
// asleep unless asked. Thread-safe.
#ifndef WEFT_SERVER_MEMORY_TRIMMER_H_
#define WEFT_SERVER_MEMORY_TRIMMER_H_

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace weft::server {

class MemoryTrimmer {
 public:
  explicit MemoryTrimmer(absl::Duration delay = absl::Milliseconds(500));
  ~MemoryTrimmer();
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

  void Request() ABSL_LOCKS_EXCLUDED(mu_);

  // Trims done so far.
  int64_t trims() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  const absl::Duration delay_;
  mutable absl::Mutex mu_;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t trims_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// Asks `trimmer` for a trim when it goes out of scope, if `wanted`: put it
// at the top of a call handler so that the delay starts when the call ends.
class TrimWhenDone {
 public:
  TrimWhenDone(MemoryTrimmer* trimmer, bool wanted)
      : trimmer_(wanted ? trimmer : nullptr) {}
  ~TrimWhenDone() {
    if (trimmer_ != nullptr) trimmer_->Request();
  }
  TrimWhenDone(const TrimWhenDone&) = delete;
  TrimWhenDone& operator=(const TrimWhenDone&) = delete;

 private:
  MemoryTrimmer* const trimmer_;
};

}  // namespace weft::server

#endif  // WEFT_SERVER_MEMORY_TRIMMER_H_
