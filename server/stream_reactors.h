// Reactors of the service's server-streaming calls (gRPC callback API)
// that need no job: a call refused with a status and no message, and data
// streamed in chunks. Both delete themselves when gRPC is done with them.
#ifndef WEFT_SERVER_STREAM_REACTORS_H_
#define WEFT_SERVER_STREAM_REACTORS_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>

#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"

namespace weft::server {

// The status of a call whose client went away or whose deadline passed.
inline grpc::Status ClientGone() {
  return grpc::Status(grpc::StatusCode::CANCELLED,
                      "the call was cancelled or its deadline passed");
}

// A streaming call answered with `status` and no message.
template <typename Response>
class Refused final : public grpc::ServerWriteReactor<Response> {
 public:
  explicit Refused(grpc::Status status) { this->Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// Streams `total` bytes as messages of at most `chunk` bytes each (at least
// one message, also for zero bytes); `fill(offset, n, message)` puts bytes
// [offset, offset + n) into `message`. One write is outstanding at a time;
// a failed write (the client went away) ends the call. Deletes itself when
// gRPC is done with it.
template <typename Response>
class ChunkReactor final : public grpc::ServerWriteReactor<Response> {
 public:
  using Fill = std::function<void(uint64_t offset, uint64_t n, Response*)>;

  ChunkReactor(uint64_t total, uint64_t chunk, Fill fill)
      : total_(total),
        chunk_(std::max<uint64_t>(chunk, 1)),
        fill_(std::move(fill)) {
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      this->Finish(ClientGone());
      return;
    }
    WriteNext();
  }
  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    const uint64_t n = std::min(chunk_, total_ - offset_);
    message_.Clear();
    fill_(offset_, n, &message_);
    offset_ += n;
    if (offset_ >= total_) {
      this->StartWriteAndFinish(&message_, grpc::WriteOptions(),
                                grpc::Status::OK);
    } else {
      this->StartWrite(&message_);
    }
  }

  const uint64_t total_;
  const uint64_t chunk_;
  const Fill fill_;
  uint64_t offset_ = 0;
  Response message_;  // the write outstanding
};

}  // namespace weft::server

#endif  // WEFT_SERVER_STREAM_REACTORS_H_
