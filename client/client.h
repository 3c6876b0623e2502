// The C++ client library for weftd.
//
// A Client wraps one gRPC channel to a daemon ("host:port" or
// "unix:/path/to.sock") and offers one method per Scheduler RPC, each
// returning absl::Status/StatusOr with the server's code and message
// unchanged. Unary calls, ReadBuffer and Trace are bounded by
// Options::timeout;
// Watch takes its own deadline because jobs may run for a long time.
// Depends only on the weft.v1 protos and gRPC.
#ifndef WEFT_CLIENT_CLIENT_H_
#define WEFT_CLIENT_CLIENT_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/retry_info.h"
#include "grpcpp/channel.h"
#include "weft/v1/weft.grpc.pb.h"
#include "weft/v1/weft.pb.h"

namespace weft::client {

// The contents of one output buffer.
struct BufferData {
  std::string data;
  weft::v1::DType dtype = weft::v1::BYTES;
};

// Thread-safe (gRPC stubs are).
class Client {
 public:
  struct Options {
    // Deadline of every call except Watch.
    absl::Duration timeout = absl::Seconds(30);
    // Largest message sent or received.
    int max_message_bytes = 64 << 20;
    // Sent as the `weft-tenant` metadata of every call when non-empty.
    std::string tenant;
  };

  // Creates a channel to `address`: "host:port", "unix:/path" or any other
  // gRPC target. Does not wait for the daemon: a daemon that is not there
  // shows up as UNAVAILABLE on the first call. INVALID_ARGUMENT for an
  // empty address.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const std::string& address, Options options);
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const std::string& address) {
    return Connect(address, Options());
  }
  // A client over an existing channel (in-process servers, tests).
  static std::unique_ptr<Client> FromChannel(
      std::shared_ptr<grpc::Channel> channel, Options options);

  absl::StatusOr<weft::v1::Job> Submit(
      const weft::v1::SubmitGraphRequest& request);
  absl::StatusOr<weft::v1::Job> Get(const std::string& job_id);
  // Streams the job: `on_message` sees every message (the job first, then
  // node events and updates); returning false stops watching early. Returns
  // the last job seen, which is terminal unless stopped early. With a finite
  // `deadline` the watch fails with DEADLINE_EXCEEDED after it.
  absl::StatusOr<weft::v1::Job> Watch(
      const std::string& job_id,
      const std::function<bool(const weft::v1::WatchJobResponse&)>& on_message,
      absl::Time deadline = absl::InfiniteFuture());
  absl::StatusOr<weft::v1::Job> Cancel(const std::string& job_id);
  // Jobs in `state` (all for JOB_STATE_UNSPECIFIED); `page_size` > 0 keeps
  // the most recent ones.
  absl::StatusOr<std::vector<weft::v1::Job>> List(
      weft::v1::JobState state = weft::v1::JOB_STATE_UNSPECIFIED,
      int page_size = 0);
  absl::StatusOr<weft::v1::Plan> Plan(
      const weft::v1::Graph& graph,
      const weft::v1::ScheduleOptions& options = {});
  absl::StatusOr<std::vector<weft::v1::Device>> Devices();
  // The whole buffer, reassembled from its chunks. DATA_LOSS when the
  // chunks do not add up.
  absl::StatusOr<BufferData> ReadBuffer(const std::string& job_id,
                                        const std::string& buffer,
                                        uint32_t chunk_bytes = 0);
  // The trace of a finished job: Chrome/Perfetto trace-event JSON,
  // reassembled from its chunks. DATA_LOSS when the chunks do not add up.
  absl::StatusOr<std::string> Trace(const std::string& job_id);
  // grpc.health.v1.Health/Check: "SERVING", "NOT_SERVING",
  // "SERVICE_UNKNOWN" or "UNKNOWN". `service` "" asks about the server.
  absl::StatusOr<std::string> Health(const std::string& service = "");

 private:
  Client(std::shared_ptr<grpc::Channel> channel, Options options);
  void Prepare(grpc::ClientContext* context) const;
  void Prepare(grpc::ClientContext* context, absl::Time deadline) const;

  const Options options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<weft::v1::Scheduler::Stub> stub_;
};

// absl::Status with the code and message of a gRPC status; each detail of
// its google.rpc.Status (binary error details) becomes a payload under the
// detail's type URL. So the server's retry hint (a google.rpc.RetryInfo
// detail, sent with RESOURCE_EXHAUSTED when the admission queue is full) is
// RetryDelayOf the result (common/retry_info.h).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace weft::client

#endif  // WEFT_CLIENT_CLIENT_H_
